"""Whether to trust a fitted law: checks over (data, fit, bootstrap) and a verdict with its reasons.

    diag = diagnose(data, optimum, boot, reference_compute=C)
    diag.verdict            # "trustworthy", "use with caution" or "not identified"
    diag.reasons            # the checks that decided it, one line each
    [c.to_json() for c in diag.checks]   # name, value, threshold, status, reason

A small hold-out error does not mean the answer is determined: a law can fit its points to 1% and
still leave tokens per parameter anywhere between 6 and 12,000. So the checks look at the design
(how far N and D spread, whether the runs bracket the fitted optimum), at the optimiser (do the
starts agree, did a constant run to its bound), at the fit (residuals, E against the lowest loss),
at the uncertainty of the answer itself (interval widths of alpha, beta, a and tokens per
parameter), at extrapolation, and at stability (refits without the largest runs; OLMo-style
rollout: fit the smaller sizes, predict the larger ones: `scaling.laws.checks.stability`).

Each check has a status: "pass", "caution" or "not identified"; the verdict is the worst of them
("not identified" > "use with caution" > "trustworthy"). The statuses, the Check record and the
verdict are `scaling.laws.checks.verdict`; the thresholds are all in its THRESHOLDS, explained in
docs/diagnostics.md and calibrated on simulated sweeps (bench/bench_diagnostics.py). Pure
functions, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from scaling.errors import UsageError
from scaling.laws.checks.holdout import Holdout
from scaling.laws.checks.lack_of_fit import LackOfFit
from scaling.laws.checks.stability import holdout_check, rollout_check
from scaling.laws.checks.verdict import (
    CAUTION,
    E_ADVICE,
    NOT_IDENTIFIED,
    PASS,
    THRESHOLDS,
    Check,
    Diagnostics,
    graded,
    interval_text,
    relative_margin,
    verdict,
)
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.fitdata import SAME_BUDGET, FitData
from scaling.laws.forms.law import Law
from scaling.laws.optimal import compare
from scaling.laws.optimal.allocation import model_optimum

if TYPE_CHECKING:
    from scaling.laws.results.fit_sections import Intervals

# --------------------------------------------------------------------------------------------
# The design


def design_checks(data: FitData) -> list[Check]:
    n_dec = math.log10(data.n.max() / data.n.min())
    d_dec = math.log10(data.d.max() / data.d.min())
    token_counts = np.unique(np.round(np.log10(data.d), 3)).size
    return [
        graded("n_decades", n_dec, higher_is_better=True, fmt=".2f", unit=" decades",
               what="N spans (alpha and a need sizes far apart)"),
        graded("d_decades", d_dec, higher_is_better=True, fmt=".2f", unit=" decades",
               what="D spans (beta and a need token counts far apart)"),
        graded("n_sizes", data.n_sizes, higher_is_better=True, fmt="d", what="distinct model sizes"),
        graded("n_token_counts", token_counts, higher_is_better=True, fmt="d", what="distinct token counts"),
        budgets_check(data),
    ]


def budgets_check(data: FitData) -> Check:
    """CAUTION where the runs lie on fewer than THRESHOLDS["n_budgets"] compute budgets (near-equal
    ones count once: `fitdata.SAME_BUDGET`). On one budget the law's scaling beyond it rests on its
    form alone, and no refit of fewer runs can test it: such a fit gives no interval beyond its data
    (in simulation, the intervals of one-budget sweeps held 20 of 63 runs 3-30x beyond). On two, no
    backtest cut has two budgets below it: how far the law predicts is the public tables' rule."""
    k = data.n_budgets
    threshold = f">= {THRESHOLDS['n_budgets']} compute budgets (within {SAME_BUDGET:g}x of each other count as one)"
    if k >= THRESHOLDS["n_budgets"]:
        return Check("n_budgets", float(k), threshold, PASS, f"runs at {k} compute budgets")
    if k == 1:
        why = (f"every run lies on one compute budget (C = {float(np.median(data.compute)):.3g} FLOPs): the law's "
               "scaling beyond it rests on its form alone and cannot be tested on these runs, so it gives no "
               "interval beyond its data")
    else:
        why = (f"the runs lie on {k} compute budgets: no backtest cut has two budgets below it, so how far the law "
               "predicts rests on the public tables' rule, not on this table")
    return Check("n_budgets", float(k), threshold, CAUTION, why)


def bracketed_share(data: FitData, law: Law) -> float:
    """Share of points whose compute neighbourhood (within THRESHOLDS["compute_neighbourhood"]
    decades) has runs on both sides of the law's N_opt at that point's compute: the IsoFLOP
    condition for the optimum to be measured rather than extrapolated.

    Point i's neighbourhood is a contiguous run of the points sorted by log compute, so "a run
    below N_opt" is "the smallest N in the run is <= N_opt" and likewise above: O(n log n) time and
    O(n) memory, the same answer as comparing every pair (n x n; 1e6 points would need TiBs)."""
    log_c = np.log10(data.compute)
    order = np.argsort(log_c, kind="stable")
    x, n = log_c[order], np.asarray(data.n, dtype=float)[order]
    n_opt = np.asarray(law.n_opt(data.compute), dtype=float)[order]
    lo, hi = _neighbourhoods(x, THRESHOLDS["compute_neighbourhood"])
    below = _range_reduce(n, lo, hi, np.minimum) <= n_opt
    above = _range_reduce(n, lo, hi, np.maximum) >= n_opt
    return float(np.mean(below & above))


def _neighbourhoods(x: np.ndarray, width: float) -> tuple[np.ndarray, np.ndarray]:
    """For sorted `x`, each i's [lo, hi) with |x[j] - x[i]| <= width exactly as floats compute it:
    a bisection on that very test (a searchsorted on x[i] -+ width could round the other way)."""
    i = np.arange(len(x))

    def first(inside_from_left: bool) -> np.ndarray:
        # The first j in [0, i] inside (left edge), or the first j in [i, n] outside (right edge).
        a, b = (np.zeros_like(i), i) if inside_from_left else (i, np.full_like(i, len(x)))
        while (a < b).any():
            m = (a + b) // 2
            probe = x[np.minimum(m, len(x) - 1)]
            hit = (x - probe <= width) if inside_from_left else (m < len(x)) & (probe - x > width)
            moving = a < b                   # a settled one stays put
            a, b = np.where(moving & ~hit, m + 1, a), np.where(moving & hit, m, b)
        return a

    return first(True), first(False)


def _range_reduce(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, op: np.ufunc) -> np.ndarray:
    """op (np.minimum or np.maximum) over values[lo[i]:hi[i]] for every i (each range non-empty):
    a sparse table built one level at a time, a query answered at its level by two overlapping
    halves, so memory stays O(n)."""
    out = np.empty(len(lo), dtype=values.dtype)
    level = np.floor(np.log2(hi - lo)).astype(int)
    table, span = values, 1                  # table[j] = op over values[j : j + span]
    for k in range(int(level.max()) + 1 if len(lo) else 0):
        at = np.flatnonzero(level == k)
        out[at] = op(table[lo[at]], table[hi[at] - span])
        table, span = op(table[:-span], table[span:]), span * 2
    return out


def bracketing_check(data: FitData, law: Law) -> Check:
    if not law.has_optimum:
        return Check("bracketed_share", None, "alpha, beta > 0", NOT_IDENTIFIED,
                     f"alpha = {law.alpha:.3g}, beta = {law.beta:.3g}: no compute-optimal allocation exists")
    try:        # exponents near 0 (a flat table) put the optimum at N = 1e183 on D = 1e-164: no model
        model_optimum(law, data.compute)
    except UsageError as exc:
        return Check("bracketed_share", None, "an optimum of N, D >= 1", NOT_IDENTIFIED, str(exc))
    share = bracketed_share(data, law)
    check = graded("bracketed_share", share, higher_is_better=True, fmt=".2f",
                   what="share of points whose budget has runs on both sides of the fitted N_opt")
    if check.status != PASS:
        check = Check(check.name, share, check.threshold, check.status,
                      check.reason + " (the optimum is extrapolated from one side: an IsoFLOP design "
                                     "centred on it would measure it)")
    return check


# --------------------------------------------------------------------------------------------
# The optimiser and the fit


def optimiser_checks(data: FitData, result: fitting.FitResult) -> list[Check]:
    law = result.law
    share = result.n_starts_at_optimum / max(result.n_starts, 1)
    lo, hi = THRESHOLDS["exponent_edge"]
    edge = [f"{k} = {v:.3g}" for k, v in (("alpha", law.alpha), ("beta", law.beta)) if not lo <= v <= hi]
    return [
        graded("starts_at_optimum", share, higher_is_better=True, fmt=".3g",
               what=f"share of starts at the optimum ({result.n_starts_at_optimum} of {result.n_starts}; "
                     "few means a flat, ill-determined valley)"),
        _advised(graded("E_floor", law.E / float(data.loss.min()), higher_is_better=True, fmt=".3g",
                        what=f"E / lowest loss (E = {law.E:.4g}; near 0, E sits at its bound and A, alpha "
                              "absorb the floor)")),
        Check("exponent_edge", None, f"alpha, beta in [{lo:g}, {hi:g}]", CAUTION if edge else PASS,
              ("exponents at the edge of the start grid: " + ", ".join(edge)) if edge
              else f"alpha = {law.alpha:.3g}, beta = {law.beta:.3g}, inside the start grid"),
    ]


def _advised(check: Check) -> Check:
    """An E check that did not pass, with what to do about it (E_ADVICE)."""
    return check if check.status == PASS else replace(check, reason=f"{check.reason}: {E_ADVICE}")


def residual_checks(data: FitData, law: Law) -> list[Check]:
    rel = law.loss(data.n, data.d) / data.loss - 1.0
    rms = float(np.sqrt(np.mean(np.log1p(rel) ** 2)))
    far = float(np.mean(np.abs(rel) > THRESHOLDS["far_error"]))
    return [
        graded("residual_rms", rms, higher_is_better=False, fmt=".3g",
               what="RMS of log residuals (the law's form against the points)"),
        graded("far_share", far, higher_is_better=False, fmt=".2f",
               what=f"share of points off by more than {100 * THRESHOLDS['far_error']:g}%"),
        graded("E_over_min_loss", law.E / float(data.loss.min()), higher_is_better=False, fmt=".3g",
               what=f"E / lowest observed loss (E = {law.E:.4g} cannot lie above a loss that was reached)"),
    ]


# --------------------------------------------------------------------------------------------
# The answer's uncertainty, and extrapolation


def interval_checks(boot: resampling.BootstrapResult | None, min_loss: float) -> list[Check]:
    if boot is None:
        return [Check("intervals", None, "a bootstrap", CAUTION,
                      "no bootstrap: the answer's uncertainty is unknown")]
    iv = boot.intervals
    checks = [graded("E_lower_bound", iv["E"][0] / min_loss, higher_is_better=True, fmt=".3g", key="E_floor",
                     what=f"lower end of E's 95% interval over the lowest loss (E in [{iv['E'][0]:.3g}, "
                           f"{iv['E'][1]:.3g}]; near 0, the floor is not determined)")]
    for name in ("alpha", "beta"):
        lo, hi = iv[name]
        mid = float(np.median(boot.samples[name]))
        checks.append(graded(f"{name}_rel_width", (hi - lo) / abs(mid) if mid else math.inf,
                             higher_is_better=False, fmt=".2f", key="exponent_rel_width",
                             what=f"{name}'s 95% interval {interval_text(lo, hi)} relative to its median"))
    lo, hi = iv["a"]
    checks.append(graded("a_width", hi - lo, higher_is_better=False, fmt=".3f",
                         what=f"width of a's 95% interval {interval_text(lo, hi, '.3f')}"))
    lo, hi = iv["tokens_per_param"]
    checks.append(graded("tpp_ratio", hi / lo if lo > 0 else math.inf, higher_is_better=False, fmt=".3g",
                         what=f"tokens per parameter's 95% interval {interval_text(lo, hi)}, hi / lo"))
    return checks


def lack_of_fit_check(lof: LackOfFit) -> Check:
    """Residual structure by size, budget or token count, or beyond the replicates' scatter: the
    bootstrap resamples points as if independent, so a systematic error makes its intervals too
    narrow: the fit widens them by the tests' design effect, and a p below the threshold cautions
    that the law's form or the runs err systematically."""
    caution = THRESHOLDS["lack_of_fit_p"][0]
    threshold = f"every lack-of-fit F-test p >= {caution:g}"
    worst = lof.worst
    if worst is None:
        return Check("lack_of_fit", None, threshold, PASS,
                     "no size, budget or token count holds two points twice: residual structure cannot be tested")
    tested = ", ".join(f"by {t.by} p = {t.p_value:.2g}" for t in lof.tests)
    margin = relative_margin(worst.p_value, caution, higher_is_better=True)
    factor = lof.interval_factor
    widened = f"; the intervals are widened {factor:.2f}x for the errors shared within groups" if factor > 1 else ""
    if worst.p_value >= caution:
        return Check("lack_of_fit", worst.p_value, threshold, PASS,
                     f"no significant structure in the residuals ({tested}){widened}", margin=margin)
    named = "; ".join(f"{worst.by} {v:.3g}: {m:+.2f}% over {k} points" for v, k, m in worst.offenders[:4])
    return Check("lack_of_fit", worst.p_value, threshold, CAUTION,
                 f"the residuals share errors {_BY[worst.by]} ({tested})" + (f"; {named}" if named else "")
                 + (widened or ": the intervals, which assume independent scatter, are too narrow"), margin=margin)


_BY = {"size": "by model size (a per-size error such as a mistuned learning rate)",
       "budget": "by budget", "tokens": "by token count",
       "replicates": "beyond the scatter between replicates (the law's form misses the points)"}


def regime_check(data: FitData) -> list[Check]:
    """Runs on both sides of the change to using context (`FitData.context_use`): small models
    first learn what a few tokens predict and only after millions of tokens use the rest of their
    context, falling faster from there. One law across the change carries the jump as error, and
    predicts neither side: on the builtin corpus a sweep of 9 such runs and 11 others was `not
    identified` (docs/study.md). The threshold: a run's value scatters by about 0.01 (sd) from one
    evaluation to the next on the demo's 32K validation tokens (consecutive differences: median
    0.008, 95th percentile 0.029), and runs past the change end at +0.03 to +0.11 (those between 0
    and the threshold count on neither side). No check where the runs do not
    record it."""
    use = data.context_use
    if use is None:
        return []
    users, others = use > THRESHOLDS["context_use"], use < 0.0
    spread = f"context use {use.min():+.3f} to {use.max():+.3f} nats"
    threshold = f"not both runs beyond +{THRESHOLDS['context_use']:g} nats of context use and runs below 0"
    if users.any() and others.any():
        return [Check("context_regime", float(users.mean()), threshold, CAUTION,
                      f"{int(users.sum())} of {len(use)} runs use their context and {int(others.sum())} do not "
                      f"({spread}): the sweep straddles the change, which one law cannot follow; train "
                      "every run past it (more tokens), or fit the runs of one side")]
    return [Check("context_regime", float(users.mean()), threshold, PASS,
                  f"every run on one side of the change to using context ({spread})")]


def extrapolation_check(data: FitData, reference_compute: float) -> Check:
    factor = reference_compute / float(data.compute.max())
    return graded("extrapolation", factor, higher_is_better=False, fmt=".3g",
                  what="reference compute over the largest run's")


# --------------------------------------------------------------------------------------------
# Agreement: between the approaches, and between the conventions for N


def approaches_check(approaches: dict | None, law: Law, ci: Intervals | None) -> Check:
    """Do Hoffmann's Approaches 1-3 give the same a within their intervals?"""
    threshold = "Approaches 1, 2, 3 and VPNLS agree on a within their intervals"
    if not approaches:
        return Check("approaches_agree", None, threshold, PASS, "only the parametric fit: nothing to compare")
    rows, clashes = compare.compare_approaches(approaches, law, ci)
    warnings = compare.disagreement(clashes)
    grouping = (approaches.get("approach_2") or {}).get("grouping") or ""
    if grouping.startswith("log-spaced bins"):
        warnings = warnings + [f"the runs' compute does not fall on shared budgets, so Approach 2 groups it in "
                               f"{grouping[len('log-spaced '):]}, which can mix runs of different compute in one "
                               "parabola; give each run's planned budget (a budget column) if the sweep had them"]
    unsupported = [f"{compare.APPROACH_NAMES.get(k, k)}: {e.get('reason')}" for k, e in sorted(approaches.items())
                   if isinstance(e, dict) and e.get("a") is None and e.get("reason")]
    reason = "; ".join(w.rstrip(".") for w in warnings + unsupported) if warnings or unsupported else \
        "a = " + ", ".join(f"{r['a']:.3f} ({r['name']})" for r in rows)
    return Check("approaches_agree", float(len(clashes)), threshold, CAUTION if warnings else PASS, reason)


def convention_check(conventions: dict, used: str) -> Check:
    """Does counting N with or without embeddings move a or tokens per parameter beyond their
    intervals? (Pearce & Song 2024; Porian et al. 2024: at small N it can, invisibly.)"""
    threshold = "a and tokens per parameter of both conventions inside each other's intervals"
    other = next(k for k in conventions if k != used)
    mine, theirs = conventions[used], conventions[other]
    if "reason" in theirs:
        return Check("param_convention", None, threshold, CAUTION,
                     f"N counted as {other} gives no fit ({theirs['reason']})")
    apart = []
    for key in ("a", "tokens_per_param"):
        x, y, ix, iy = mine.get(key), theirs.get(key), mine.get(f"{key}_ci"), theirs.get(f"{key}_ci")
        if None in (x, y) or not ix or not iy or None in ix or None in iy:
            continue
        if ix[1] < iy[0] or iy[1] < ix[0]:
            apart.append(f"{key} {x:.3g} [{ix[0]:.3g}, {ix[1]:.3g}] ({used}) against {y:.3g} "
                         f"[{iy[0]:.3g}, {iy[1]:.3g}] ({other})")
    reason = ("N's convention moves the answer: " + "; ".join(apart)) if apart else \
        f"a is {_fmt(mine.get('a'))} counting {used} parameters, {_fmt(theirs.get('a'))} counting {other}"
    return Check("param_convention", float(len(apart)), threshold, CAUTION if apart else PASS, reason)


def _fmt(x: float | None) -> str:
    return "undefined" if x is None else f"{x:.3g}"


# --------------------------------------------------------------------------------------------
# The verdict


def diagnose(data: FitData, result: fitting.FitResult, boot: resampling.BootstrapResult | None, *,
             reference_compute: float, lof: LackOfFit, holdout: Holdout, extra: tuple = ()) -> Diagnostics:
    """All checks and the verdict. `lof`: the lack-of-fit tests of the fit's residuals. `holdout`:
    the refit without the top THRESHOLDS["holdout_fraction"] by compute (`holdout.holdout`).
    `extra`: further Checks made by the caller (e.g. the agreement of Approaches 1-3, the
    parameter convention), judged with the rest."""
    checks = [*design_checks(data), bracketing_check(data, result.law), *optimiser_checks(data, result),
              *residual_checks(data, result.law), lack_of_fit_check(lof), *regime_check(data),
              *interval_checks(boot, float(data.loss.min())),
              extrapolation_check(data, reference_compute), holdout_check(holdout, boot, reference_compute),
              rollout_check(data, result), *extra]
    name, reasons = verdict(checks)
    return Diagnostics(tuple(checks), name, reasons)
