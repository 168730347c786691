"""The (N, D, loss) points a law is fitted to, validated and typed: `FitData`.

Every reader (`scaling.laws.fitting.readers`: a run store, a table, a packaged dataset) returns one:
positive, finite arrays n (parameters), d (tokens) and loss, a name for the source, the
identifier of each point, the points left out and why, and a sha256 digest of the arrays used (so
a fit.json says exactly which numbers it was fitted to). No I/O here.

    data = FitData(n=n, d=d, loss=loss, source="my sweep")    # checked as it is made
    data.compute, data.canonical(), data.take(indices)        # C per point, a fixed row order, a subset

Leaving points out (`apply_filters`) and checking enough remain (`check_fittable`): `scaling.laws.fitting.selection`.

Bad input raises `UsageError` with the problem named: which array has how many non-positive or
non-finite values and where the first is, an unknown parameter convention.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.formats import MAX_COUNT, MAX_LOSS
from scaling.laws.fitting.provenance import Provenance
from scaling.train.compute import FlopsPerToken, fit_flops_per_token
from scaling.train.counts import PARAM_CONVENTIONS


@dataclass(frozen=True)
class Dropped:
    """A point (run or row) left out of the fit, and why."""

    id: str | int
    reason: str

    def to_dict(self) -> dict:
        return {"id": self.id, "reason": self.reason}


@dataclass(frozen=True)
class FitData:
    """Points to fit: N parameters, D tokens, final loss; all positive and finite.

    ids: one identifier per point (run id, or row index of the table). dropped: what was left
    out and why. filters: the filters applied (see `apply_filters`). n_other: the same points' N
    counted by the other convention (non-embedding <-> total), where the source gives both, so the
    fit can show how much the convention moves the answer. budgets: each point's planned compute
    budget, where the source records one (an IsoFLOP sweep), for Approach 2. unique: the unique
    tokens each run drew its D from, where the source gives them (a run store records them; a table
    with --unique-col or --unique-tokens): D > U repeats data, which the data-constrained fit
    discounts. table: how a table was read (its path and columns), so a report can read it again.
    store: the run store's absolute path and the digest of its run table (`store.table_digest`),
    so a later command finds the same store from any folder and refuses one that has changed.
    flops: the FLOPs a token costs as a function of N, c(N) = 6 kappa N^gamma, fitted to the
    points (6 N for a table); spent: each point's training compute in `flops.measure` where the
    source counts it (a run store), else C = c(N) D. budget_measure: what `budgets` count.
    context_use: each run's final context use in nats (`scaling.train.batches.context_use`), where
    the store records it for every point; the diagnostics look for runs on both sides of the change.
    digest: sha256 of the float64 arrays (n, d, loss) in this order, computed on construction.
    """

    n: np.ndarray
    d: np.ndarray
    loss: np.ndarray
    source: str
    ids: tuple = ()
    dropped: tuple = ()
    param_convention: str | None = None
    filters: dict = field(default_factory=dict)
    n_other: np.ndarray | None = None
    budgets: np.ndarray | None = None
    unique: np.ndarray | None = None
    table: dict | None = None
    store: dict | None = None
    flops: FlopsPerToken = FlopsPerToken()
    spent: np.ndarray | None = None
    budget_measure: str | None = None
    provenance: Provenance | None = None     # where the points came from, typed (fit.json's data.provenance)
    context_use: np.ndarray | None = None
    digest: str = field(init=False, default="")

    def __post_init__(self) -> None:
        for name in ("n", "d", "loss"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        sizes = {k: getattr(self, k).size for k in ("n", "d", "loss")}
        if len(set(sizes.values())) != 1:
            raise UsageError(f"{self.source}: n, d and loss differ in length ({sizes})")
        ids = tuple(self.ids) if self.ids else tuple(range(self.n.size))
        if len(ids) != self.n.size:
            raise UsageError(f"{self.source}: {len(ids)} ids for {self.n.size} points")
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "dropped", tuple(self.dropped))
        if self.param_convention is not None and self.param_convention not in PARAM_CONVENTIONS:
            raise UsageError(f"parameter convention must be one of {', '.join(PARAM_CONVENTIONS)}; "
                             f"got {self.param_convention!r}")
        labels = {"n": "N (parameters)", "d": "D (tokens)", "loss": "loss", "budgets": "compute budget",
                  "n_other": f"N ({self.other_convention} parameters)", "unique": "unique tokens",
                  "spent": f"training compute ({self.flops.measure})"}
        for name, label in labels.items():
            values = getattr(self, name)
            if values is None:                       # budgets, n_other and unique are optional
                continue
            values = _frozen(values)
            if values.size != self.n.size:
                raise UsageError(f"{self.source}: {values.size} values of {label} for {self.n.size} points")
            _check_positive(values, label, self.source, ids)
            object.__setattr__(self, name, values)
        if self.context_use is not None:            # nats, of either sign
            context_use = _frozen(self.context_use)
            if context_use.size != self.n.size or not np.isfinite(context_use).all():
                raise UsageError(f"{self.source}: context use must be one finite value per point")
            object.__setattr__(self, "context_use", context_use)
        object.__setattr__(self, "digest", digest_arrays(self.n, self.d, self.loss))

    def __len__(self) -> int:
        return int(self.n.size)

    @property
    def epochs(self) -> np.ndarray | None:
        """D / U for each point: above 1, the run saw some tokens more than once (None without U)."""
        return None if self.unique is None else self.d / self.unique

    @property
    def repeats(self) -> bool:
        """Whether any run trained on more tokens than its unique ones."""
        return self.unique is not None and bool((self.d > self.unique).any())

    @property
    def compute(self) -> np.ndarray:
        """Each point's training compute: as the source counted it (`spent`), else C = c(N) D,
        6 N D for a table (inf past a float: the fit refuses such a point, naming it)."""
        if self.spent is not None:
            return self.spent
        with np.errstate(over="ignore"):
            return 6.0 * self.n * self.d if self.flops.is_six_n else self.flops.per_token(self.n) * self.d

    @property
    def budgets_in_measure(self) -> bool:
        """Whether the recorded budgets count compute as the fit does (Approach 2 then groups by
        their values; budgets in another measure only say which runs belong together)."""
        return self.budgets is not None and self.budget_measure == self.flops.measure

    @property
    def other_convention(self) -> str | None:
        """The convention of `n_other`: the one that is not `param_convention`."""
        if self.param_convention is None:
            return None
        return "total" if self.param_convention == "non_embedding" else "non_embedding"

    def counted_other_way(self) -> FitData | None:
        """The same points with N by the other convention (None where the source gave one only);
        the same compute, so c(N) is fitted again in that N."""
        if self.n_other is None or self.param_convention is None:
            return None
        flops = self.flops if self.spent is None else \
            fit_flops_per_token(self.n_other, self.spent / self.d, self.flops.measure)
        return replace(self, n=self.n_other, n_other=self.n, param_convention=self.other_convention, flops=flops)

    def take(self, idx: npt.ArrayLike, **changes: Any) -> FitData:
        """The points at positions `idx`, in that order, every per-point array with them."""
        idx = np.asarray(idx, dtype=int)
        per_point: dict[str, Any] = {k: None if getattr(self, k) is None else getattr(self, k)[idx]
                     for k in ("n_other", "budgets", "unique", "spent", "context_use")}
        return replace(self, n=self.n[idx], d=self.d[idx], loss=self.loss[idx],
                       ids=tuple(self.ids[i] for i in idx), **per_point, **changes)

    def canonical(self) -> FitData:
        """The points sorted by (N, D, loss): a table's row order then changes nothing a fit
        computes, its bootstrap draws included (resamples index points by position)."""
        return self.take(np.lexsort((self.loss, self.d, self.n)))

    @property
    def n_sizes(self) -> int:
        return int(np.unique(self.n).size)

    def budget_levels(self) -> np.ndarray:
        """Each point's compute budget as a level 0, 1, ... (`budget_levels` of the planned budgets
        where recorded, else of the compute)."""
        return budget_levels(self.budgets if self.budgets is not None else self.compute)

    @property
    def n_budgets(self) -> int:
        """How many distinct compute budgets the points lie on (near-equal ones count once)."""
        return int(self.budget_levels().max()) + 1 if len(self) else 0

    def ranges(self) -> dict:
        """[min, max] of N, D, C = 6ND, D/N and the loss (None when there are no points)."""
        if len(self) == 0:
            return {"n_range": None, "d_range": None, "c_range": None, "tokens_per_param_range": None,
                    "loss_range": None}
        tpp = self.d / self.n
        return {
            "n_range": [float(self.n.min()), float(self.n.max())],
            "d_range": [float(self.d.min()), float(self.d.max())],
            "c_range": [float(self.compute.min()), float(self.compute.max())],
            "tokens_per_param_range": [float(tpp.min()), float(tpp.max())],
            "loss_range": [float(self.loss.min()), float(self.loss.max())],
        }


# Budgets within this factor of the smallest of their group are one budget: a table's rounded N and
# D put the runs of one IsoFLOP budget 1e-9 apart in 6 N D (and an exact count a few percent apart),
# where sweeps space their budgets 2-10x apart.
SAME_BUDGET = 1.25


def budget_levels(values: npt.ArrayLike) -> np.ndarray:
    """A level per value, 0 for the smallest budget: values in increasing order start a new level
    where they pass SAME_BUDGET times the first value of the current one (a spread of compute, as a
    cross grid's, gives many levels; one budget rounded many ways, one)."""
    v = np.asarray(values, dtype=float)
    levels = np.empty(v.size, dtype=int)
    level, first = -1, -math.inf
    for i in np.argsort(v, kind="stable"):
        if not v[i] <= first * SAME_BUDGET:
            level, first = level + 1, v[i]
        levels[i] = level
    return levels


def _frozen(values: npt.ArrayLike) -> np.ndarray:
    """A flat, read-only float64 copy."""
    v = np.array(values, dtype=float).ravel()
    v.setflags(write=False)
    return v


def digest_arrays(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike) -> str:
    """sha256 hex of the little-endian float64 bytes of n, then d, then loss."""
    h = hashlib.sha256()
    for v in (n, d, loss):
        h.update(np.ascontiguousarray(np.asarray(v, dtype="<f8")).tobytes())
    return h.hexdigest()


def not_positive(values: np.ndarray) -> tuple[int, int] | None:
    """(how many, index of the first) of the values that are not positive and finite; None: all are."""
    bad = ~np.isfinite(values) | (values <= 0)
    return (int(bad.sum()), int(np.flatnonzero(bad)[0])) if bad.any() else None




def _check_positive(values: np.ndarray, label: str, source: str, ids: Sequence[object]) -> None:
    if found := not_positive(values):
        count, first = found
        raise UsageError(f"{source}: {label} must be positive and finite, but {count} of "
                         f"{values.size} rows are not (first: {_describe_id(ids[first])}, value "
                         f"{show_cell(values[first])})")
    largest = MAX_LOSS if label == "loss" else MAX_COUNT
    if (values > largest).any():
        first = int(np.flatnonzero(values > largest)[0])
        raise UsageError(f"{source}: {label} must be at most {largest:g}, but {int((values > largest).sum())} of "
                         f"{values.size} rows are not (first: {_describe_id(ids[first])}, value {values[first]:g})")


def show_cell(value: object) -> str:
    """A cell for a message: strings quoted, numbers and missing values plain (nan, -1.0, None)."""
    return repr(value) if isinstance(value, str) else str(value)


def _describe_id(identifier: object) -> str:
    return f"row index {identifier}" if isinstance(identifier, (int, np.integer)) else f"run {identifier}"


