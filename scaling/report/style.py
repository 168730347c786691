"""How every figure of the report looks, and how it is saved: colours, axes, style, files.

    colours = SizeColours(all_n)                      # one colour per model size, everywhere
    log_axis(ax, "x", counts=False)                   # 1e18-style FLOPs ticks; 25K-style counts
    save(fig, "out/figures", "loss_curves")           # loss_curves.png and loss_curves.svg

Conventions shared by every figure: parameters N, tokens D and FLOPs C on log axes (the law is
a power law in each); loss in nats per token on a linear axis; model size coloured by a
sequential colormap over log N (`SizeColours`), with a legend when there are few sizes and a
colour bar when there are many; a second colormap (`OTHER_CMAP`) for token budgets and compute
budgets, so that no colour means two things in one figure. Figures are `matplotlib.figure.Figure`
objects (no pyplot, so no global state and no GUI backend). `save` writes PNG and SVG
byte-identically for the same figure: the SVG's date and random ids and the PNG's software tag
are left out.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, overload

import matplotlib
import numpy as np
import numpy.typing as npt
from matplotlib import colors as mcolors
from matplotlib import rc_context
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colorbar import Colorbar
from matplotlib.figure import Figure, FigureBase
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from matplotlib.typing import RcKeyType

from scaling.formats import sci
from scaling.runs.store import write_atomic

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

RC: dict[RcKeyType, object] = {
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


P = ParamSpec("P")
R = TypeVar("R")

# ----------------------------------------------------------------------------- colours and labels

def _cmap(name: str) -> mcolors.Colormap:
    base = matplotlib.colormaps[name]
    lo, hi = CMAP_RANGE
    return mcolors.LinearSegmentedColormap.from_list(f"{name}-trunc", base(np.linspace(lo, hi, 256)))


class LogColours:
    """A colour for each value of a positive quantity, by position on a log scale."""

    def __init__(self, values: npt.ArrayLike, cmap: str, label: str) -> None:
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

    @overload
    def __call__(self, x: float) -> tuple[float, float, float, float]: ...
    @overload
    def __call__(self, x: np.ndarray) -> np.ndarray: ...
    def __call__(self, x: float | np.ndarray) -> tuple[float, float, float, float] | np.ndarray:
        return self.cmap(self.norm(x))

    @property
    def discrete(self) -> bool:
        return len(self.values) <= MAX_LEGEND_ENTRIES

    def colorbar(self, fig: FigureBase, ax: Axes, label: str | None = None) -> Colorbar:
        sm = ScalarMappable(norm=self.norm, cmap=self.cmap)
        cb = fig.colorbar(sm, ax=ax, pad=0.01)
        cb.set_label(label or self.label)
        return cb


class SizeColours(LogColours):
    """One colour per model size N, the same in every figure (viridis over log N)."""

    def __init__(self, n_values: npt.ArrayLike, label: str = "parameters N") -> None:
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


def log_axis(ax: Axes, which: str = "x", counts: bool = True) -> None:
    """A log axis whose ticks read at a glance: 25K, 100K, 1M for counts (parameters, tokens),
    1e18 for FLOPs; no crowded minor labels; ticks at 1, 2, 5 when the axis spans under two decades."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    lo, hi = (ax.get_xlim() if which == "x" else ax.get_ylim())
    if lo > 0 and hi > lo and math.log10(hi / lo) < 2:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: human(v) if counts else sci(v, 2)))
    axis.set_minor_formatter(NullFormatter())


class ShownFigure(Figure):
    """A Figure that Jupyter shows. IPython displays an object by its `_repr_png_`; a Figure made
    without pyplot (as ours are, so that nothing is kept in pyplot's registry of open figures)
    has one only while pyplot's inline backend is loaded, and a notebook that never imported
    pyplot printed `<Figure size 1560x576 with 4 Axes>` in its place. The PNG is the report's."""

    def _repr_png_(self) -> bytes:
        return png_bytes(self)


def new_figure(nrows: int = 1, ncols: int = 1, size: tuple[float, float] = (7.0, 4.6), **kw: Any
               ) -> tuple[ShownFigure, np.ndarray]:
    fig = ShownFigure(figsize=size, layout="constrained", dpi=DPI)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def size_legend(fig: Figure, ax: Axes, colours: SizeColours, sizes: Iterable[float], *,
                extra_handles: Sequence[Artist] = (), loc: str = "best",
                 title: str | None = None, label: str | None = None, line: bool = True, outside: bool = False) -> None:
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


def with_rc(fn: Callable[P, R]) -> Callable[P, R]:
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with rc_context(RC):
            return fn(*args, **kwargs)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


# ----------------------------------------------------------------------------- files

def save(fig: Figure, directory: str | Path, name: str) -> list[Path]:
    """Write NAME.png and NAME.svg into `directory`; identical bytes for the same figure."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for file, data in figure_files(fig, name).items():
        write_atomic(directory / file, data)         # a full disk leaves the old figure, not half an SVG
        paths.append(directory / file)
    return paths


def figure_files(fig: Figure, name: str) -> dict[str, bytes]:
    """{NAME.png, NAME.svg: their bytes}, identical for the same figure: for a caller that writes them
    with other files as one unit (`scaling.runs.journal.replace_files`)."""
    png = png_bytes(fig)
    # The PNG's draw has laid the figure out; keep that layout for the SVG instead of solving
    # it again (a third of the time, and the same picture: a re-laid-out PNG is identical).
    fig.set_layout_engine("none")
    return {f"{name}.png": png, f"{name}.svg": svg_bytes(fig)}


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


def compute_axis(measure_name: str) -> str:
    """An axis of compute in the fit's measure (`FlopsPerToken.name`): exact FLOPs or 6ND."""
    if "FLOPs" in measure_name:
        return f"compute C ({measure_name}, log scale)"
    return f"compute C = {measure_name} (FLOPs, log scale)"
