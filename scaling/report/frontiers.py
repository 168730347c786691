"""The compute-optimal frontiers figure: iso-loss contours of the fitted law over (C, N), the
fitted N_opt(C) and the published ones.

    fig = frontiers(law, n, c, colours, references={"chinchilla": CHINCHILLA.law.n_opt}, c_max=1e24)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from scaling.formats import sci
from scaling.laws.forms.allocating import AllocatingLaw
from scaling.report.style import (
    REFERENCE_LABEL,
    REFERENCE_STYLE,
    SizeColours,
    compute_axis,
    log_axis,
    new_figure,
    with_rc,
)

# ----------------------------------------------------------------------------- 4. frontiers

@with_rc
def frontiers(law: AllocatingLaw, n: np.ndarray, c: np.ndarray, colours: SizeColours, *, references: dict,
              c_range: Sequence[float] | None = None, c_max: float = 1e24,
              budgets: Sequence[float] = (), n_label: str = "parameters") -> Figure:
    """Iso-loss contours of the fitted L(N, D = C / c(N)) over the (C, N) plane (C in the fit's
    measure, `law.flops`), the runs as points,
    the fitted compute-optimal frontier N_opt(C) (solid where measured, dashed beyond), and the
    published frontiers (`references`: name -> callable C -> N_opt) up to `c_max` FLOPs.

    c_range: the measured compute range (default: that of the points `c`); without either the
    fitted frontier is drawn solid from 1e15 FLOPs.
    """
    n, c = np.asarray(n, dtype=float), np.asarray(c, dtype=float)
    if c.size:
        c_data = (float(c.min()), float(c.max()))
    elif c_range:
        c_data = (float(c_range[0]), float(c_range[1]))
    else:
        c_data = None
    c_lo = c_data[0] / 10 if c_data else 1e15
    c_grid = np.geomspace(c_lo, c_max, 400)
    lines = {"your fit": law.n_opt(c_grid)}
    for name, fn in references.items():
        lines[name] = np.asarray(fn(c_grid), dtype=float)
    # The published frontiers and the runs set the range; the fitted frontier may leave it
    # (an extrapolation going off the top is itself worth seeing).
    low = [v.min() for v in lines.values()] + ([n.min()] if n.size else [])
    high = [v.max() for k, v in lines.items() if k != "your fit"] + ([n.max()] if n.size else [])
    n_lo, n_hi = min(low) / 10, max(high) * 10
    fig, axes = new_figure(size=(8.8, 7.4))
    ax = axes[0, 0]

    _loss_contours(ax, law, c_lo, c_max, n_lo, n_hi)
    _frontier_lines(ax, law, c_grid, lines, c_data, c_lo, n_hi)
    if n.size:
        ax.scatter(c, n, c=colours(n), s=22 if n.size < 100 else 14, edgecolors="black", linewidths=0.3,
                   alpha=0.8, zorder=4, label="the runs fitted")
    for b in budgets:
        ax.axvline(b, color="#1f77b4", lw=0.6, ls=":", alpha=0.6)
        ax.text(b, n_lo * 1.5, f" {sci(b, 2)}", rotation=90, va="bottom", ha="right", fontsize=7.5, color="#1f77b4")
    ax.set_xlim(c_lo, c_max)
    ax.set_ylim(n_lo, n_hi)
    log_axis(ax, "x", counts=False)
    log_axis(ax, "y")
    ax.set_xlabel("training " + compute_axis(law.flops.name))
    ax.set_ylabel(f"parameters N ({n_label}, log scale)")
    ax.set_title("Iso-loss contours of the fitted L(N, D) and compute-optimal frontiers")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False,
              title="compute-optimal N_opt(C); grey: contours of the fitted loss (nats/token)")
    if n.size and not colours.discrete:
        colours.colorbar(fig, ax, f"N ({n_label}) of your runs")
    return fig


def _loss_contours(ax: Axes, law: AllocatingLaw, c_lo: float, c_max: float, n_lo: float, n_hi: float) -> None:
    """Iso-loss contours of L(N, D = C / c(N)) over the plot, one per decade of C, labelled."""
    xs = np.geomspace(c_lo, c_max, 300)
    ys = np.geomspace(n_lo, n_hi, 300)
    X, Y = np.meshgrid(xs, ys)
    D = law.flops.tokens(X, Y)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        Z = np.where(D >= 1, law.loss(Y, D), np.nan)
    # One contour per decade of C: the loss the law reaches there with the best split, so each
    # contour touches the fitted frontier at a power of ten.
    decades = 10.0 ** np.arange(math.ceil(math.log10(c_lo)), math.floor(math.log10(c_max)) + 1, 1)
    if len(decades) > 9:
        decades = decades[:: math.ceil(len(decades) / 9)]
    # Near E the levels of successive decades differ in a digit the labels do not show: one
    # contour per label, the lowest C's, so no label repeats.
    touch: dict[float, float] = {}                   # level -> its C
    shown: set[str] = set()
    for decade in decades:
        level = float(np.round(law.optimal_loss(decade), 6))
        if f"{level:.3g}" not in shown:
            shown.add(f"{level:.3g}")
            touch[level] = float(decade)
    levels = np.array(sorted(touch))
    cs = ax.contour(X, Y, Z, levels=levels, colors="#555555", linewidths=0.7, alpha=0.75)
    spots = _contour_label_spots(law, touch, c_max, n_lo, n_hi)
    if spots:
        ax.clabel(cs, fmt=lambda v: f"{v:.3g}", fontsize=7.5, inline=True, manual=spots)


def _frontier_lines(ax: Axes, law: AllocatingLaw, c_grid: np.ndarray, lines: dict,
                    c_data: tuple[float, float] | None, c_lo: float, n_hi: float) -> None:
    """The runs' compute range shaded, the fitted N_opt(C) (solid where measured, dashed beyond) and
    the published frontiers, each with its exponent a."""
    top = c_data[1] if c_data else c_lo
    if c_data:
        ax.axvspan(*c_data, color="#2ca02c", alpha=0.08, lw=0)
        ax.text(math.sqrt(c_data[0] * c_data[1]), n_hi / 1.6, "your runs'\ncompute", ha="center", va="top",
                fontsize=8, color="#2ca02c", zorder=8)
        ax.plot(c_grid[c_grid <= top], lines["your fit"][c_grid <= top], color="black", lw=2.4, zorder=7,
                label=f"your fit, a = {law.a:.3f} (measured range)")
    ax.plot(c_grid[c_grid >= top], lines["your fit"][c_grid >= top], color="black", lw=2.0, zorder=7,
            ls=(0, (4, 2)), label="your fit, extrapolated" if c_data else f"your fit, a = {law.a:.3f}")
    for name, values in lines.items():
        if name == "your fit":
            continue
        colour, style = REFERENCE_STYLE.get(name, ("#9467bd", "-"))
        slope = np.log(values[-1] / values[0]) / np.log(c_grid[-1] / c_grid[0])
        ax.plot(c_grid, values, color=colour, ls=style, lw=1.6, zorder=6,
                label=f"{REFERENCE_LABEL.get(name, name)}, a = {slope:.3g}")


def _contour_label_spots(law: AllocatingLaw, touch: dict, c_max: float, n_lo: float,
                         n_hi: float) -> list[tuple[float, float]]:
    """Where to label each iso-loss contour: on its lower branch near the right edge (where it runs
    flat, limited by N), else where it touches the fitted frontier; none when both are off the plot."""
    spots = []
    x = c_max / 2.5
    n_star = float(law.n_opt(x))
    col = np.geomspace(n_lo, min(n_star, n_hi), 400)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        z = law.loss(col, law.flops.tokens(x, col))   # falls as N grows towards the optimum
    for level, c in sorted(touch.items()):
        ok = np.isfinite(z)
        if ok.sum() > 1 and z[ok].min() < level < z[ok].max():
            spots.append((x, float(np.exp(np.interp(level, z[ok][::-1], np.log(col[ok])[::-1])))))
            continue
        n_at = float(law.n_opt(c))
        if n_lo < n_at < n_hi and c < c_max / 3:       # a label at the plot's edge would be cut
            spots.append((float(c), n_at))
    return spots
