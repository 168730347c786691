"""The report's figures, drawn with matplotlib from data objects (no file discovery, no fitting).

    colours = SizeColours(all_n)                      # one colour per model size, everywhere
    fig = loss_curves(curves, colours, n_label="non-embedding parameters")
    save(fig, "out/figures", "loss_curves")           # loss_curves.png and loss_curves.svg

Each function returns a `matplotlib.figure.Figure` (no pyplot, so no global state and no GUI
backend). `save` writes PNG and SVG byte-identically for the same figure: the SVG's date and
random ids and the PNG's software tag are left out.

Conventions shared by every figure: parameters N, tokens D and FLOPs C on log axes (the law is
a power law in each); loss in nats per token on a linear axis; model size coloured by a
sequential colormap over log N (`SizeColours`), with a legend when there are few sizes and a
colour bar when there are many; a second colormap (`OTHER_CMAP`) for token budgets and compute
budgets, so that no colour means two things in one figure.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib import colors as mcolors
from matplotlib import rc_context
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from scaling.laws.law import Law

SIZE_CMAP = "viridis"
OTHER_CMAP = "plasma"
CMAP_RANGE = (0.0, 0.88)          # leave out the palest end of the map: it vanishes on white
MAX_LEGEND_ENTRIES = 10           # more distinct values than this get a colour bar instead
SVG_SALT = "scaling-report"
DPI = 120

# Published laws drawn beside the user's: label, colour, line style.
REFERENCE_LABEL = {
    "chinchilla": "Chinchilla (Hoffmann et al. 2022)",
    "besiroglu": "Besiroglu et al. 2024 refit",
    "kaplan": "Kaplan et al. 2020",
}
REFERENCE_STYLE = {
    "chinchilla": ("#d62728", (0, (6, 2))),
    "besiroglu": ("#ff7f0e", (0, (2, 2))),
    "kaplan": ("#7f7f7f", (0, (6, 2, 1, 2))),
}

RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": SVG_SALT,
    "svg.fonttype": "path",
    "path.simplify": True,
}


# ----------------------------------------------------------------------------- colours and labels

def _cmap(name: str):
    base = matplotlib.colormaps[name]
    lo, hi = CMAP_RANGE
    return mcolors.LinearSegmentedColormap.from_list(f"{name}-trunc", base(np.linspace(lo, hi, 256)))


class LogColours:
    """A colour for each value of a positive quantity, by position on a log scale."""

    def __init__(self, values, cmap: str, label: str):
        v = np.asarray([x for x in np.ravel(values) if np.isfinite(x) and x > 0], dtype=float)
        if v.size == 0:
            v = np.array([1.0])
        self.values = np.unique(v)
        lo, hi = float(v.min()), float(v.max())
        if hi <= lo:
            lo, hi = lo / 1.5, hi * 1.5
        self.norm = mcolors.LogNorm(vmin=lo, vmax=hi)
        self.cmap = _cmap(cmap)
        self.label = label

    def __call__(self, x):
        return self.cmap(self.norm(x))

    @property
    def discrete(self) -> bool:
        return len(self.values) <= MAX_LEGEND_ENTRIES

    def colorbar(self, fig: Figure, ax, label: str | None = None):
        sm = ScalarMappable(norm=self.norm, cmap=self.cmap)
        cb = fig.colorbar(sm, ax=ax, pad=0.01)
        cb.set_label(label or self.label)
        return cb


class SizeColours(LogColours):
    """One colour per model size N, the same in every figure (viridis over log N)."""

    def __init__(self, n_values, label: str = "parameters N"):
        super().__init__(n_values, SIZE_CMAP, label)


def human(x: float) -> str:
    """24.9K, 1.0M, 3.2B: a count of parameters or tokens at a glance."""
    if x is None or not math.isfinite(x):
        return "-"
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            v = x / div
            return f"{v:.3g}{suffix}"
    return f"{x:.3g}"


def sci(x: float) -> str:
    """1.5e18 style."""
    if x is None or not math.isfinite(x):
        return "-"
    return re.sub(r"e\+?0*(\d)", r"e\1", f"{x:.2g}")


def log_axis(ax, which: str = "x", counts: bool = True) -> None:
    """A log axis whose ticks read at a glance: 25K, 100K, 1M for counts (parameters, tokens),
    1e18 for FLOPs; no crowded minor labels; ticks at 1, 2, 5 when the axis spans under two decades."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    lo, hi = (ax.get_xlim() if which == "x" else ax.get_ylim())
    if lo > 0 and hi > lo and math.log10(hi / lo) < 2:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: human(v) if counts else sci(v)))
    axis.set_minor_formatter(NullFormatter())


def _new(nrows: int = 1, ncols: int = 1, size=(7.0, 4.6), **kw):
    fig = Figure(figsize=size, layout="constrained", dpi=DPI)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def _size_legend(fig: Figure, ax, colours: SizeColours, sizes, *, extra_handles=(), loc="best",
                 title: str | None = None, label: str | None = None, line: bool = True, outside: bool = False):
    """Legend entries per size (few sizes) or a colour bar (many), plus any extra handles."""
    handles = list(extra_handles)
    if colours.discrete:
        handles = [Line2D([], [], color=colours(n), marker="o", lw=1.5 if line else 0, label=f"N = {human(n)}")
                   for n in sorted(set(float(s) for s in sizes))] + handles
    else:
        colours.colorbar(fig, ax, label)
    if handles:
        where = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)} if outside else {"loc": loc}
        ax.legend(handles=handles, title=title, frameon=True, framealpha=0.85, **where)


def _with_rc(fn):
    def wrapper(*args, **kwargs):
        with rc_context(RC):
            return fn(*args, **kwargs)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


# ----------------------------------------------------------------------------- 1. loss curves

@_with_rc
def loss_curves(curves, colours: SizeColours, *, n_label: str = "parameters") -> Figure:
    """Validation loss against tokens seen, one line per run, one colour per model size.

    curves: DataFrame with run_id, n, tokens, loss, status (one row per evaluation). Runs that
    did not finish are dashed and end in a cross; WSD stable runs (the shared phase their
    cooldown branches start from) are dotted, with no final loss.
    """
    fig, axes = _new(size=(7.5, 4.8))
    ax = axes[0, 0]
    sizes = []
    unfinished = stable = False
    for run_id, g in curves.groupby("run_id", sort=True):
        g = g[np.isfinite(g.loss) & (g.tokens > 0)].sort_values("tokens")
        if g.empty:
            continue
        n = float(g.n.iloc[0])
        sizes.append(n)
        if str(g.status.iloc[0]) == "stable":
            stable = True
            ax.plot(g.tokens, g.loss, color=colours(n), lw=0.9, alpha=0.7, ls=":")
            continue
        finished = str(g.status.iloc[0]) == "finished"
        unfinished |= not finished
        colour = colours(n)
        ax.plot(g.tokens, g.loss, color=colour, lw=1.3, alpha=0.9, ls="-" if finished else "--")
        ax.plot(g.tokens.iloc[-1], g.loss.iloc[-1], ls="none", marker="o" if finished else "X",
                ms=4.5 if finished else 7, color=colour, mec="white" if finished else "black", mew=0.6)
    log_axis(ax, "x")
    ax.set_xlabel("tokens seen D (tokens, log scale)")
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title("Validation loss during training, every run")
    extra = [Line2D([], [], color="black", marker="o", ls="none", ms=4.5, label="final loss")]
    if unfinished:
        extra.append(Line2D([], [], color="black", ls="--", marker="X", ms=6, label="did not finish"))
    if stable:
        extra.append(Line2D([], [], color="black", ls=":", label="WSD stable phase"))
    _size_legend(fig, ax, colours, sizes, extra_handles=extra, loc="upper right", label=f"N ({n_label})")
    return fig


# ----------------------------------------------------------------------------- 2. final loss

def _series_values(values, max_series: int = 8) -> tuple[np.ndarray, bool]:
    """The distinct values (exact grid), or a few log-spaced representatives (scattered data)."""
    distinct = np.unique(values)
    if len(distinct) <= max_series:
        return distinct, True
    qs = np.quantile(np.log(values), [0.05, 0.275, 0.5, 0.725, 0.95])
    return np.exp(qs), False


@_with_rc
def final_loss(n, d, loss, law: Law, colours: SizeColours, *, n_label: str = "parameters") -> Figure:
    """Final loss against N at each D (left) and against D at each N (right), with the law.

    On a grid (few distinct D and N), each series has its own curve of the law in its colour.
    On scattered points (many distinct values), points are coloured continuously and the law is
    drawn at a few representative values; the colour bars say which.
    """
    n, d, loss = (np.asarray(v, dtype=float) for v in (n, d, loss))
    fig, axes = _new(1, 2, size=(13.0, 4.8))
    d_colours = LogColours(d, OTHER_CMAP, "tokens D")
    # Left: loss vs N, series by D.
    ax = axes[0, 0]
    n_grid = np.geomspace(n.min() / 1.5, n.max() * 1.5, 200)
    d_series, d_exact = _series_values(d)
    if d_exact:
        for dv in d_series:
            m = d == dv
            c = d_colours(dv)
            ax.plot(n_grid, law.loss(n_grid, dv), color=c, lw=1.2, alpha=0.9)
            ax.plot(n[m], loss[m], "o", color=c, mec="white", mew=0.5, ms=6, label=f"D = {human(dv)}")
        ax.legend(title="tokens D\n(points: runs;\nlines: fit)", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.scatter(n, loss, c=d_colours(d), s=14, edgecolors="none", alpha=0.85)
        for dv in d_series:
            ax.plot(n_grid, law.loss(n_grid, dv), color=d_colours(dv), lw=1.4)
        d_colours.colorbar(fig, ax, "tokens D (lines: the fit at 5 quantiles of D)")
    log_axis(ax, "x")
    ax.set_xlabel(f"parameters N ({n_label}, log scale)")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title("Final loss against model size, at each token budget")

    # Right: loss vs D, series by N.
    ax = axes[0, 1]
    d_grid = np.geomspace(d.min() / 1.5, d.max() * 1.5, 200)
    n_series, n_exact = _series_values(n)
    if n_exact:
        for nv in n_series:
            m = n == nv
            c = colours(nv)
            ax.plot(d_grid, law.loss(nv, d_grid), color=c, lw=1.2, alpha=0.9)
            ax.plot(d[m], loss[m], "o", color=c, mec="white", mew=0.5, ms=6, label=f"N = {human(nv)}")
        ax.legend(title="model size N\n(points: runs;\nlines: fit)", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.scatter(d, loss, c=colours(n), s=14, edgecolors="none", alpha=0.85)
        for nv in n_series:
            ax.plot(d_grid, law.loss(nv, d_grid), color=colours(nv), lw=1.4)
        colours.colorbar(fig, ax, f"N, {n_label} (lines: the fit at 5 quantiles of N)")
    log_axis(ax, "x")
    ax.set_xlabel("training tokens D (tokens, log scale)")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title("Final loss against tokens, at each model size")
    lo = min(loss.min(), float(np.min(law.loss(n.max() * 1.5, d.max() * 1.5))))
    for a in axes[0]:
        a.set_ylim(lo - 0.05 * np.ptp(loss), loss.max() + 0.08 * np.ptp(loss))
    fig.suptitle(f"L(N, D) = {law.E:.3g} + {law.A:.4g}/N^{law.alpha:.3f} + {law.B:.4g}/D^{law.beta:.3f}",
                 fontsize=10)
    return fig


# ----------------------------------------------------------------------------- 3. IsoFLOP

@dataclass(frozen=True)
class Profile:
    """One compute budget of Approach 2: its runs, its parabola in ln N, and its status."""

    compute: float
    n: np.ndarray
    loss: np.ndarray
    status: str
    parabola: tuple | None = None      # (centre, p2, p1, p0): loss = p2 u^2 + p1 u + p0, u = ln N - centre
    n_opt: float | None = None
    loss_opt: float | None = None


@_with_rc
def isoflop(profiles: list[Profile], law: Law, *, a2=None, frontier=None, data_c_range=None,
            n_label: str = "parameters") -> Figure:
    """Left: loss against N along each compute budget (points), the fitted parabola and its
    minimum (Approach 2), and the law's own loss along that budget with its optimum
    (Approach 3). Right: N_opt against C from both, with Approach 2's power-law fit.

    a2: (coefficient, exponent) of Approach 2's N_opt = k C^a, or None. frontier: Approach 1's
    frontier as (compute array, n array), or None.
    """
    fig, axes = _new(1, 2, size=(13.0, 5.6), gridspec_kw={"width_ratios": [1.4, 1]})
    ax = axes[0, 0]
    cs = [p.compute for p in profiles]
    c_colours = LogColours(cs, OTHER_CMAP, "compute budget C (FLOPs)")
    many = len(profiles) > MAX_LEGEND_ENTRIES
    all_n = np.concatenate([p.n for p in profiles]) if profiles else np.array([1.0])
    stars = 0
    for p in profiles:
        col = c_colours(p.compute)
        ax.plot(p.n, p.loss, "o", color=col, ms=5 if not many else 3.5, mec="white", mew=0.4,
                alpha=0.9 if p.status == "ok" else 0.45)
        lo, hi = float(p.n.min()), float(p.n.max())
        if p.parabola is not None and p.status == "ok":
            centre, p2, p1, p0 = p.parabola
            grid = np.geomspace(lo, hi, 80)
            u = np.log(grid) - centre
            ax.plot(grid, p2 * u**2 + p1 * u + p0, color=col, lw=1.3)
            ax.plot(p.n_opt, p.loss_opt, "D", color=col, mec="black", mew=0.7, ms=6.5, zorder=5)
        # The law along this budget, and its optimum.
        span = np.geomspace(lo / 2, hi * 2, 80)
        ax.plot(span, law.loss(span, p.compute / (6 * span)), color=col, lw=0.9, ls=":", alpha=0.9)
        n_star = float(law.n_opt(p.compute))
        if lo / 2 <= n_star <= hi * 2:
            stars += 1
            ax.plot(n_star, float(law.optimal_loss(p.compute)), "*", color=col, mec="black", mew=0.6,
                    ms=11, zorder=6)
    ax.set_xlabel(f"parameters N ({n_label}, log scale)")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title("IsoFLOP profiles: loss along each compute budget")
    any_ok = any(p.status == "ok" and p.parabola is not None for p in profiles)
    keys = [Line2D([], [], color="grey", marker="o", ls="none", ms=5, label="runs (faint: budget not used)")]
    if any_ok:
        keys += [Line2D([], [], color="grey", lw=1.3, label="parabola in ln N (Approach 2)"),
                 Line2D([], [], color="grey", marker="D", mec="black", ls="none", ms=6, label="its minimum")]
    keys.append(Line2D([], [], color="grey", lw=0.9, ls=":", label="fitted law along the budget"))
    if stars:
        keys.append(Line2D([], [], color="grey", marker="*", mec="black", ls="none", ms=10,
                           label="law's optimum (Approach 3)"))
    else:
        keys.append(Line2D([], [], ls="none", label="(the law's optima lie outside these sizes)"))
    c_colours.colorbar(fig, ax)
    ax.legend(handles=keys, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
    losses = np.concatenate([p.loss for p in profiles]) if profiles else np.array([1.0])
    pad = 0.08 * max(np.ptp(losses), 1e-3)
    ax.set_ylim(losses.min() - pad, losses.max() + pad)
    ax.set_xlim(all_n.min() / 2.2, all_n.max() * 2.2)
    log_axis(ax, "x")

    # Right: N_opt(C).
    ax = axes[0, 1]
    ok = [p for p in profiles if p.status == "ok"]
    c_lo = min(cs) if cs else 1.0
    c_hi = max(cs) if cs else 10.0
    if data_c_range is not None:
        c_lo, c_hi = min(c_lo, data_c_range[0]), max(c_hi, data_c_range[1])
    c_grid = np.geomspace(c_lo / 1.5, c_hi * 1.5, 100)
    ax.plot(c_grid, law.n_opt(c_grid), color="black", lw=1.6,
            label=f"fitted law (Approach 3), a = {law.a:.3f}")
    if frontier is not None and len(frontier[0]):
        ax.plot(frontier[0], frontier[1], color="#1f77b4", lw=1.0, alpha=0.8,
                label="envelope of training curves (Approach 1)")
    if ok:
        ax.scatter([p.compute for p in ok], [p.n_opt for p in ok], c=[c_colours(p.compute) for p in ok],
                   marker="D", edgecolors="black", linewidths=0.7, s=40, zorder=5,
                   label="parabola minima (Approach 2)")
    if a2 is not None:
        k, a = a2
        ax.plot(c_grid, k * c_grid**a, color="#444444", lw=1.2, ls="--", label=f"power law through minima, a = {a:.3f}")
    else:
        ax.text(0.97, 0.04, f"Approach 2: {len(ok)} budget(s) with a minimum inside\nthe sampled sizes (2 needed): no a",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=8.5, color="#444444")
    ax.scatter(cs, [float(law.n_opt(c)) for c in cs], marker="*", c=[c_colours(c) for c in cs],
               edgecolors="black", linewidths=0.6, s=90, zorder=6, label="law's optimum at each budget")
    log_axis(ax, "x", counts=False)
    log_axis(ax, "y")
    ax.set_xlabel("compute C = 6ND (FLOPs, log scale)")
    ax.set_ylabel(f"compute-optimal N ({n_label}, log scale)")
    ax.set_title("Compute-optimal model size by approach")
    ax.legend(loc="upper left", frameon=True, framealpha=0.85)
    return fig


# ----------------------------------------------------------------------------- 4. frontiers

@_with_rc
def frontiers(law: Law, n, c, colours: SizeColours, *, references: dict, c_range=None, c_max: float = 1e24,
              budgets=(), n_label: str = "parameters") -> Figure:
    """Iso-loss contours of the fitted L(N, D = C/6N) over the (C, N) plane, the runs as points,
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
    fig, axes = _new(size=(8.8, 7.4))
    ax = axes[0, 0]

    xs = np.geomspace(c_lo, c_max, 300)
    ys = np.geomspace(n_lo, n_hi, 300)
    X, Y = np.meshgrid(xs, ys)
    D = X / (6 * Y)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        Z = np.where(D >= 1, law.loss(Y, D), np.nan)
    # One contour per decade of C: the loss the law reaches there with the best split, so each
    # contour touches the fitted frontier at a power of ten.
    decades = 10.0 ** np.arange(math.ceil(math.log10(c_lo)), math.floor(math.log10(c_max)) + 1, 1)
    if len(decades) > 9:
        decades = decades[:: math.ceil(len(decades) / 9)]
    touch = {float(np.round(law.optimal_loss(c), 6)): float(c) for c in decades}   # level -> its C
    levels = np.array(sorted(touch))
    cs = ax.contour(X, Y, Z, levels=levels, colors="#555555", linewidths=0.7, alpha=0.75)
    spots = _contour_label_spots(law, touch, c_max, n_lo, n_hi)
    if spots:
        ax.clabel(cs, fmt=lambda v: f"{v:.3g}", fontsize=7.5, inline=True, manual=spots)
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
    if n.size:
        ax.scatter(c, n, c=colours(n), s=22 if n.size < 100 else 14, edgecolors="black", linewidths=0.3,
                   alpha=0.8, zorder=4, label="the runs fitted")
    for b in budgets:
        ax.axvline(b, color="#1f77b4", lw=0.6, ls=":", alpha=0.6)
        ax.text(b, n_lo * 1.5, f" {sci(b)}", rotation=90, va="bottom", ha="right", fontsize=7.5, color="#1f77b4")
    ax.set_xlim(c_lo, c_max)
    ax.set_ylim(n_lo, n_hi)
    log_axis(ax, "x", counts=False)
    log_axis(ax, "y")
    ax.set_xlabel("training compute C = 6ND (FLOPs, log scale)")
    ax.set_ylabel(f"parameters N ({n_label}, log scale)")
    ax.set_title("Iso-loss contours of the fitted L(N, D) and compute-optimal frontiers")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False,
              title="compute-optimal N_opt(C); grey: contours of the fitted loss (nats/token)")
    if n.size and not colours.discrete:
        colours.colorbar(fig, ax, f"N ({n_label}) of your runs")
    return fig


def _contour_label_spots(law: Law, touch: dict, c_max, n_lo, n_hi) -> list[tuple[float, float]]:
    """Where to label each iso-loss contour: on its lower branch near the right edge (where it runs
    flat, limited by N), else where it touches the fitted frontier; none when both are off the plot."""
    spots = []
    x = c_max / 2.5
    n_star = float(law.n_opt(x))
    col = np.geomspace(n_lo, min(n_star, n_hi), 400)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        z = law.loss(col, x / (6 * col))          # falls as N grows towards the optimum
    for level, c in sorted(touch.items()):
        ok = np.isfinite(z)
        if ok.sum() > 1 and z[ok].min() < level < z[ok].max():
            spots.append((x, float(np.exp(np.interp(level, z[ok][::-1], np.log(col[ok])[::-1])))))
            continue
        n_at = float(law.n_opt(c))
        if n_lo < n_at < n_hi and c < c_max / 3:       # a label at the plot's edge would be cut
            spots.append((float(c), n_at))
    return spots


# ----------------------------------------------------------------------------- 5. residuals

@_with_rc
def residuals(n, c, resid, colours: SizeColours, *, n_label: str = "parameters") -> Figure:
    """ln L_observed - ln L_fitted against compute (left) and against N (right)."""
    n, c, resid = (np.asarray(v, dtype=float) for v in (n, c, resid))
    fig, axes = _new(1, 2, size=(11.5, 4.3), sharey=True)
    rms = float(np.sqrt(np.mean(resid**2))) if resid.size else 0.0
    for ax, x, label in ((axes[0, 0], c, "compute C = 6ND (FLOPs, log scale)"),
                         (axes[0, 1], n, f"parameters N ({n_label}, log scale)")):
        ax.axhline(0, color="black", lw=0.8)
        ax.axhspan(-rms, rms, color="grey", alpha=0.15, lw=0, label=f"± RMS ({rms:.3g})")
        ax.scatter(x, resid, c=colours(n), s=22 if len(n) < 100 else 12, edgecolors="black",
                   linewidths=0.3, zorder=4)
        if x.size:
            ax.set_xlim(x.min() / 1.4, x.max() * 1.4)
        log_axis(ax, "x", counts=(x is n))
        ax.set_xlabel(label)
    axes[0, 0].set_ylabel("residual ln L_obs - ln L_fit\n(≈ relative error of the fit)")
    axes[0, 0].set_title("Residuals against compute")
    axes[0, 1].set_title("Residuals against model size")
    axes[0, 0].legend(loc="upper left")
    lim = max(float(np.max(np.abs(resid))) * 1.15 if resid.size else 0.01, 1e-3)
    axes[0, 0].set_ylim(-lim, lim)
    _size_legend(fig, axes[0, 1], colours, n, label=f"N ({n_label})", line=False, outside=True)
    return fig


@_with_rc
def bootstrap_distributions(samples: dict, estimates: dict, intervals: dict, *, references: dict,
                            reference_compute: float, n_resamples: int, level: float = 0.95) -> Figure:
    """Histograms of alpha, beta, a and tokens per parameter over the bootstrap resamples.

    estimates: the full-data fit's values; intervals: name -> (lo, hi) or None; references:
    name -> {quantity: value} for published values drawn as vertical lines.
    """
    names = (("alpha", "alpha (exponent of N)"), ("beta", "beta (exponent of D)"),
             ("a", "a (N_opt ∝ C^a)"),
             ("tokens_per_param", f"tokens per parameter D_opt/N_opt at C = {sci(reference_compute)} FLOPs"))
    fig, axes = _new(2, 2, size=(11.0, 7.0))
    for ax, (key, title) in zip(axes.ravel(), names):
        v = np.asarray(samples.get(key, []), dtype=float)
        ok = v[np.isfinite(v)]
        log = (key == "tokens_per_param" and ok.size > 0 and np.all(ok > 0)
               and ok.max() / ok.min() > 20)
        top = 1.0
        if ok.size:
            if log:
                bins = np.geomspace(ok.min(), ok.max() * 1.0001, 40)
                ax.set_xscale("log")
                plain = FuncFormatter(lambda v, _: f"{v:g}")
                ax.xaxis.set_major_formatter(plain)
            else:
                bins = 40
            counts, _, _ = ax.hist(ok, bins=bins, color="#9ecae1", edgecolor="#3182bd", lw=0.5)
            top = float(counts.max())
        est = estimates.get(key)
        if est is not None and math.isfinite(est):
            ax.axvline(est, color="black", lw=1.8, label=f"fit: {est:.4g}")
        iv = intervals.get(key)
        if iv and None not in iv and all(math.isfinite(x) for x in iv):
            for i, x in enumerate(iv):
                ax.axvline(x, color="black", lw=1.0, ls="--",
                           label=f"{100 * level:g}% interval [{iv[0]:.4g}, {iv[1]:.4g}]" if i == 0 else None)
        for ref, values in references.items():
            x = values.get(key)
            if x is None:
                continue
            colour, style = REFERENCE_STYLE.get(ref, ("#9467bd", "-"))
            ax.axvline(x, color=colour, ls=style, lw=1.4, label=f"{REFERENCE_LABEL.get(ref, ref)}: {x:.3g}")
        ax.set_ylim(0, top * 1.6)   # room for the legend above the bars
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        bad = v.size - ok.size
        ax.set_title(title + (f"\n({bad} of {v.size} resamples undefined)" if bad else ""))
        ax.set_xlabel(key.replace("_", " ") + (" (log scale)" if log else ""))
        ax.set_ylabel("resamples")
        ax.legend(loc="upper right", fontsize=7.5, framealpha=0.85)
    fig.suptitle(f"Bootstrap distributions ({n_resamples} resamples of the points, each refitted)", fontsize=10)
    return fig


# ----------------------------------------------------------------------------- files

def save(fig: Figure, directory, name: str) -> list[Path]:
    """Write NAME.png and NAME.svg into `directory`; identical bytes for the same figure."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    png = png_bytes(fig)
    # The PNG's draw has laid the figure out; keep that layout for the SVG instead of solving
    # it again (a third of the time, and the same picture: a re-laid-out PNG is identical).
    fig.set_layout_engine("none")
    for fmt, data in (("png", png), ("svg", svg_bytes(fig))):
        path = directory / f"{name}.{fmt}"
        path.write_bytes(data)
        paths.append(path)
    return paths


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    with rc_context(RC):
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def svg_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    with rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    return buf.getvalue()
