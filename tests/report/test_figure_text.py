"""Every word of every figure lies on its canvas: the report's figures and `scaling.fit_figure`'s, drawn
from the shared micro fit (tests/report/conftest.py) at each dpi a figure is shown or saved at.

A title, label, legend or annotation that runs past the canvas is cut off in the PNG (a title read
"Compute-optimal model size by approac" once); constrained layout keeps text inside the figure only
for what it lays out, and its margins are solved at one dpi, so each dpi is drawn and checked.
"""

from __future__ import annotations

import pytest
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from scaling import fit_figure, load
from scaling.report.inputs import load_inputs
from scaling.report.report import build_report
from scaling.report.style import DPI

# DPI: the report's PNGs, a notebook's image (`ShownFigure._repr_png_`) and `fig.savefig(path)` of one
# of ours; 72: an SVG's points and IPython's inline images, the coarsest (its hinted glyphs the widest
# for their size). Each draw lays the figure out again (a second each): two dpis, not every one.
DPIS = (72, DPI)
ROUNDING = 1.0          # pixels: a text's extent is rounded to whole pixels when drawn


def _drawn(artist) -> bool:
    """Drawn on the canvas: visible, with something to show, and not on a hidden panel."""
    if not artist.get_visible() or (isinstance(artist, Text) and not artist.get_text().strip()):
        return False
    return artist.axes is None or artist.axes.get_visible()


def _extents(fig: Figure) -> list[tuple[str, Bbox]]:
    """(what, its window extent) for each text and legend drawn, and each axis's tick labels and label:
    an axis's extent counts only the ticks drawn (its tick labels beyond the limits exist, undrawn)."""
    renderer = fig.canvas.get_renderer()
    axes_of = fig.findobj(Axis)
    ticks = {id(label) for axis in axes_of for label in axis.get_ticklabels(which="both")}
    texts = [a for a in fig.findobj(lambda a: isinstance(a, Text | Legend)) if id(a) not in ticks and _drawn(a)]
    named = [(f"legend {a.texts[0].get_text()!r}" if isinstance(a, Legend) and a.texts else repr(a.get_text())
              if isinstance(a, Text) else "legend", a.get_window_extent(renderer)) for a in texts]
    named += [(f"the {axis.axis_name} axis of {axis.axes.get_title()!r}", axis.get_tightbbox(renderer))
              for axis in axes_of if _drawn(axis)]
    return [(what, box) for what, box in named if box is not None]


def outside(fig: Figure, dpi: float) -> list[str]:
    """What of `fig`, drawn at `dpi`, runs past its canvas."""
    FigureCanvasAgg(fig)        # a Figure made without pyplot has a canvas that draws nothing
    fig.set_dpi(dpi)
    fig.draw_without_rendering()            # the layout and every extent, no pixels
    width, height = fig.canvas.get_width_height()
    return [f"{what} at {[round(v) for v in box.extents]} on {width} x {height} px"
            for what, box in _extents(fig)
            if box.x0 < -ROUNDING or box.y0 < -ROUNDING or box.x1 > width + ROUNDING or box.y1 > height + ROUNDING]


@pytest.fixture(scope="module")
def drawn(fit_dir) -> dict[str, Figure]:
    """The report's figures of the micro fit, and its `scaling.fit_figure`."""
    report = build_report(load_inputs(fit_dir))
    return {**report.figures, "fit_figure": fit_figure(load(fit_dir))}


def test_every_text_of_every_figure_lies_on_its_canvas_at_each_dpi(drawn):
    assert {"loss_curves", "final_loss", "isoflop", "residuals", "bootstrap", "frontiers"} <= set(drawn)
    cut = {f"{name} at {dpi} dpi": bad for name, fig in drawn.items() for dpi in DPIS if (bad := outside(fig, dpi))}
    assert cut == {}


def test_the_check_sees_a_title_past_the_canvas():
    fig = Figure(figsize=(2.0, 1.5), layout="constrained")
    fig.subplots().set_title("a title far wider than a figure two inches across")
    # Constrained layout cannot shrink a text wider than the figure: it runs past both edges.
    (bad,) = outside(fig, DPI)
    assert bad.startswith("'a title far wider")
