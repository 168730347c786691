"""A fit drawn on one figure, for a notebook: `LawFit.plot()` (and `scaling.fit_figure(fit)`).

    fig = scaling.fit("chinchilla", drop_highest_loss=5).plot()    # Jupyter shows it
    fig = scaling.load("fits/tiny").plot()                         # the points from fit.points.csv
    fig.savefig("fit.png")

Top: the final loss against N at each D and against D at each N, with the law (the report's
`figures.final_loss`). Bottom: the IsoFLOP profiles of Approach 2 with the law along each
budget, each of its optima with the 95% interval of the loss it predicts there, and N_opt
against C with its 95% interval as a band (`LawFit.plan` over the budgets, from the bootstrap).
The panels are the report's own, so a figure here and in the report agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes

from scaling.errors import UsageError
from scaling.laws import analysis
from scaling.report.drawn import drawn_law, equation
from scaling.report.figures import final_loss_panels, isoflop_panels
from scaling.report.style import DPI, ShownFigure, SizeColours, with_rc

if TYPE_CHECKING:   # LawFit.plot imports this module: a run-time import back would be a cycle
    from scaling.laws.results.lawfit import LawFit

BAND = "#1f77b4"


@with_rc
def fit_figure(fit: LawFit) -> ShownFigure:
    """The fit's points, law, IsoFLOP profiles and intervals (see the module doc); UsageError for
    a fit without its points (a fit.json with no fit.points.csv beside it)."""
    points = fit.points
    if points is None:
        raise UsageError("this fit has no points to draw: its fit.json has no fit.points.csv beside it "
                         "(written by an older scaling); refit it with `scaling fit` or scaling.fit")
    n_label = f"{points.param_convention.replace('_', '-')} parameters" if points.param_convention else "parameters"
    fig = ShownFigure(figsize=(13.0, 10.8), layout="constrained", dpi=DPI)
    rows = fig.add_gridspec(2, 1, height_ratios=(4.8, 6.0))
    top, bottom = fig.add_subfigure(rows[0]), fig.add_subfigure(rows[1])
    law = drawn_law(fit)            # the law predict and plan use: the form --form chose, else fit.law
    final_loss_panels(top, top.subplots(1, 2), points.n, points.d, points.loss, law, SizeColours(points.n),
                      title=equation(fit), n_label=n_label)
    iso = analysis.isoflop_of(points)
    profiles, sizes = bottom.subplots(1, 2, gridspec_kw={"width_ratios": [1.4, 1]})
    isoflop_panels(bottom, (profiles, sizes), iso, points.n, points.loss, law,
                   data_c_range=(float(points.compute.min()), float(points.compute.max())), n_label=n_label)
    if fit.resampled is not None and law.has_optimum:
        _intervals(profiles, sizes, fit, [b.compute for b in iso.budgets])
    source = (fit.data.source or "").split(":")[0]      # "chinchilla: Hoffmann et al. ...": its name
    fig.suptitle(f"{source}: {len(points)} points; verdict {fit.verdict or 'none recorded'}", fontsize=11)
    return fig


def _intervals(profiles: Axes, sizes: Axes, fit: LawFit, budgets: list) -> None:
    """N_opt's interval as a band over the compute axis, and the loss interval of each of the law's
    optima drawn on the profiles: one broadcast `plan` each."""
    left, right = sizes.get_xlim()
    grid = np.geomspace(left, right, 60)
    band = fit.plan(grid).intervals
    if band is not None and np.isfinite(band.n[0]).all():
        level = f"{100 * band.level:g}%"
        sizes.fill_between(grid, band.n[0], band.n[1], color=BAND, alpha=0.15, lw=0,
                           label=f"law's N_opt, {level} interval (bootstrap)")
        sizes.legend(loc="upper left", frameon=True, framealpha=0.85)
    if not budgets:
        return
    at = fit.plan(np.asarray(budgets, dtype=float))
    if at.intervals is None:
        return
    n, loss, (lo, hi) = np.asarray(at.n), np.asarray(at.loss), at.intervals.loss
    inside = (n >= profiles.get_xlim()[0]) & (n <= profiles.get_xlim()[1])
    profiles.errorbar(n[inside], loss[inside], yerr=[(loss - lo)[inside], (hi - loss)[inside]],
                      fmt="none", ecolor="black", elinewidth=0.8, capsize=3, zorder=4)
