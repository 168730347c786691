"""The figure of a learning-rate tuning (`scaling tune`): tune.png and tune.svg.

    files = figure_files(tuning.shapes, lr_law(tuning.shapes).power)   # {"tune.png": ..., "tune.svg": ...}
    write_tuning(out, config, tuning, law, figures=files)              # written with tune.json, as one unit

Left, each shape's final loss against the learning rate, with the parabola that placed its
optimum and the rate chosen (a star); runs that diverged or failed are crosses at the top. Right,
the chosen rates against N, hollow where the optimum lies at the grid's edge, and the fitted
lr_opt = c N^k (`scaling.tuning.lr_law`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from scaling.report.style import RC, SizeColours, log_axis, new_figure, size_legend
from scaling.report.style import figure_files as style_files

if TYPE_CHECKING:
    from scaling.laws.optimal.approaches import PowerLaw
    from scaling.tuning.shapes import ShapeTuning


def figure_files(shapes: Sequence[ShapeTuning], law: PowerLaw | None) -> dict[str, bytes]:
    """The tuning's figure as tune.png's and tune.svg's bytes, for `scaling.tuning.files.write_tuning`
    to write with tune.json and the tuned config as one unit."""
    return style_files(figure(shapes, law), "tune")


def figure(shapes: Sequence[ShapeTuning], law: PowerLaw | None) -> Figure:
    """Left: final loss against lr per shape, each parabola and chosen rate; right: lr_opt against N
    (`law`: the fitted `approaches.PowerLaw`, or None)."""
    with rc_context(RC):
        fig, axes = new_figure(1, 2, size=(10.5, 4.3))
        colours = SizeColours([s.n_params for s in shapes], label="N (non-embedding parameters)")
        loss_panel(fig, axes[0, 0], shapes, colours)
        law_panel(axes[0, 1], shapes, law, colours)
    return fig


def loss_panel(fig: Figure, ax: Axes, shapes: Sequence[ShapeTuning], colours: SizeColours) -> None:
    top = max((v for s in shapes for v in s.losses if v is not None), default=1.0)
    for s in shapes:
        c = colours(s.n_params)
        lrs, losses = np.array(s.lrs), np.array([np.nan if v is None else v for v in s.losses])
        ax.plot(lrs, losses, "o-", color=c, ms=4, lw=1.2)
        bad = np.isnan(losses)  # diverged or failed: crosses at the top of the panel
        ax.plot(lrs[bad], np.full(bad.sum(), top), "X", color=c, ms=7, mec="black", mew=0.5)
        if s.choice.parabola is not None and s.choice.bracket is not None:   # fitted between its bracket
            lo, hi = np.log(s.choice.bracket)
            u = np.linspace(lo, hi, 40)
            ax.plot(np.exp(u), np.polyval(s.choice.parabola, u), ":", color=c, lw=1)
        if s.choice.lr is not None and s.choice.loss is not None:   # a rate chosen has its loss
            ax.plot([s.choice.lr], [s.choice.loss], "*", color=c, ms=11, mec="black", mew=0.5)
    log_axis(ax, "x", counts=False)
    ax.set_xlabel("learning rate (log scale)")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title("Final loss against learning rate, per shape")
    extra = [Line2D([], [], color="black", marker="*", ls="none", ms=9, label="chosen")]
    if any(s.choice.parabola is not None for s in shapes):
        extra.append(Line2D([], [], color="black", ls=":", label="parabola in log lr"))
    if any(v is None for s in shapes for v in s.losses):
        extra.append(Line2D([], [], color="black", marker="X", ls="none", ms=6, label="diverged / failed"))
    size_legend(fig, ax, colours, [s.n_params for s in shapes], extra_handles=extra, loc="upper right")


def law_panel(ax: Axes, shapes: Sequence[ShapeTuning], law: PowerLaw | None, colours: SizeColours) -> None:
    for s in shapes:
        if s.choice.lr is None:
            continue
        edge = s.choice.method == "edge"  # hollow: only a bound, left out of the fit
        ax.plot([s.n_params], [s.choice.lr], "o", ms=7, color="white" if edge else colours(s.n_params),
                mec=colours(s.n_params), mew=1.5)
    if law is not None:
        n = np.geomspace(min(s.n_params for s in shapes), max(s.n_params for s in shapes), 50)
        ci = f" [{law.ci[0]:.2f}, {law.ci[1]:.2f}]" if law.ci else ""
        ax.plot(n, law(n), "-", color="black", lw=1.2, label=f"lr_opt = c N^k, k = {law.exponent:.2f}{ci}")
        ax.legend(loc="upper right")
    log_axis(ax, "x")
    log_axis(ax, "y", counts=False)
    ax.set_xlabel("non-embedding parameters N (log scale)")
    ax.set_ylabel("chosen learning rate (log scale)")
    ax.set_title("Chosen rate against N (hollow: at the grid's edge)")
