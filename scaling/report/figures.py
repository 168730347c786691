"""The report's figures, drawn from data objects (no file discovery, no fitting).

    colours = SizeColours(all_n)
    fig = loss_curves(curves, colours, n_label="non-embedding parameters")
    fig = isoflop(approaches.isoflop(n, d, loss), n, loss, law)

Each function returns a `matplotlib.figure.Figure` in the report's style (`scaling.report.style`).
The iso-loss contours and frontiers are in `scaling.report.frontiers`; the validation's and the repeated
data's figures in `scaling.report.decision_figures`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure, FigureBase
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

from scaling.errors import UsageError
from scaling.formats import sci
from scaling.laws.checks.verdict import THRESHOLDS
from scaling.laws.forms.allocating import AllocatingLaw, NumericAllocation
from scaling.laws.optimal.allocation import model_optimum
from scaling.laws.optimal.approaches import IsoFLOPResult
from scaling.report.style import (
    MAX_LEGEND_ENTRIES,
    OTHER_CMAP,
    REFERENCE_LABEL,
    REFERENCE_STYLE,
    LogColours,
    SizeColours,
    compute_axis,
    human,
    log_axis,
    new_figure,
    size_legend,
    with_rc,
)

PROFILE_LEGEND = "isoflop-profiles-legend"      # the gid that marks the profiles' legend among a figure's

# ----------------------------------------------------------------------------- 1. loss curves

@with_rc
def loss_curves(curves: pd.DataFrame, colours: SizeColours, *, n_label: str = "parameters") -> Figure:
    """Validation loss against tokens seen, one line per run, one colour per model size.

    curves: DataFrame with run_id, n, tokens, loss, status (one row per evaluation). Runs that
    did not finish are dashed and end in a cross; WSD stable runs (the shared phase their
    cooldown branches start from) are dotted, with no final loss.
    """
    fig, ax = _run_lines(curves, colours, n_label=n_label)
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title("Validation loss during training, every run")
    return fig


@with_rc
def context_curves(curves: pd.DataFrame, colours: SizeColours, *, n_label: str = "parameters") -> Figure:
    """Context use (scaling.train.batches.context_use) against tokens seen, drawn as the loss
    curves are (its values in the `loss` column), with the line past which a run uses its context."""
    fig, ax = _run_lines(curves, colours, n_label=n_label)
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.axhline(THRESHOLDS["context_use"], color="0.3", lw=0.8, ls="--")
    ax.set_ylabel("context use (nats: loss at positions 1-7 minus\nover the context's second half)")
    ax.set_title("Context use during training, every run\n(above the dashed line: the run uses its context)")
    return fig


def _run_lines(curves: pd.DataFrame, colours: SizeColours, *, n_label: str) -> tuple[Figure, Axes]:
    """One line per run of `curves` against log tokens, ending at its last value; the legend."""
    fig, axes = new_figure(size=(7.5, 4.8))
    ax = axes[0, 0]
    sizes = []
    unfinished = stable = False
    for _, g in curves.groupby("run_id", sort=True):
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
    extra = [Line2D([], [], color="black", marker="o", ls="none", ms=4.5, label="final value")]
    if unfinished:
        extra.append(Line2D([], [], color="black", ls="--", marker="X", ms=6, label="did not finish"))
    if stable:
        extra.append(Line2D([], [], color="black", ls=":", label="WSD stable phase"))
    size_legend(fig, ax, colours, sizes, extra_handles=extra, loc="upper right", label=f"N ({n_label})")
    return fig, ax


# ----------------------------------------------------------------------------- 2. final loss

def _series_values(values: np.ndarray, max_series: int = 8) -> tuple[np.ndarray, bool]:
    """The distinct values (exact grid), or a few log-spaced representatives (scattered data)."""
    distinct = np.unique(values)
    if len(distinct) <= max_series:
        return distinct, True
    qs = np.quantile(np.log(values), [0.05, 0.275, 0.5, 0.725, 0.95])
    return np.exp(qs), False


def _loss_panel(ax: Axes, fig: FigureBase, x: np.ndarray, by: np.ndarray, loss: np.ndarray,
                curve: Callable[[np.ndarray, float], np.ndarray], colours: LogColours, *, by_name: str,
                bar_label: str) -> None:
    """Final loss against x, one series a value of `by` (points and the law's curve in its colour);
    on scattered data, points coloured continuously and the law at a few representative values."""
    grid = np.geomspace(x.min() / 1.5, x.max() * 1.5, 200)
    series, exact = _series_values(by)
    if exact:
        for value in series:
            m, c = by == value, colours(value)
            ax.plot(grid, curve(grid, value), color=c, lw=1.2, alpha=0.9)
            ax.plot(x[m], loss[m], "o", color=c, mec="white", mew=0.5, ms=6, label=f"{by_name} = {human(value)}")
        ax.legend(title=f"{bar_label}\n(points: runs;\nlines: fit)", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.scatter(x, loss, c=colours(by), s=14, edgecolors="none", alpha=0.85)
        for value in series:
            ax.plot(grid, curve(grid, value), color=colours(value), lw=1.4)
        colours.colorbar(fig, ax, f"{bar_label} (lines: the fit at 5 quantiles of {by_name})")
    log_axis(ax, "x")
    ax.set_ylabel("final validation loss (nats/token)")


@with_rc
def final_loss(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, law: AllocatingLaw, colours: SizeColours, *,
               title: str, n_label: str = "parameters") -> Figure:
    """Final loss against N at each D (left) and against D at each N (right), with the law.

    On a grid (few distinct D and N), each series has its own curve of the law in its colour.
    On scattered points (many distinct values), points are coloured continuously and the law is
    drawn at a few representative values; the colour bars say which.
    """
    fig, axes = new_figure(1, 2, size=(13.0, 4.8))
    final_loss_panels(fig, axes[0], n, d, loss, law, colours, title=title, n_label=n_label)
    return fig


def final_loss_panels(fig: FigureBase, axes: np.ndarray, n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike,
                      law: AllocatingLaw, colours: SizeColours, *, title: str, n_label: str = "parameters") -> None:
    """`final_loss`'s two panels, drawn on `axes` (left, right) of `fig` (a figure or a subfigure), `title` above."""
    n, d, loss = (np.asarray(v, dtype=float) for v in (n, d, loss))
    left, right = axes
    _loss_panel(left, fig, n, d, loss, lambda grid, dv: law.loss(grid, dv), LogColours(d, OTHER_CMAP, "tokens D"),
                by_name="D", bar_label="tokens D")
    left.set_xlabel(f"parameters N ({n_label}, log scale)")
    left.set_title("Final loss against model size, at each token budget")
    _loss_panel(right, fig, d, n, loss, lambda grid, nv: law.loss(nv, grid), colours,
                by_name="N", bar_label=f"model size N, {n_label}")
    right.set_xlabel("training tokens D (tokens, log scale)")
    right.set_title("Final loss against tokens, at each model size")
    lo = min(loss.min(), float(np.min(law.loss(n.max() * 1.5, d.max() * 1.5))))
    for a in axes:
        a.set_ylim(lo - 0.05 * np.ptp(loss), loss.max() + 0.08 * np.ptp(loss))
    fig.suptitle(title, fontsize=10)


# ----------------------------------------------------------------------------- 3. IsoFLOP

@with_rc
def isoflop(iso: IsoFLOPResult, n: np.ndarray, loss: np.ndarray, law: AllocatingLaw, *,
            frontier: tuple[np.ndarray, np.ndarray] | None = None, data_c_range: tuple[float, float] | None = None,
            n_label: str = "parameters", law_name: str | None = None) -> Figure:
    """Left: loss against N along each compute budget of Approach 2 (`iso`, on the points n, loss:
    the points of each budget, its parabola in ln N and the minimum), and the law's own loss along
    that budget with its optimum (Approach 3). Right: N_opt against C from both, with Approach 2's
    power-law fit.

    frontier: Approach 1's frontier as (compute array, n array), or None. law_name: what the legends
    call `law` where it is not the fit's own (`scaling.report.drawn.drawn_name`: "kaplan form").
    """
    fig, axes = new_figure(1, 2, size=(13.0, 5.6), gridspec_kw={"width_ratios": [1.4, 1]})
    isoflop_panels(fig, axes[0], iso, n, loss, law, frontier=frontier, data_c_range=data_c_range, n_label=n_label,
                   law_name=law_name)
    return fig


def isoflop_panels(fig: FigureBase, axes: Sequence[Axes] | np.ndarray, iso: IsoFLOPResult, n: np.ndarray,
                   loss: np.ndarray, law: AllocatingLaw, *, frontier: tuple[np.ndarray, np.ndarray] | None = None,
                   data_c_range: tuple[float, float] | None = None, n_label: str = "parameters",
                   law_name: str | None = None) -> list[Artist]:
    """`isoflop`'s two panels, drawn on `axes` (profiles, optimal sizes) of `fig` (a figure or a subfigure),
    and their legend (`profile_legend`); its keys, for a caller that adds its own."""
    n, loss = np.asarray(n, dtype=float), np.asarray(loss, dtype=float)
    ax = axes[0]
    cs = [b.compute for b in iso.budgets]
    c_colours = LogColours(cs, OTHER_CMAP, compute_axis(law.flops.name).replace("compute C", "compute budget C")
                           .replace(", log scale", ""))
    many = len(cs) > MAX_LEGEND_ENTRIES
    stars = 0
    for budget, profile in zip(iso.budgets, iso.profiles):
        col = c_colours(budget.compute)
        p_n, p_loss = n[profile.index], loss[profile.index]
        ax.plot(p_n, p_loss, "o", color=col, ms=5 if not many else 3.5, mec="white", mew=0.4,
                alpha=0.9 if budget.usable else 0.45)
        lo, hi = float(p_n.min()), float(p_n.max())
        if budget.usable:
            centre, p2, p1, p0 = profile.parabola
            grid = np.geomspace(lo, hi, 80)
            u = np.log(grid) - centre
            ax.plot(grid, p2 * u**2 + p1 * u + p0, color=col, lw=1.3)
            assert budget.n_opt is not None and budget.loss_opt is not None    # a usable budget has its minimum
            ax.plot(budget.n_opt, budget.loss_opt, "D", color=col, mec="black", mew=0.7, ms=6.5, zorder=5)
        # The law along this budget, and its optimum.
        span = np.geomspace(lo / 2, hi * 2, 80)
        ax.plot(span, law.loss(span, law.flops.tokens(budget.compute, span)), color=col, lw=0.9, ls=":", alpha=0.9)
        n_star = float(law.n_opt(budget.compute))
        if lo / 2 <= n_star <= hi * 2:
            stars += 1
            ax.plot(n_star, float(law.optimal_loss(budget.compute)), "*", color=col, mec="black", mew=0.6,
                    ms=11, zorder=6)
    ax.set_xlabel(f"parameters N ({n_label}, log scale)")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title("IsoFLOP profiles: loss along each compute budget")
    c_colours.colorbar(fig, ax)
    keys = _profile_keys(bool(iso.usable), stars, law_name)
    profile_legend(fig, keys)
    all_n = np.concatenate([n[p.index] for p in iso.profiles]) if iso.profiles else np.array([1.0])
    losses = np.concatenate([loss[p.index] for p in iso.profiles]) if iso.profiles else np.array([1.0])
    pad = 0.08 * max(np.ptp(losses), 1e-3)
    ax.set_ylim(losses.min() - pad, losses.max() + pad)
    ax.set_xlim(all_n.min() / 2.2, all_n.max() * 2.2)
    log_axis(ax, "x")
    _optimal_sizes(axes[1], iso, law, c_colours, frontier=frontier, data_c_range=data_c_range, n_label=n_label,
                   law_name=law_name)
    return keys


def profile_legend(fig: FigureBase, keys: Sequence) -> None:
    """The IsoFLOP profiles' legend, below both panels: `keys` are `_profile_keys`, and any a caller
    adds (`scaling.report.plot`: the loss interval at each optimum), in place of the one drawn before.
    Below the figure, not below the panel: a legend wider than its panel widened the panel's margins,
    which parted it from its colour bar and ran the legend off the canvas's left edge."""
    for old in [legend for legend in fig.legends if legend.get_gid() == PROFILE_LEGEND]:
        old.remove()
    fig.legend(handles=list(keys), loc="outside lower center", ncol=3, frameon=False).set_gid(PROFILE_LEGEND)


def _profile_keys(any_usable: bool, stars: int, law_name: str | None) -> list:
    """The IsoFLOP panel's legend: runs, parabolas and their minima (where a budget was usable),
    the law along each budget, and its optima (or why none is drawn)."""
    keys = [Line2D([], [], color="grey", marker="o", ls="none", ms=5, label="runs (faint: budget not used)")]
    if any_usable:
        keys += [Line2D([], [], color="grey", lw=1.3, label="parabola in ln N (Approach 2)"),
                 Line2D([], [], color="grey", marker="D", mec="black", ls="none", ms=6, label="its minimum")]
    keys.append(Line2D([], [], color="grey", lw=0.9, ls=":", label=f"{law_name or 'fitted law'} along the budget"))
    if stars:
        keys.append(Line2D([], [], color="grey", marker="*", mec="black", ls="none", ms=10,
                           label=f"{law_name}'s optimum" if law_name else "law's optimum (Approach 3)"))
    else:
        keys.append(Line2D([], [], ls="none", label="(the law's optima lie outside these sizes)"))
    return keys

def _optimal_sizes(ax: Axes, iso: IsoFLOPResult, law: AllocatingLaw, c_colours: LogColours, *,
                   frontier: tuple[np.ndarray, np.ndarray] | None, data_c_range: tuple[float, float] | None,
                   n_label: str, law_name: str | None) -> None:
    """The isoflop figure's right panel: N_opt against C from each approach."""
    cs = [b.compute for b in iso.budgets]
    ok = iso.usable
    c_lo = min(cs) if cs else 1.0
    c_hi = max(cs) if cs else 10.0
    if data_c_range is not None:
        c_lo, c_hi = min(c_lo, data_c_range[0]), max(c_hi, data_c_range[1])
    c_grid = np.geomspace(c_lo / 1.5, c_hi * 1.5, 100)
    # A numeric optimum's exponent moves with C: the a shown is its slope about one compute.
    local = f" (local, at C = {law.reference:.2g})" if isinstance(law, NumericAllocation) else ""
    star_n: np.ndarray | None = None
    try:
        ax.plot(c_grid, model_optimum(law, c_grid)[0], color="black", lw=1.6,
                label=f"{law_name or 'fitted law (Approach 3)'}, a = {law.a:.3f}{local}")
        star_n = model_optimum(law, cs)[0]
    except UsageError:      # a flat table's N_opt = 1e116 would set the axis: not drawn, and said so
        ax.text(0.03, 0.2, "the law's optimum is no model here\n(N < 1 or D < 1): not drawn", transform=ax.transAxes,
                fontsize=8.5, color="#444444")
    if frontier is not None and len(frontier[0]):
        ax.plot(frontier[0], frontier[1], color="#1f77b4", lw=1.0, alpha=0.8,
                label="envelope of training curves (Approach 1)")
    if ok:
        ax.scatter([p.compute for p in ok], np.array([p.n_opt for p in ok], dtype=float),
                   c=[c_colours(p.compute) for p in ok],
                   marker="D", edgecolors="black", linewidths=0.7, s=40, zorder=5,
                   label="parabola minima (Approach 2)")
    if iso.n_fit is not None:
        k, a = iso.n_fit.coefficient, iso.n_fit.exponent
        ax.plot(c_grid, k * c_grid**a, color="#444444", lw=1.2, ls="--", label=f"power law through minima, a = {a:.3f}")
    else:
        ax.text(0.97, 0.04, f"Approach 2: {len(ok)} budget(s) with a minimum inside\nthe sampled sizes (2 needed): "
                "no a", transform=ax.transAxes, ha="right", va="bottom", fontsize=8.5, color="#444444")
    if star_n is not None:
        ax.scatter(cs, star_n, marker="*", c=[c_colours(c) for c in cs],
                   edgecolors="black", linewidths=0.6, s=90, zorder=6, label="law's optimum at each budget")
    log_axis(ax, "x", counts=False)
    log_axis(ax, "y")
    ax.set_xlabel(compute_axis(law.flops.name))
    ax.set_ylabel(f"compute-optimal N ({n_label}, log scale)")
    ax.set_title("Compute-optimal model size by approach")
    ax.legend(loc="upper left", frameon=True, framealpha=0.85)


# ----------------------------------------------------------------------------- 5. residuals

@with_rc
def residuals(n: np.ndarray, c: np.ndarray, resid: np.ndarray, colours: SizeColours, *, n_label: str = "parameters",
              compute_label: str = "6ND") -> Figure:
    """ln L_observed - ln L_fitted against compute (left, C in `compute_label`'s measure) and against N (right)."""
    n, c, resid = (np.asarray(v, dtype=float) for v in (n, c, resid))
    fig, axes = new_figure(1, 2, size=(11.5, 4.3), sharey=True)
    rms = float(np.sqrt(np.mean(resid**2))) if resid.size else 0.0
    for ax, x, label in ((axes[0, 0], c, compute_axis(compute_label)),
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
    # The band's key below the panels, off the data: inside, it covered the largest residual, the
    # point the caption names.
    fig.legend(handles=axes[0, 0].get_legend_handles_labels()[0], loc="outside lower left", frameon=False)
    lim = max(float(np.max(np.abs(resid))) * 1.15 if resid.size else 0.01, 1e-3)
    axes[0, 0].set_ylim(-lim, lim)
    size_legend(fig, axes[0, 1], colours, n, label=f"N ({n_label})", line=False, outside=True)
    return fig


@with_rc
def bootstrap_distributions(samples: dict, estimates: dict, intervals: dict, *, references: dict,
                            reference_compute: float | None, n_resamples: int | None, level: float = 0.95) -> Figure:
    """Histograms of alpha, beta, a and tokens per parameter over the bootstrap resamples.

    estimates: the full-data fit's values; intervals: name -> (lo, hi) or None; references:
    name -> {quantity: value} for published values drawn as vertical lines.
    """
    names = (("alpha", "alpha (exponent of N)"), ("beta", "beta (exponent of D)"),
             ("a", "a (N_opt ∝ C^a)"),
             ("tokens_per_param", f"tokens per parameter D_opt/N_opt at C = {sci(reference_compute, 2)} FLOPs"))
    fig, axes = new_figure(2, 2, size=(14.0, 7.0))
    for ax, (key, title) in zip(axes.ravel(), names):
        v = np.asarray(samples.get(key, []), dtype=float)
        ok = v[np.isfinite(v)]
        log = (key == "tokens_per_param" and ok.size > 0 and np.all(ok > 0)
               and ok.max() / ok.min() > 20)
        top = 1.0
        if ok.size:
            bins: int | np.ndarray   # hist takes edges or a count
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
        ax.set_ylim(0, top * 1.1)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        bad = v.size - ok.size
        ax.set_title(title + (f"\n({bad} of {v.size} resamples undefined)" if bad else ""))
        ax.set_xlabel(key.replace("_", " ") + (" (log scale)" if log else ""))
        ax.set_ylabel("resamples")
        # Beside the panel, off the bars and the lines: above the bars it covered the tallest of them.
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5, frameon=False)
    fig.suptitle(f"Bootstrap distributions ({n_resamples} resamples of the points, each refitted)", fontsize=10)
    return fig
