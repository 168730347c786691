"""The parts of a fit that say what it was fitted from and how sure it is: fit.json's "data"
(`DataSummary`), "options" (`FitOptions`) and "ci" (`Intervals`) sections, each a frozen record that
reads and writes its own section. `LawFit` (scaling.laws.results.lawfit) holds one of each. Pure.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

from scaling.laws.fitting.fitdata import FitData
from scaling.laws.fitting.provenance import Provenance


@dataclass(frozen=True)
class DataSummary:
    """Which points were fitted: where from, how many, their digest and ranges, what was left out."""

    source: str | None = None
    n_points: int | None = None
    digest: str | None = None
    param_convention: str | None = None
    dropped: tuple = ()                      # ({"id", "reason"}, ...)
    filters: dict = field(default_factory=dict)
    n_range: list | None = None
    d_range: list | None = None
    c_range: list | None = None
    table: dict | None = None                # a table's path and columns, to read it again
    store: dict | None = None                # a run store's absolute path and run-table digest
    provenance: Provenance | None = None     # where the points came from, typed
    context_use: list | None = None          # [lowest, highest] final context use of the runs (nats)
    n_budgets: int | None = None             # distinct compute budgets (FitData.n_budgets); None: a file before it
    loss_range: list | None = None           # [lowest, highest] loss fitted; None: a file before it

    @classmethod
    def of(cls, data: FitData) -> DataSummary:
        r = data.ranges()
        use = data.context_use
        return cls(source=data.source, n_points=len(data), digest=data.digest,
                   param_convention=data.param_convention, dropped=tuple(d.to_dict() for d in data.dropped),
                   filters=dict(data.filters), n_range=r["n_range"], d_range=r["d_range"], c_range=r["c_range"],
                   table=data.table, store=data.store, provenance=data.provenance,
                   context_use=None if use is None or not use.size else [float(use.min()), float(use.max())],
                   n_budgets=data.n_budgets, loss_range=r["loss_range"])

    @classmethod
    def from_json(cls, data: dict) -> DataSummary:
        """From a checked "data" section; a file from before provenance was recorded has it read
        from its source's words (`Provenance.from_source`)."""
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "provenance"}
        recorded = Provenance.from_json(data.get("provenance"))
        return cls(**fields, provenance=recorded or Provenance.from_source(data.get("source")))

    def to_json(self) -> dict:
        return {"source": self.source, "n_points": self.n_points, "digest": self.digest,
                "param_convention": self.param_convention, "dropped": list(self.dropped),
                "filters": dict(self.filters), "n_range": self.n_range, "d_range": self.d_range,
                "c_range": self.c_range, **({"table": self.table} if self.table is not None else {}),
                **({"store": self.store} if self.store is not None else {}),
                **({"context_use": self.context_use} if self.context_use is not None else {}),
                **({"n_budgets": self.n_budgets} if self.n_budgets is not None else {}),
                **({"loss_range": self.loss_range} if self.loss_range is not None else {}),
                **({"provenance": self.provenance.to_json()} if self.provenance is not None else {})}


@dataclass(frozen=True)
class FitOptions:
    """How the fit was made: Huber delta, start grid, number of starts, a fixed E, bootstrap size."""

    delta: float | None = None
    grid: str | None = None
    n_starts: int | None = None
    fixed_E: float | None = None
    bootstrap: int = 0
    E_prior: dict | None = None     # {"mean", "sd", "scale"[, "source"]}: the Gaussian prior on E (objective.EPrior)

    def to_json(self) -> dict:
        return {"delta": self.delta, "grid": self.grid, "n_starts": self.n_starts,
                "fixed_E": self.fixed_E, "bootstrap": self.bootstrap,
                **({} if self.E_prior is None else {"E_prior": self.E_prior})}


@dataclass(frozen=True)
class Intervals:
    """Percentile bootstrap intervals, fit.json's "ci": `stored[name]` is [lo, hi] as the file
    holds it (a bound null where undefined); read one with `interval(name)` (as `LawFit.interval`
    does), which says "no interval" one way, None.
    widened_by: the factor every interval drawn from the resamples is widened by about its median,
    for the errors the lack-of-fit tests found shared between points (`scaling.laws.fitting.bootstrap.spread`)."""

    level: float
    n_resamples: int | None      # None in a fit.json that did not record it
    stored: dict
    widened_by: float = 1.0

    def interval(self, name: str) -> tuple[float, float] | None:
        """(lo, hi) of `name` when both bounds are finite numbers, else None."""
        pair = self.stored.get(name)
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or None in pair:
            return None
        lo, hi = (float(v) for v in pair)
        return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None

    def get(self, name: str) -> tuple[float, float] | None:
        """Deprecated: `interval(name)`, or `LawFit.interval(name)`."""
        warnings.warn("Intervals.get is deprecated: use LawFit.interval(name) (or Intervals.interval)",
                      DeprecationWarning, stacklevel=2)
        return self.interval(name)

    @property
    def bounds(self) -> dict:
        """Deprecated: `LawFit.intervals` ({name: (lo, hi) or None}); the file's lists are `stored`."""
        warnings.warn("Intervals.bounds is deprecated: use LawFit.intervals (or Intervals.stored, fit.json's lists)",
                      DeprecationWarning, stacklevel=2)
        return self.stored

    def to_json(self) -> dict:
        return {"level": self.level, "n_resamples": self.n_resamples, "widened_by": self.widened_by, **self.stored}

    @classmethod
    def from_json(cls, ci: dict) -> Intervals:
        """From fit.json's "ci": {"level", "n_resamples", "widened_by", name: [lo, hi], ...} (a
        fit.json written before widening existed has no "widened_by": 1)."""
        bounds = {k: v for k, v in ci.items() if k not in ("level", "n_resamples", "widened_by")}
        return cls(ci.get("level", 0.95), ci.get("n_resamples"), bounds, ci.get("widened_by", 1.0))
