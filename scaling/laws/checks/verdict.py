"""The ground the diagnostics stand on: the three statuses, the thresholds they are held to, one
check's record, and the verdict over many checks (the worst status decides).

    check = graded("a_width", 0.31, higher_is_better=False, fmt=".3f", what="width of a's 95% interval")
    check.status        # "caution": above 0.2, not beyond 0.5
    verdict([check])    # ("use with caution", ("caution: width of a's 95% interval: 0.310",))

The checks themselves are `scaling.laws.checks.diagnostics` (and the refits of `scaling.laws.checks.stability`);
each threshold is explained in docs/diagnostics.md and calibrated by bench/bench_diagnostics.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scaling.laws.checks.holdout import DEFAULT_FRACTION

PASS, CAUTION, NOT_IDENTIFIED = "pass", "caution", "not identified"
VERDICTS = {PASS: "trustworthy", CAUTION: "use with caution", NOT_IDENTIFIED: "not identified"}
_RANK = {PASS: 0, CAUTION: 1, NOT_IDENTIFIED: 2}

# (caution below / above, not identified below / above): see docs/diagnostics.md for each choice.
THRESHOLDS: dict[str, Any] = {   # a (caution, not identified) pair, or one number
    "n_decades": (1.0, 0.5),               # spread of N, decades: caution below 1, not identified below 0.5
    "d_decades": (1.0, 0.5),               # spread of D, decades
    "n_sizes": (5, 3),                     # distinct model sizes
    "n_token_counts": (4, 2),              # distinct token counts (a cross grid's D, an IsoFLOP's budgets)
    "n_budgets": 3,                        # compute budgets: one cannot be tested beyond, two leave no cut
    "bracketed_share": (0.3, None),        # points whose compute neighbourhood straddles N_opt(C)
    "compute_neighbourhood": 0.25,         # decades either side of a point's C that count as its budget
    "starts_at_optimum": (0.001, None),    # share of the start grid that reached the optimum
    "E_floor": (0.02, None),               # E / lowest loss: below, E sits at its bound (0)
    "exponent_edge": (0.02, 2.5),          # alpha, beta outside this range: at the edge of the grid
    "residual_rms": (0.02, 0.05),          # RMS of log residuals
    "far_share": (0.1, None),              # points off by more than far_error
    "far_error": 0.05,
    "E_over_min_loss": (1.0, None),        # E above the lowest observed loss
    "exponent_rel_width": (1.0, None),     # (hi - lo) / value of alpha, beta
    "a_width": (0.2, 0.5),                 # hi - lo of a
    "tpp_ratio": (4.0, 20.0),              # hi / lo of tokens per parameter at the reference compute
    "extrapolation": (10.0, None),         # reference compute / largest compute in the data
    "rollout_error": (0.03, None),         # median |relative error| predicting the larger sizes
    "lack_of_fit_p": (0.01, None),         # smallest p-value of the lack-of-fit F-tests
    "context_use": 0.04,                   # nats: a run beyond this uses its context (regime_check)
    "holdout_fraction": DEFAULT_FRACTION,
}
# What to do where the runs do not pin E (the E_floor and E_drift checks say it): bring E from outside the sweep.
E_ADVICE = "the runs do not pin the loss the law extrapolates to; consider --E, --E-prior or --E-from"


@dataclass(frozen=True)
class Check:
    """One diagnostic: its measured value, the threshold it was held to, the status, and why.
    margin: how far the value sits from the caution threshold, as a fraction of it (positive on
    the passing side, negative beyond it; None where not measured): a verdict decided by a check
    with a small margin could flip with another seed or a few more runs."""

    name: str
    value: float | None
    threshold: str
    status: str
    reason: str
    margin: float | None = None

    def to_json(self) -> dict:
        value = None if self.value is None or not math.isfinite(self.value) else float(self.value)
        out = {"name": self.name, "value": value, "threshold": self.threshold, "status": self.status,
               "reason": self.reason}
        if self.margin is not None and math.isfinite(self.margin):
            out["margin"] = float(self.margin)
        return out


@dataclass(frozen=True)
class Diagnostics:
    """Every check of a fit (`checks`, a `Check` each: name, value, threshold, status, reason), the
    verdict they give (the worst status: "trustworthy", "use with caution", "not identified") and
    its `reasons`, one sentence per check that did not pass; `failing()` lists those checks."""

    checks: tuple
    verdict: str
    reasons: tuple

    def failing(self) -> list[Check]:
        return [c for c in self.checks if c.status != PASS]

    def to_json(self) -> dict:
        """fit.json's two sections: "diagnostics" (the checks) and "verdict" (with its reasons)."""
        return {"diagnostics": [c.to_json() for c in self.checks],
                "verdict": {"verdict": self.verdict, "reasons": list(self.reasons)}}

    @classmethod
    def from_json(cls, obj: dict) -> Diagnostics:
        """From a fit.json dict holding "diagnostics" and "verdict"."""
        keys = ("name", "value", "threshold", "status", "reason", "margin")
        checks = tuple(Check(**{k: c.get(k) for k in keys}) for c in obj["diagnostics"])
        return cls(checks, obj["verdict"].get("verdict"), tuple(obj["verdict"].get("reasons") or ()))


def interval_text(lo: float | None, hi: float | None, fmt: str = ".3g") -> str:
    """An interval for a reason in words: "[lo, hi]", or where the bootstrap gave none (too few of
    its resamples have a compute-optimal allocation), that it has none."""
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "(none: too few resamples have a compute-optimal allocation)"
    return f"[{lo:{fmt}}, {hi:{fmt}}]"


def graded(name: str, value: float | None, *, higher_is_better: bool, unit: str = "", fmt: str = ".3g",
           what: str, key: str | None = None) -> Check:
    """A check against THRESHOLDS[key or name] = (caution, not identified), None for no bound."""
    caution, fail = THRESHOLDS[key or name]
    bad = (lambda v, t: v < t) if higher_is_better else (lambda v, t: v > t)
    side = ">=" if higher_is_better else "<="
    threshold = f"{side} {caution:{fmt}}{unit}" + (f" (not identified beyond {fail:{fmt}}{unit})"
                                                    if fail is not None else "")
    if value is None or not math.isfinite(value):
        return Check(name, value, threshold, NOT_IDENTIFIED if fail is not None else CAUTION,
                     f"{what}: not measurable")
    status = NOT_IDENTIFIED if fail is not None and bad(value, fail) else CAUTION if bad(value, caution) else PASS
    return Check(name, value, threshold, status, f"{what}: {value:{fmt}}{unit}",
                 margin=relative_margin(value, caution, higher_is_better))


def relative_margin(value: float, threshold: float, higher_is_better: bool) -> float | None:
    """(value - threshold) / |threshold|, signed so that the passing side is positive."""
    if not threshold:
        return None
    return (value - threshold) / abs(threshold) * (1.0 if higher_is_better else -1.0)


def verdict(checks: Iterable[Check]) -> tuple[str, tuple[str, ...]]:
    """The worst status decides; the reasons are the non-passing checks, worst first."""
    worst = max((c.status for c in checks), key=_RANK.__getitem__, default=PASS)
    failing = sorted((c for c in checks if c.status != PASS), key=lambda c: -_RANK[c.status])
    return VERDICTS[worst], tuple(f"{c.status}: {c.reason}" for c in failing)
