"""The data-constrained part of a fit: what the runs that repeated data say.

    section = fit_repeated(data, bootstrap=200, seed=0)     # None unless some run repeats data
    section.law.r_d_star, section.interval("r_d_star"), section.to_json()

A run that trains on more tokens than its unique ones (D > U, `FitData.unique`) sees some of
them again; the ordinary law counts every repeated token as a fresh one. This section fits the
data-constrained law of Muennighoff et al. 2023 (scaling.laws.repeated.law: L(N, D, U) = the base
law at an effective data D', with repeated tokens decaying at the rate R_D*) to the same points
with the same Huber objective, and bootstraps its constants and R_D*. R_N* (excess parameters) is
left out: it needs runs far above N_opt(U), which a sweep that repeats its corpus a few times does
not have, so the excess-parameter decay is taken as none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from scaling.formats import json_safe
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.forms.law import PARAM_NAMES, Law
from scaling.laws.repeated.fit import LOG_R_BOUNDS, at_bound, bootstrap_repeated_law, fit_repeated_law
from scaling.laws.repeated.law import RepeatedLaw
from scaling.laws.repeated.plan import diminishing_epochs, plan_intervals, repeated_allocation

RESAMPLES = 200          # enough for R_D*'s interval; each is a local refit from the full one
LOG_R_BOUNDS_TEXT = "{:.3g} to {:.3g}".format(*np.exp(LOG_R_BOUNDS))
SAMPLE_NAMES = (*PARAM_NAMES, "r_d_star")


@dataclass(frozen=True)
class Repeated:
    """The data-constrained fit of points of which `n_repeated` repeat data (up to `max_epochs`).

    law: base constants and R_D*; ci: {"level", "n_resamples", name: [lo, hi]} for the base
    constants and r_d_star, or None without a bootstrap; samples: (R, 6) bootstrap constants E, A,
    B, alpha, beta, R_D* (from which the plan draws intervals), stored beside fit.json.
    """

    law: RepeatedLaw
    n_repeated: int
    max_epochs: float
    unique_range: list
    objective: float
    residual_rms: float
    message: str = ""
    ci: dict | None = None
    samples: np.ndarray | None = field(default=None, repr=False, compare=False)

    def interval(self, name: str) -> tuple | None:
        bounds = (self.ci or {}).get(name)
        return None if bounds is None else tuple(bounds)

    def to_json(self) -> dict:
        return json_safe({"params": self.law.base.to_dict(), "r_d_star": self.law.r_d_star,
                          "n_repeated": self.n_repeated, "max_epochs": self.max_epochs,
                          "unique_range": self.unique_range, "objective": self.objective,
                          "residual_rms": self.residual_rms, "message": self.message, "ci": self.ci})

    @classmethod
    def from_json(cls, obj: dict) -> Repeated:
        law = RepeatedLaw(Law.from_dict(obj["params"]), obj.get("r_d_star"))
        return cls(law, int(obj["n_repeated"]), float(obj["max_epochs"]), list(obj["unique_range"]),
                   float(obj["objective"]), float(obj["residual_rms"]), obj.get("message") or "", obj.get("ci"))

    def laws(self) -> list[RepeatedLaw]:
        """One law per bootstrap sample (those whose constants are finite)."""
        rows = [] if self.samples is None else self.samples[np.isfinite(self.samples).all(axis=1)]
        return [RepeatedLaw(Law(*row[:5]), float(row[5])) for row in rows]


def fit_repeated(data: FitData, *, bootstrap: int = RESAMPLES, seed: int = 0, delta: float | None = None,
                 grid: dict | npt.ArrayLike | None = None, force: bool = False) -> Repeated | None:
    """The data-constrained fit of `data`, when some of its runs repeat data (or `force` and the
    unique tokens are known); None otherwise. grid: the starts, as `fit.fit_law` takes them."""
    unique, epochs = data.unique, data.epochs
    if unique is None or epochs is None or not (data.repeats or force):
        return None
    options: dict[str, Any] = {} if delta is None else {"delta": delta}
    fit = fit_repeated_law(data.n, data.d, unique, data.loss, grid=grid, **options)
    ci: dict[str, Any] | None = None
    samples = None
    if bootstrap and fit.r_d_star_determined:
        boot = bootstrap_repeated_law(data.n, data.d, unique, data.loss, fit, n_resamples=bootstrap, seed=seed)
        ci = {"level": boot.level, "n_resamples": boot.n_resamples,
              **{k: [float(lo), float(hi)] for k, (lo, hi) in boot.intervals.items()}}
        samples = np.column_stack([boot.samples[k] for k in SAMPLE_NAMES])
    max_epochs = float(epochs.max())
    message = fit.message
    if ci is not None and at_bound(ci["r_d_star"]).any():
        message = "; ".join(filter(None, [message, (
            f"R_D*'s interval reaches a bound of the search ({LOG_R_BOUNDS_TEXT}): runs of up to {max_epochs:.3g} "
            "epochs do not determine it (no decay is measurable there; longer repetition would show one)")]))
    return Repeated(fit.law, fit.n_repeated, max_epochs, [float(unique.min()), float(unique.max())],
                    fit.objective, fit.residual_rms, message, ci, samples)


@dataclass(frozen=True)
class RepeatedPlan:
    """The best split of each budget with only `unique` tokens of data, under `law` (whose R_D* is
    `source`: fitted to your runs, or published), with intervals over its bootstrap laws."""

    law: RepeatedLaw
    source: str
    unique: float
    allocations: list                  # plan.RepeatedAllocation, one per budget
    intervals: list                    # plan.plan_intervals per budget, or None
    diminishing_epochs: float          # beyond it a repeated token is worth < 1/e of a fresh one

    def to_json(self) -> dict:
        return json_safe({"r_d_star": self.law.r_d_star, "r_n_star": self.law.r_n_star, "source": self.source,
                          "unique_tokens": self.unique, "diminishing_epochs": self.diminishing_epochs,
                          "plans": [{**a.to_dict(), "intervals": iv}
                                    for a, iv in zip(self.allocations, self.intervals)]})


def plan_repeated(law: RepeatedLaw, computes: Iterable[float], unique: float, *, source: str,
                  laws: Sequence[RepeatedLaw] = ()) -> RepeatedPlan:
    """`repeated_allocation` at each budget, with intervals over `laws` (bootstrap samples) when given."""
    allocations = [repeated_allocation(law, c, unique) for c in computes]
    intervals = [plan_intervals(laws, c, unique) if laws else None for c in computes]
    return RepeatedPlan(law, source, float(unique), allocations, intervals, diminishing_epochs(law))
