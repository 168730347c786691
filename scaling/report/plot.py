"""A fit drawn on one figure, for a notebook: `scaling.fit_figure(fit)`.

    fig = scaling.fit_figure(scaling.fit("chinchilla", drop_highest_loss=5))   # Jupyter shows it
    fig = scaling.fit_figure(scaling.load("fits/tiny"))            # the points from fit.points.csv
    fig.savefig("fit.png")

Top: the final loss against N at each D and against D at each N, with the law (the report's
`figures.final_loss`). Bottom: the IsoFLOP profiles of Approach 2 with the law along each
budget, each of its optima with the 95% interval of the loss predicted there, and N_opt
against C with its 95% interval as a band (`LawFit.plan` over the budgets, from the bootstrap).
The panels are the report's own, so a figure here and in the report agree.

The law drawn is the one the fit plans with (`scaling.report.drawn`): under `--form kaplan` the
Kaplan form's, its intervals from its own resamples, and the legends name it. Intervals are drawn
only where they are that law's plan: where the form `--form` chose could not be fitted (the
Chinchilla form's law drawn instead), or has no resamples, the legend says why there are none
rather than show one law's band about another's curve. Under `--form median` the allocation (and
its band) is the fitted form's and the loss interval the median of the forms', said so.
"""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import SubFigure
from matplotlib.lines import Line2D

from scaling.errors import UsageError
from scaling.laws import analysis
from scaling.laws.forms.law import Law
from scaling.laws.optimal.allocation import check_allocatable
from scaling.report.drawn import drawn_law, drawn_name, equation
from scaling.report.figures import final_loss_panels, isoflop_panels, profile_legend
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
    law, name = drawn_law(fit), drawn_name(fit)     # the law predict and plan use: the form --form chose, else fit.law
    if isinstance(law, Law):        # its optimum is drawn on each IsoFLOP profile: refused as plan refuses it
        _check_drawable(law)
    final_loss_panels(top, top.subplots(1, 2), points.n, points.d, points.loss, law, SizeColours(points.n),
                      title=equation(fit), n_label=n_label)
    iso = analysis.isoflop_of(points)
    profiles, sizes = bottom.subplots(1, 2, gridspec_kw={"width_ratios": [1.4, 1]})
    keys = isoflop_panels(bottom, (profiles, sizes), iso, points.n, points.loss, law, law_name=name,
                          data_c_range=(float(points.compute.min()), float(points.compute.max())), n_label=n_label)
    if (why := _no_intervals(fit)) is None:
        why = _intervals((profiles, sizes), fit, [b.compute for b in iso.budgets], name, (bottom, keys))
    if why is not None:
        handles, _ = sizes.get_legend_handles_labels()
        note = textwrap.fill(f"(no intervals: {why})", 44)
        sizes.legend(handles=[*handles, Line2D([], [], ls="none", label=note)], loc="upper left", frameon=True,
                     framealpha=0.85)
    source = (fit.data.source or "").split(":")[0]      # "chinchilla: Hoffmann et al. ...": its name
    fig.suptitle(f"{source}: {len(points)} points; verdict {fit.verdict or 'none recorded'}", fontsize=11)
    return fig


def _check_drawable(law: Law) -> None:
    """UsageError where the law has no optimum to draw: no allocation, or its G past a float (A / B
    of 1e300: a Python float's power raises rather than giving inf)."""
    check_allocatable(law, "fitted")
    try:
        math.isfinite(law.G)
    except OverflowError:
        raise UsageError(f"the fitted law's allocation G overflows a float (A {law.A:.3g}, B {law.B:.3g}): it has no "
                         "optimum to draw") from None


def _no_intervals(fit: LawFit) -> str | None:
    """Why the figure can draw no interval of the law it draws, where it cannot plan by that law."""
    entry = fit.form_entry
    if entry is not None and entry.params is None:
        return f"the {entry.name} form chosen by --form could not be fitted; the law drawn is the Chinchilla form's"
    if entry is not None and not entry.law.has_optimum:
        return f"the {entry.name} form chosen by --form has no optimum; the law drawn is the Chinchilla form's"
    if not drawn_law(fit).has_optimum:
        return "the law has no optimum"
    return None


def _intervals(panels: tuple[Axes, Axes], fit: LawFit, budgets: list, name: str | None,
               legend: tuple[SubFigure, list]) -> str | None:
    """N_opt's interval as a band over the compute axis of the sizes panel, and the loss interval of each
    of the law's optima drawn on the profiles panel, added to the profiles' legend (`legend`: its
    subfigure and keys so far): one broadcast `plan` each, the law drawn's (`fit.plan` is the form
    `--form` chose, from its own resamples); why one is not drawn, where one is not."""
    profiles, sizes = panels
    left, right = sizes.get_xlim()
    grid = np.geomspace(left, right, 60)
    band = fit.plan(grid).intervals
    whose = f"{name}'s" if name else "law's"
    if band is None:
        return f"the {name or 'law'} has no bootstrap resamples in this fit"
    level, why = f"{100 * band.level:g}%", None
    if np.isfinite(band.n[0]).all():
        sizes.fill_between(grid, band.n[0], band.n[1], color=BAND, alpha=0.15, lw=0,
                           label=f"{whose} N_opt, {level} interval (bootstrap)")
        sizes.legend(loc="upper left", frameon=True, framealpha=0.85)
    else:
        why = f"{band.n_undefined} of the {whose} {band.n_resamples} resamples have no optimum"
    at = fit.plan(np.asarray(budgets, dtype=float)) if budgets else None
    if at is None or at.intervals is None:
        return why
    n, loss, (lo, hi) = np.asarray(at.n), np.asarray(at.loss), at.intervals.loss
    inside = (n >= profiles.get_xlim()[0]) & (n <= profiles.get_xlim()[1])
    # Under --form median the loss predicted (and its interval) is the median of the forms', not the
    # drawn law's own optimal loss: the bar's centre is marked, so it is not read as the star's.
    whose = "median of the forms'" if fit.median is not None else whose
    # A percentile interval can lie beside its centre, not around it (resamples skewed to one side;
    # a fit of one resample, when one was taken): a bar then reaches the centre on that side
    # (matplotlib refuses a negative error).
    below, above = np.maximum(loss - lo, 0.0), np.maximum(hi - loss, 0.0)
    bars = profiles.errorbar(n[inside], loss[inside], yerr=[below[inside], above[inside]], fmt="_",
                             color="black", ms=8, elinewidth=0.8, capsize=3, zorder=4,
                             label=f"{whose} loss at each optimum, {level} interval")
    profile_legend(legend[0], [*legend[1], bars])
    return why
