"""The backtest in words (`scaling.laws.checks.backtest`): the summary's one line of how far out a
law has been tested, one line per cut, and the rule beyond the data. Pure: a Backtest in, text out.
"""

from __future__ import annotations

from collections.abc import Iterable

from scaling.laws.checks.backtest import MIN_TRAIN_RUNS, Backtest, Cut
from scaling.laws.checks.extrapolation import growth_text


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def why_no_cut(cuts: Iterable[Cut]) -> str:
    """Why the cuts could not be made, each reason once with the factors it held at
    ("3x: too few runs: ...; 10x, 30x: too few runs: ...")."""
    factors: dict[str, list[str]] = {}
    for c in sorted(cuts, key=lambda c: c.factor):
        if c.reason:
            factors.setdefault(c.reason, []).append(f"{c.factor:g}x")
    return "; ".join(f"{', '.join(f)}: {reason}" for reason, f in factors.items())


def summary_line(check: Backtest) -> str:
    """One line: how far out the law has been tested, its error, bias and coverage there."""
    cut = check.farthest
    if cut is None:
        return f"backtest: no cut could be made ({why_no_cut(check.cuts)})"
    lean = "high" if (cut.bias or 0.0) > 0 else "low"
    held = "" if cut.covered is None else (f"; {100 * check.level:g}% intervals held {cut.covered} of "
                                           f"{len(cut.errors)}")
    return (f"backtest: predicts runs {cut.factor:g}x beyond its fitted compute within {pct(cut.median_abs_error)} "
            f"(median of {len(cut.errors)} runs; worst {pct(cut.worst_abs_error)}), biased {lean}{held}"
            + (f"; that cut fitted only {fitted_runs(cut)}, the fewest a cut takes" if cut.fewest else ""))


def fitted_runs(cut: Cut) -> str:
    """'N runs' or 'N runs at S sizes' where the sizes were recorded."""
    return f"{cut.n_train} runs" + (f" at {cut.n_sizes} sizes" if cut.n_sizes else "")


def format_backtest(check: Backtest) -> list[str]:
    """The summary line, then one line per cut, then the extrapolation rule."""
    out = [summary_line(check)]
    for c in check.cuts:
        if not c.made:
            out.append(f"  {c.factor:g}x: {c.reason}")
            continue
        held = "" if c.covered is None else f", intervals held {c.covered} of {len(c.errors)}"
        out.append(f"  {c.factor:g}x: fitted {fitted_runs(c)} up to C = {c.train_max_compute:.3g}"
                   + (" (the fewest a cut takes)" if c.fewest else "")
                   + f", predicted {c.n_test}: median error {pct(c.median_abs_error)}, worst {pct(c.worst_abs_error)}, "
                   f"bias {c.bias:+.2%}{held}")
    kept = [(c, e) for c, e in zip(check.cuts, check.undertrained) if c.made and e is not None]
    if kept:
        out.append(f"  runs under {check.min_tokens_per_param:g} tokens per parameter (under-trained for their size) "
                   "are left out of the refits; kept, the cuts' median errors would be "
                   + ", ".join(f"{pct(e)} at {c.factor:g}x" for c, e in kept))
    r = check.extrapolation
    if r.calibration > 1:
        out.append(f"  the cuts erred more than the rule learned from their other cuts allowed: its growth is widened "
                   f"{r.calibration:.2f}x")
    if r.bias_sd > 0:
        out.append(f"  E sits far below the runs: the bias beyond the data is unknown, up to {100 * r.bias_sd:.2f}% "
                   "per decade either way (the largest any cut showed), and widens the interval")
    out.append(f"  beyond the data: the law of the {check.n_trained} runs with >= {check.min_tokens_per_param:g} "
               f"tokens per parameter, moved {100 * r.bias:+.2f}% per decade of compute, its interval widening by "
               f"{growth_text(r)} (from {r.source})")
    if check.covariance:
        out.append(f"  and never narrower than that law's own estimation error ({check.dof:g} degrees of freedom left"
                   + (f" by {check.n_trained} runs at {check.n_sizes} sizes: few, and far out that error can"
                      " exceed the rule's" if check.dof < MIN_TRAIN_RUNS else "") + ")")
    return out
