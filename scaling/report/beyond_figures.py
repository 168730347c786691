"""The report's figures of the law beyond its data, drawn from data objects (no fitting):

    fig = backtest(fit.backtest)                       # each cut's predictions of the top budget's runs
    fig = forms(curves, runs=(compute, loss), ...)     # the forms side by side along compute (`FormCurve`)

In the report's style (`scaling.report.style`); the numbers are `scaling.report.beyond`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from scaling.formats import sci
from scaling.laws.checks.backtest import Backtest, Cut
from scaling.report.style import compute_axis, log_axis, new_figure, with_rc

# One colour per form, the same in both panels; the form predict and plan use is drawn heaviest.
FORM_COLOURS = {"chinchilla": "#1f77b4", "tied": "#2ca02c", "kaplan": "#d62728", "fixed-E": "#7f7f7f",
                "farseer": "#9467bd", "median": "black"}
HIT, MISS, RAW = "#08519c", "#d62728", "0.55"
RUN_SPREAD = 0.05                  # decades either side of a cut's factor over which its runs are spread


@dataclass(frozen=True)
class FormCurve:
    """One form along compute: its prediction `loss` [lo, hi] for the headline form's optimal run at
    each `compute`, its backtest (factor, median abs. error) per cut, its residual RMS; `headline`
    for the form predict and plan use."""

    name: str
    compute: np.ndarray
    loss: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    backtest: tuple                  # ((factor, median abs. error), ...)
    residual_rms: float
    headline: bool = False


def interval_errors(errors: Sequence[float], half_widths: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Each prediction interval as errors relative to the observed loss, (lo, hi): a cut's interval is
    center * exp(+-h) with half-width (hi - lo) / 2 / center = sinh(h) (`backtest._interval_cut`), and its
    center (1 + error) times the observed loss; the run lies inside where lo <= 0 <= hi."""
    e, h = np.asarray(errors, dtype=float), np.arcsinh(np.asarray(half_widths, dtype=float))
    return (1.0 + e) * np.exp(-h) - 1.0, (1.0 + e) * np.exp(h) - 1.0


def _factor_axis(ax: Axes, factors: Sequence[float]) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(factors))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(min(factors) / 1.5, max(factors) * 1.5)


@with_rc
def backtest(check: Backtest) -> Figure:
    """Each made cut's predictions of the top budget's runs: the error of the prediction as the fit
    makes it beyond its data (its refit moved by the bias of the refit's own backtest), with its
    95% interval as a bar (dark where the observed loss lies inside, red where not), the refit's own
    error (grey crosses) and the cut's median absolute error (a dash), at its extrapolation factor."""
    fig, axes = new_figure(size=(7.5, 4.6))
    ax = axes[0, 0]
    made: list[Cut] = list(check.made)
    ax.axhline(0.0, color="black", lw=0.8)
    for cut in made:
        e = 100 * np.asarray(cut.errors, dtype=float)
        x = cut.factor * 10 ** np.linspace(-RUN_SPREAD, RUN_SPREAD, e.size) if e.size > 1 else np.array([cut.factor])
        if cut.raw_errors:
            ax.plot(x, 100 * np.asarray(cut.raw_errors, dtype=float), "x", color=RAW, ms=4, mew=0.8, zorder=3)
        if len(cut.half_widths) == e.size:
            lo, hi = (100 * v for v in interval_errors(cut.errors, cut.half_widths))
            inside = (lo <= 0) & (hi >= 0)
            for mask, colour in ((inside, HIT), (~inside, MISS)):
                ax.errorbar(x[mask], e[mask], yerr=[e[mask] - lo[mask], hi[mask] - e[mask]], fmt="o", ms=3.5,
                            color=colour, ecolor=colour, elinewidth=0.8, capsize=1.5, zorder=4)
        else:
            ax.plot(x, e, "o", ms=3.5, color=HIT, zorder=4)
        width = 10 ** (RUN_SPREAD * 1.3)
        for sign in (1, -1):
            ax.plot([cut.factor / width, cut.factor * width], [sign * 100 * (cut.median_abs_error or 0.0)] * 2,
                    color="black", lw=1.6, zorder=5)
    if made:
        _factor_axis(ax, [c.factor for c in made])
    ax.set_xlabel("extrapolation factor f: the top budget's compute over the largest compute the refit saw")
    ax.set_ylabel("prediction error (predicted / observed - 1, %)")
    ax.set_title("Backtest: the law refitted on the runs below C_top / f predicts the top budget's runs")
    handles = [Line2D([], [], color=HIT, marker="o", ms=4, label=f"the fit's prediction and its {100 * check.level:g}% "
                      "interval (observed inside)"),
               Line2D([], [], color=MISS, marker="o", ms=4, label="observed outside the interval"),
               Line2D([], [], color=RAW, marker="x", lw=0, label="the refit's own prediction (before its bias)"),
               Line2D([], [], color="black", lw=1.6, label="± the cut's median absolute error")]
    ax.legend(handles=handles, loc="best", fontsize=7.5, framealpha=0.85)
    return fig


@with_rc
def forms(curves: Sequence[FormCurve], *, runs: tuple[np.ndarray, np.ndarray] | None, fitted_max: float,
          target: float, headline: str, level: float, compute_label: str) -> Figure:
    """Left: each form's predicted loss for the headline form's compute-optimal run along compute, with
    its prediction interval (band), the fitted runs (grey), the largest fitted run (dotted) and the
    target compute (each form's prediction there as a bar). Right: each form's backtest, its median
    absolute error at each extrapolation factor, in the same colours."""
    fig, axes = new_figure(1, 2, size=(12.0, 4.8), gridspec_kw={"width_ratios": [1.7, 1.0]})
    ax, bx = axes[0, 0], axes[0, 1]
    if runs is not None:
        ax.scatter(runs[0], runs[1], s=9, color="0.72", edgecolors="none", zorder=2, label="fitted runs")
    ax.axvline(fitted_max, color="0.3", ls=":", lw=1.0, label=f"largest fitted run, C = {sci(fitted_max, 2)}")
    offsets = np.linspace(-0.04, 0.04, max(len(curves), 1))
    for k, c in enumerate(curves):
        colour = FORM_COLOURS.get(c.name, "black")
        label = f"{c.name}{' (predict and plan use it)' if c.headline else ''}: residual RMS {c.residual_rms:.3g}"
        ax.fill_between(c.compute, c.lo, c.hi, color=colour, alpha=0.10, lw=0, zorder=1)
        ax.plot(c.compute, c.loss, color=colour, lw=2.4 if c.headline else 1.2, zorder=4 if c.headline else 3,
                label=label)
        at = int(np.argmin(np.abs(np.log(c.compute / target))))
        if math.isfinite(c.loss[at]):
            ax.errorbar(target * 10 ** offsets[k], c.loss[at], yerr=[[c.loss[at] - c.lo[at]], [c.hi[at] - c.loss[at]]],
                        fmt="o", ms=4, color=colour, capsize=2, elinewidth=1.0, zorder=5)
        if c.backtest:
            factors, errors = zip(*c.backtest)
            bx.plot(factors, 100 * np.asarray(errors), "o-", color=colour, lw=2.2 if c.headline else 1.0, ms=5)
    ax.axvline(target, color="black", lw=0.8, ls="--", label=f"target compute, C = {sci(target, 2)}")
    bands = [v for c in curves for v in (c.lo, c.hi) if np.isfinite(v).any()]
    if bands:              # the forms' range: runs far above the frontier (small models, few tokens) run off the top
        low, high = float(np.nanmin(bands)), float(np.nanmax(bands))
        ax.set_ylim(low - 0.05 * (high - low), high + 0.15 * (high - low))
    ax.set_xlim(float(min(c.compute.min() for c in curves)) / 1.3 if curves else None,
                float(max(c.compute.max() for c in curves)) * 1.3 if curves else None)
    log_axis(ax, "x", counts=False)
    ax.set_xlabel(compute_axis(compute_label))
    ax.set_ylabel("final loss (nats/token)")
    ax.set_title(f"Each form's loss for the {headline} form's compute-optimal run "
                 f"({100 * level:g}% prediction intervals)")
    ax.legend(loc="upper right", fontsize=7.5, framealpha=0.85)
    tested = sorted({f for c in curves for f, _ in c.backtest})
    if tested:
        _factor_axis(bx, tested)
    bx.set_ylim(bottom=0)
    bx.set_xlabel("extrapolation factor of the backtest's cut")
    bx.set_ylabel("median absolute error (%)")
    bx.set_title("Each form's backtest (its refit's own predictions)")
    return fig
