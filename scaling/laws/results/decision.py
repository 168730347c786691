"""What `scaling fit` prints by default: the decision first, in about 15 lines (`format_decision`),
the verdict and why, the law that predicts and plans, the allocation, the plan 3x and 10x beyond the
runs and how far the law was tested; `summary.format_summary` (--verbose) has everything. Every
interval is shown within what its quantity can be (`clipped`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from scaling.errors import UsageError
from scaling.laws.checks.backtest_text import summary_line
from scaling.laws.forms.law import PARAM_NAMES
from scaling.laws.optimal.allocation import Plan
from scaling.laws.results.summary import FORMATS, Summarised, with_interval


class Decided(Summarised, Protocol):
    """What the short summary reads besides: the plan at a budget and the law that makes it."""

    @property
    def predictor(self) -> str: ...

    def plan(self, compute: float, seed: int = 0) -> Plan: ...


# How far beyond its largest run the short summary says what the law predicts.
AHEAD = (3.0, 10.0)
SHOWN_REASONS = 3       # the verdict's reasons the short summary lists (--verbose: all)
SHORT_REASON = 150      # characters of a reason shown there


def format_decision(fit: Decided) -> str:
    """What `scaling fit` prints by default, the decision first, in about 15 lines: the verdict and
    its first reasons, the law that predicts and plans, a and tokens per parameter, the plan at the
    reference compute, how far the law was tested and what it predicts 3x and 10x beyond its runs.
    `format_summary` (--verbose) has the rest."""
    out = format_verdict_short(fit)
    law = fit.law
    out.append(f"law: L = {law.E:.4g} + {law.A:.4g}/N^{law.alpha:.4f} + {law.B:.4g}/D^{law.beta:.4f} "
               f"({fit.data.n_points} points; {fit.law.flops.describe()}); predicts and plans by {fit.predictor}")
    out.append("  " + "   ".join(f"{name} = {_shown(fit, name)}" for name in ("alpha", "beta", "E")))
    at = "" if fit.reference_compute is None else f" at C = {fit.reference_compute:.3g}"
    out.append(f"allocation: a = {_shown(fit, 'a')} (N_opt ~ C^a); tokens per parameter{at}: "
               f"{_shown(fit, 'tokens_per_param')}")
    budgets = [] if fit.reference_compute is None else [(fit.reference_compute, "")]
    if fit.data.c_range is not None:
        top = float(fit.data.c_range[1])
        budgets += [(f * top, f"{f:g}x beyond its largest run: ") for f in AHEAD]
    for compute, label in budgets:
        out.append(f"{label}{_plan_text(fit, compute)}")
    if fit.backtest is not None:
        out.append(summary_line(fit.median_backtest or fit.backtest).replace("backtest:", "tested:", 1))
    return "\n".join(out)


def _shown(fit: Decided, name: str) -> str:
    """A value of the fit and its interval, clipped to what the quantity can be (`clipped`)."""
    value = getattr(fit.law, name) if name in PARAM_NAMES else getattr(fit, name)
    return with_interval(value, clipped(name, fit.interval(name), fit), FORMATS[name])


def clipped(name: str, bounds: Sequence[float | None] | None, fit: Decided) -> tuple | None:
    """An interval within what its quantity can be: exponents from 0, E from 0 to the lowest loss
    (no run reached below it), a and b within [0, 1]; (nan, nan), shown as "not determined", where
    its upper bound lies beyond ten times the quantity's range (an exponent past 10: alpha
    [-2.40, 132239] is no interval). Other quantities as they are."""
    if bounds is None or bounds[0] is None or bounds[1] is None:
        return None
    lo, hi = float(bounds[0]), float(bounds[1])
    if name not in ("alpha", "beta", "E", "a", "b"):
        return lo, hi
    lowest = fit.data.loss_range[0] if fit.data.loss_range else math.inf
    top = {"E": lowest, "a": 1.0, "b": 1.0}.get(name, math.inf)
    if hi > 10.0 * (top if math.isfinite(top) else 1.0):
        return math.nan, math.nan
    return max(lo, 0.0), min(hi, top)


def _plan_text(fit: Decided, compute: float) -> str:
    """The plan at `compute` in one line (its words where the law has none)."""
    try:
        p = fit.plan(compute)
    except UsageError as exc:
        return f"at C = {compute:.3g}: no plan ({exc})"
    iv = p.intervals

    def pair(name: str, fmt: str) -> str:
        return "" if iv is None else _interval_text(getattr(iv, name), fmt)

    return (f"at C = {compute:.3g}: N = {p.n:.3g}{pair('n', '.3g')}, D = {p.d:.3g}{pair('d', '.3g')}, "
            f"loss {p.loss:.4f}{pair('loss', '.4f')}" + (f" ({p.note})" if p.note else ""))


def _interval_text(bounds: tuple, fmt: str) -> str:
    lo, hi = bounds
    return " [no interval]" if not (math.isfinite(lo) and math.isfinite(hi)) else f" [{lo:{fmt}}, {hi:{fmt}}]"


def format_verdict_short(fit: Decided) -> list[str]:
    """The verdict and its first SHOWN_REASONS reasons, each cut at SHORT_REASON characters."""
    if fit.diagnostics is None:
        return ["verdict: none recorded (this fit.json predates the diagnostics; refit it for one)"]
    d = fit.diagnostics
    n_fail = len(d.failing())
    out = [f"verdict: {d.verdict.upper()} ({n_fail} of {len(d.checks)} checks did not pass)"]
    for reason in d.reasons[:SHOWN_REASONS]:
        out.append("  " + (reason if len(reason) <= SHORT_REASON else reason[:SHORT_REASON - 3].rstrip() + "..."))
    if len(d.reasons) > SHOWN_REASONS:
        out.append(f"  ... and {len(d.reasons) - SHOWN_REASONS} more (--verbose, or 'diagnostics' in fit.json)")
    return out
