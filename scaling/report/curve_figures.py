"""The figures of the report's curve-fit section (`scaling.report.curves`): each size's training
curves with its fitted curve law, and the curve-based law beside the final-loss law.

    fig = curve_laws(runs, laws, colours)                 # runs: curve_fit.CurveRuns; laws: N -> CurveLaw
    fig = two_fits(finals, sizes, law_final, law_curves, colours)

Drawn from data objects (no file discovery, no fitting), in the report's style.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from scaling.laws.forms.law import Law
from scaling.report.style import SizeColours, human, log_axis, new_figure, size_legend, with_rc

if TYPE_CHECKING:
    from scaling.laws.curves.fit import CurveRuns
    from scaling.laws.curves.law import CurveLaw

MAX_COLUMNS = 4


@with_rc
def curve_laws(runs: CurveRuns, laws: dict[float, CurveLaw], colours: SizeColours, *,
               n_label: str = "parameters") -> Figure:
    """One panel per size: every evaluation of its runs (hollow: in the warmup, not fitted) and its
    curve law along each run's own schedule, from the end of the warmup to the run's last step."""
    sizes = sorted(laws)
    ncols = min(MAX_COLUMNS, len(sizes))
    nrows = math.ceil(len(sizes) / ncols)
    fig, axes = new_figure(nrows, ncols, size=(max(7.5, 3.1 * ncols), max(4.6, 2.7 * nrows + 1.0)), sharey=True)
    ev = runs.evaluations[runs.evaluations.n.isin(sizes)]
    stable = False
    for ax, n in zip(axes.flat, sizes):
        colour, law = colours(n), laws[n]
        for run_id, g in ev[ev.n == n].groupby("run_id", sort=True):
            schedule = runs.schedules[run_id]
            batch, first = schedule.train.batch_tokens, schedule.first_decay_step()
            s1, s2 = schedule.areas(law.decay)
            steps = np.arange(first + 1, schedule.steps + 1)
            stable |= schedule.constant
            ls = ":" if schedule.constant else "-"
            ax.plot(steps * batch, law.loss(s1[steps - 1], s2[steps - 1]), color=colour, lw=1.1, ls=ls)
            fitted = g.step > first
            ax.plot(g.tokens[fitted], g.loss[fitted], "o", ms=2.6, color=colour, alpha=0.8)
            ax.plot(g.tokens[~fitted], g.loss[~fitted], "o", ms=2.6, mfc="none", color=colour, alpha=0.8)
        log_axis(ax, "x")
        ax.set_title(f"N = {human(n)}: rms {law.rms:.3g}", fontsize=9)
    # The law runs off steeply at the end of the warmup: the axis spans the evaluations it was fitted to.
    lo, hi = float(ev.loss.min()), float(ev.loss.max())
    axes[0, 0].set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    for ax in list(axes.flat)[len(sizes):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("validation loss")
    for ax in axes[-1, :]:
        ax.set_xlabel("tokens D")
    handles = [Line2D([], [], color="black", marker="o", ls="none", ms=3, label="evaluation (fitted)"),
               Line2D([], [], color="black", marker="o", mfc="none", ls="none", ms=3,
                      label="evaluation in the warmup (not fitted)"),
               Line2D([], [], color="black", label="the size's curve law along the run's schedule")]
    if stable:
        handles.append(Line2D([], [], color="black", ls=":", label="the curve law along a WSD stable run"))
    fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False)
    return fig


@with_rc
def two_fits(finals: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike], sizes: dict, law_final: Law, law_curves: Law,
             colours: SizeColours, *, n_label: str = "parameters") -> Figure:
    """Final loss against D at each size: the runs' final losses (dots), the curve laws' final
    losses at the D's of interest that the curve-based law is fitted to (crosses), the final-loss
    law (solid) and the curve-based law (dashed). finals: (N, D, loss) arrays; sizes: N -> (d, loss)."""
    fig, axes = new_figure(size=(7.5, 4.8))
    ax = axes[0, 0]
    n, d, loss = (np.asarray(v, dtype=float) for v in finals)
    shown = sorted(set(n.tolist()) | set(sizes))
    drawn = [loss]
    for size in shown:
        colour, m = colours(size), n == size
        points = sizes.get(size, (np.array([]), np.array([])))
        reach = np.concatenate([d[m], points[0]])
        # Each size's lines span its own D's: the laws are compared where the size has evidence.
        grid = np.geomspace(reach.min() / 1.2, reach.max() * 1.2, 100)
        ax.plot(grid, law_final.loss(size, grid), color=colour, lw=1.2)
        ax.plot(grid, law_curves.loss(size, grid), color=colour, lw=1.2, ls="--")
        ax.plot(*points, "x", color=colour, ms=5, mew=1.2)
        ax.plot(d[m], loss[m], "o", color=colour, mec="white", mew=0.5, ms=6)
        drawn.append(points[1])
    lo, hi = float(np.min(np.concatenate(drawn))), float(np.max(np.concatenate(drawn)))
    ax.set_ylim(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo))
    log_axis(ax, "x")
    ax.set_xlabel("training tokens D")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title("The final-loss fit and the curve-based fit, at each size")
    extra = [Line2D([], [], color="black", marker="o", ls="none", ms=5, label="final loss of a run"),
             Line2D([], [], color="black", marker="x", ls="none", ms=5, label="a curve law's final loss"),
             Line2D([], [], color="black", label="law fitted to final losses"),
             Line2D([], [], color="black", ls="--", label="law fitted to the curves")]
    size_legend(fig, ax, colours, shown, extra_handles=extra, loc="upper right", label=f"N ({n_label})")
    return fig
