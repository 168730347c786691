"""Stability: do the law's answers survive refits without its largest runs?

    holdout_check(check, boot, reference_compute)   # the hold-out refit's alpha, a, tokens per
                                                    # parameter inside the full fit's intervals?
    rollout_check(data, result)                     # OLMo's ladder: fit the smaller sizes, predict the larger

A law that changes when its largest runs are removed is not yet converged. The refits start from
the full fit's distinct end points, as the bootstrap's resamples do (a subset's optimum lies near
the full one). Pure functions, no I/O.
"""

from __future__ import annotations

import math

import numpy as np

from scaling.errors import UsageError
from scaling.laws.checks.holdout import Holdout
from scaling.laws.checks.verdict import CAUTION, PASS, THRESHOLDS, Check, graded, interval_text
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.bootstrap import BootstrapResult
from scaling.laws.fitting.fitdata import FitData

ROLLOUT_SPLITS = 4     # at most: fit the smaller half, ..., all but the largest size
MIN_REFIT_POINTS = 6   # a refit of a subset on fewer points than this is not judged (5 constants)


def refit(data: FitData, keep: np.ndarray, result: fitting.FitResult) -> fitting.FitResult | None:
    """The fit of the kept points, from the full fit's distinct end points; None if they are too
    few, or if the refit runs off to constants too large for a float (the subset does not bound them)."""
    if keep.sum() < MIN_REFIT_POINTS or np.unique(data.n[keep]).size < 2 or np.unique(data.d[keep]).size < 2:
        return None
    try:
        return fitting.fit_law(data.n[keep], data.d[keep], data.loss[keep], delta=result.delta,
                               grid=result.end_points, fixed_E=result.fixed_E, E_prior=result.E_prior)
    except UsageError:          # the subset does not bound the constants
        return None


def holdout_check(check: Holdout, boot: BootstrapResult | None, reference_compute: float) -> Check:
    """Judge the hold-out refit (`holdout.holdout`, without the top ~20% by compute): do alpha, a
    and tokens per parameter stay inside the full fit's intervals?"""
    threshold = "alpha, a, tokens per parameter inside the full fit's 95% intervals"
    if check.law is None or check.n_train < MIN_REFIT_POINTS or boot is None:
        why = ("no bootstrap intervals" if boot is None
               else "the points below the top 20% by compute are too few, or do not bound the constants")
        return Check("holdout_stability", None, threshold, CAUTION, "cannot be judged: " + why)
    law = check.law
    if not law.has_optimum:
        return Check("holdout_stability", None, threshold, CAUTION,
                     f"without the top 20% by compute the refit has alpha = {law.alpha:.3g}, beta = {law.beta:.3g}: "
                     "no compute-optimal allocation at all")
    moved, margins = [], []
    for name, words, value in (("alpha", "alpha", law.alpha), ("a", "a", law.a),
                               ("tokens_per_param", "tokens per parameter", law.tokens_per_param(reference_compute))):
        lo, hi = boot.intervals[name]
        if not (math.isfinite(lo) and math.isfinite(hi)):
            continue                                    # no interval to leave: the interval checks say so
        margins.append(min(value - lo, hi - value) / (hi - lo) if hi > lo else -math.inf)
        if not (lo <= value <= hi):
            moved.append(f"{words} {value:.3g} outside {interval_text(lo, hi)}")
    if not margins:
        return Check("holdout_stability", None, threshold, CAUTION, "cannot be judged: the bootstrap gave no "
                     "interval of alpha, a or tokens per parameter to stay inside")
    # margin: the nearest approach to an interval's edge, as a fraction of that interval's width
    return Check("holdout_stability", float(len(moved)), threshold, CAUTION if moved else PASS,
                 (f"without the top {int(round(100 * THRESHOLDS['holdout_fraction']))}% by compute: "
                  + ("; ".join(moved) if moved else "alpha, a and tokens per parameter stay inside")),
                 margin=float(min(margins)))


def rollout(data: FitData, result: fitting.FitResult) -> list[dict]:
    """OLMo-style rollout: for each split, fit the sizes up to the k-th and predict the larger ones;
    the median absolute relative error of those predictions."""
    sizes = np.unique(data.n)
    out = []
    first = max(3, sizes.size // 2)
    splits = np.unique(np.linspace(first, sizes.size - 1, ROLLOUT_SPLITS).round().astype(int))
    for k in splits[(splits >= first) & (splits < sizes.size)]:
        keep = data.n <= sizes[k - 1]
        part = refit(data, keep, result)
        if part is None:
            continue
        pred = part.law.loss(data.n[~keep], data.d[~keep])
        err = np.abs(pred / data.loss[~keep] - 1.0)
        out.append({"fitted_sizes": int(k), "largest_fitted": float(sizes[k - 1]),
                    "predicted_points": int((~keep).sum()), "median_abs_rel_error": float(np.median(err))})
    return out


def rollout_check(data: FitData, result: fitting.FitResult) -> Check:
    splits = rollout(data, result)
    if not splits:
        return Check("rollout_error", None, "a split with >= 3 sizes fitted", CAUTION,
                     "too few sizes to fit the smaller ones and predict the larger")
    worst = max(s["median_abs_rel_error"] for s in splits)
    check = graded("rollout_error", worst, higher_is_better=False, fmt=".3g",
                   what="largest median |relative error| predicting larger sizes from smaller ones ("
                         + ", ".join(f"{s['fitted_sizes']} sizes: {100 * s['median_abs_rel_error']:.2g}%"
                                     for s in splits) + ")")
    return check
