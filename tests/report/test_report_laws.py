"""What the report draws of the law beyond its data: the forms side by side (their predictions along
compute with their intervals, each form's backtest and residual RMS), the backtest's cuts, and the
hold-out refit at a fraction asked for, which carries the fit's prior on E."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scaling.laws import analysis
from scaling.laws.checks import backtest as bt
from scaling.laws.checks.backtest_text import summary_line
from scaling.laws.checks.cross_forms import forms_check
from scaling.laws.checks.holdout import pct
from scaling.laws.design.simulate import isoflop_grid, simulate
from scaling.laws.forms.form import optimum
from scaling.laws.forms.law import Law
from scaling.laws.optimal import allocation
from scaling.laws.results import fit_file
from scaling.report.beyond import backtest_section, forms_along, forms_section
from scaling.report.beyond_figures import HIT, interval_errors
from scaling.report.decisions import plan
from scaling.report.inputs import Inputs
from scaling.report.page import Report
from scaling.report.plot import fit_figure
from scaling.report.prose import PLAN_FACTORS
from scaling.report.report import build_report

TRUTH = Law(E=1.9, A=400.0, B=1500.0, alpha=0.33, beta=0.30)
BUDGETS = 1e17 * 2.0 ** np.arange(6)


def sweep(seed=0, noise=0.01):
    data = simulate(TRUTH, isoflop_grid(BUDGETS, tokens_per_param=20.0, per_budget=6, span=6.0), noise=noise,
                    seed=seed)
    return replace(data, budgets=np.repeat(BUDGETS, 6))


def test_holdout_refit_at_another_fraction_carries_the_fits_prior_on_E():
    # A strong prior on E far from the runs' own E: the fit's E is the prior's, and so is the E of the
    # report's hold-out refit at a fraction other than the fit's; without the prior it is the runs'.
    data = sweep()
    fit = analysis.fit_data(data, bootstrap=0, backtest=False, forms=False, E_prior=(1.7, 0.002),
                            grid=bt.COARSE_GRID)
    assert fit.law.E == pytest.approx(1.7, abs=0.01)
    check = Report.start(Inputs("sim", fit, data), holdout_fraction=0.3).holdout
    assert check is not None and check is not fit.holdout and check.fraction == 0.3
    assert check.law.E == pytest.approx(1.7, abs=0.01)
    free = Report.start(Inputs("sim", replace(fit, options=replace(fit.options, E_prior=None)), data),
                        holdout_fraction=0.3).holdout
    assert abs(free.law.E - 1.7) > 0.05


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """A fit of a simulated IsoFLOP sweep with its forms (`forms=True`: a fit no longer fits them by
    default) and backtest, predicting by the fitted law (the default), and the same fit read back from
    its fit.json (the fitted form's resamples then come from fit.bootstrap.csv)."""
    data = sweep(noise=0.008)
    fit = analysis.fit_data(data, bootstrap=40, forms=True)
    path = fit_file.write_fit(tmp_path_factory.mktemp("fit"), fit)
    return data, fit, fit_file.load_fit(path)


def test_each_forms_curve_passes_through_its_prediction_at_the_target_compute(simulated):
    # The figure's curves are each form's prediction (center and interval) for the headline's optimal
    # run along compute; at the target compute they are the forms table's numbers, in memory and from
    # fit.json alike: the same resamples (the fitted form's: the fit's bootstrap) and the same seed.
    _, made, read = simulated
    target = made.forms.target_compute
    grid = np.array([target / 30, target, 30 * target])
    for fit in (made, read):
        curves = forms_along(fit, grid)
        fitted = [e for e in fit.forms.entries if e.params is not None]
        assert [c.name for c in curves] == [e.name for e in fitted] + ["median"] and len(curves) == 6
        p = fit.forms.combined.prediction        # the median of the forms, from the same members
        assert (curves[-1].loss[1], curves[-1].lo[1], curves[-1].hi[1]) == pytest.approx((p["loss"], p["lo"], p["hi"]),
                                                                                         rel=1e-12)
        # its backtest as every form's: its members' refits' own errors (their geometric median per run)
        raw = fit.forms.combined.raw_cuts(fit.forms.entries)
        assert curves[-1].backtest == tuple((k.factor, k.median_abs_error) for k in raw) and raw
        for c, e in zip(curves, fitted):
            p = e.prediction
            assert (c.loss[1], c.lo[1], c.hi[1]) == pytest.approx((p["loss"], p["lo"], p["hi"]), rel=1e-12), e.name
            assert c.lo[2] < c.loss[2] < c.hi[2] and c.hi[2] - c.lo[2] > c.hi[1] - c.lo[1]   # wider further out
            assert c.backtest == tuple((k.factor, k.median_abs_error) for k in e.cuts if k.made and k.errors)
    # The target run is the headline (the Chinchilla form)'s optimum; the median's curve there is the
    # loss the fit predicts when the median of the forms predicts (`--form median`).
    head = made.forms.entry("chinchilla")
    n, d = (float(v) for v in optimum(head.law, float(grid[2]))[:2])
    by_median = replace(made, form="median")
    assert forms_along(made, grid)[-1].loss[2] == pytest.approx(float(by_median.expected_loss(n, d)), rel=1e-12)


def test_the_report_sets_the_forms_side_by_side_and_draws_the_backtest(simulated):
    data, _, fit = simulated
    r = build_report(Inputs("sim", fit, data))
    md = r.doc.markdown()
    section = md[md.index("## The law's forms side by side"):md.index("## ", md.index("## The law's forms") + 3)]
    for e in fit.forms.entries:
        p = e.prediction
        row = next(line for line in section.splitlines() if line.startswith(f"| {e.name} ")
                   or line.startswith(f"| **{e.name}**"))
        assert f"{p['loss']:.4f} [{p['lo']:.4f}, {p['hi']:.4f}]" in row and f"| {e.residual_rms:.3g} |" in row
        assert f"at {e.farthest.factor:g}x" in row
    m = fit.forms.combined.prediction             # the median of the forms as a row of its own
    row = next(line for line in section.splitlines() if line.startswith(("| median ", "| **median**")))
    assert f"{m['loss']:.4f} [{m['lo']:.4f}, {m['hi']:.4f}]" in row and "geometric median of chinchilla" in row
    cut = fit.forms.combined.raw_cuts(fit.forms.entries)[-1]      # the same kind of error as the rows above
    assert f"{pct(cut.median_abs_error)} at {cut.factor:g}x" in row
    agree = forms_check(fit.forms)
    assert ("**They agree**" in section) == (agree.status == "pass" and agree.value is not None)
    assert agree.reason in section
    # The figure draws each form's curve along compute through the table's numbers at the target.
    forms_axis = r.figures["forms"].axes[0]
    drawn = {line.get_label().split(":")[0].split(" (")[0]: line for line in forms_axis.get_lines()}
    for e in fit.forms.entries:
        x, y = drawn[e.name].get_data()
        at = int(np.argmin(np.abs(np.log(x / fit.forms.target_compute))))
        assert x[at] == pytest.approx(fit.forms.target_compute) and y[at] == pytest.approx(e.prediction["loss"])
    # The backtest: its table and, for every predicted run, its error and interval, dark where the observed
    # loss lies inside: as many as the backtest counted inside.
    assert "## Backtest" in md and "backtest" in r.figures
    # The fitted law predicts (the default): the section gives its cuts, and no median's.
    section = md[md.index("## Backtest"):].split("\n## ")[0]
    assert fit.median_backtest is None and summary_line(fit.backtest) in section
    assert "by the median of the forms" not in section
    # Where the median of the forms predicts (--form median), the section gives its own cuts first, what
    # the verdict judges, then the Chinchilla-form law's, which the figure draws.
    by_median = Report.start(Inputs("sim", replace(fit, form="median"), data))
    backtest_section(by_median)
    section = by_median.doc.markdown()
    assert summary_line(by_median.fit.median_backtest) in section and summary_line(fit.backtest) in section
    assert section.index("by the median of the forms") < section.index("form's law (the constants")
    for cut in fit.backtest.made:
        lo, hi = interval_errors(cut.errors, cut.half_widths)
        assert int(np.sum((lo <= 0) & (hi >= 0))) == cut.covered, cut.factor
        assert np.all(lo < np.asarray(cut.errors)) and np.all(np.asarray(cut.errors) < hi)
    points = [c for c in r.figures["backtest"].axes[0].containers]
    assert sum(len(c.lines[0].get_xdata()) for c in points) == sum(len(c.errors) for c in fit.backtest.made)
    dark = sum(len(c.lines[0].get_xdata()) for c in points if c.lines[0].get_color() == HIT)
    assert dark == sum(c.covered for c in fit.backtest.made)


def test_the_forms_sentence_says_when_they_disagree(simulated):
    # One form's prediction moved outside the fitted form's interval: the sentence says they disagree,
    # names it and quotes the verdict's caution.
    data, _, fit = simulated
    entries = []
    for e in fit.forms.entries:
        if e.name == "tied":
            hi = fit.forms.entry("chinchilla").prediction["hi"]
            e = replace(e, prediction={"loss": 1.2 * hi, "lo": 1.1 * hi, "hi": 1.3 * hi})
        entries.append(e)
    moved = replace(fit, forms=replace(fit.forms, entries=tuple(entries)))
    r = Report.start(Inputs("sim", moved, data))
    forms_section(r)
    md = r.doc.markdown()
    assert "**They disagree beyond their intervals** (the verdict's `forms_agree` caution)" in md and "tied" in md


@pytest.mark.parametrize("form", ["chinchilla", "tied", "median"])
def test_the_reports_plan_is_the_fits_plan(simulated, form):
    # The plan table at 1x, 3x, 10x and 30x the largest run's compute is `LawFit.plan`'s, as `scaling
    # plan --fit` prints it: the loss as the fit predicts it (beyond the data, its backtest's), inside its
    # interval; for a form chosen by --form, that form's optimum and intervals.
    data, _, fit = simulated
    fit = replace(fit, form=form)
    r = Report.start(Inputs("sim", fit, data))
    top = float(data.compute.max())
    assert r.budgets == pytest.approx([f * top for f in PLAN_FACTORS])
    plan(r)
    rows = [line.split(" | ") for line in r.doc.markdown().splitlines() if "| law optimum |" in line]
    assert [row[0].lstrip("| ") for row in rows] == ["at the largest run", "3x beyond", "10x beyond", "30x beyond"]
    for c, row in zip(r.budgets, rows):
        best = fit.plan(c)
        lo, hi = best.intervals.loss
        assert row[3].startswith(f"{best.n:.4g} [") and row[-1].rstrip(" |") == f"{best.loss:.4f} [{lo:.4f}, {hi:.4f}]"
        assert lo < best.loss < hi
    assert ("the tied form's" in r.doc.markdown()) == (form == "tied")
    if form == "median":
        # The median plans by its own optimum: the numeric argmin of its prediction along the compute
        # curve (no longer the fitted form's allocation), which it names; no run beside it on the curve
        # is predicted lower.
        assert best.law.startswith("the median of the forms")
        assert fit.predict(best.n, best.d).loss == pytest.approx(best.loss, rel=1e-12)
        for step in (0.97, 1.03):
            n = best.n * step
            assert fit.expected_loss(n, fit.law.flops.tokens(r.budgets[-1], n)) >= best.loss * (1 - 1e-9)


def test_the_reports_plan_footnote_quotes_the_scatter_of_the_law_that_gives_the_interval(simulated):
    # The loss's interval is the median of the forms' (the default), or inside the runs the fitted law's
    # and beyond them the backtest's law's: the residual RMS quoted beside it is that law's.
    data, _, fit = simulated
    notes = {}
    for form in ("median", "chinchilla"):
        r = Report.start(Inputs("sim", replace(fit, form=form), data))
        plan(r)
        notes[form] = r.doc.markdown()
    assert f"residual RMS {fit.forms.combined.extrapolation.noise:.3g}" in notes["median"]
    assert f"residual RMS {fit.residual_rms:.3g}) at the largest run" in notes["chinchilla"]
    assert f"backtest's law (residual RMS {fit.backtest.extrapolation.noise:.3g})" in notes["chinchilla"]


def _axis(fig, title):
    return next(ax for ax in fig.axes if ax.get_title().startswith(title))


@pytest.mark.parametrize("form", ["chinchilla", "kaplan", "median"])
def test_the_reports_figures_draw_the_law_the_fit_plans_with(simulated, form):
    # Under --form kaplan the plan is the Kaplan form's: the IsoFLOP figure's optima are the plan's N at
    # each budget, the frontier is that form's optimum, the residuals are of its law, and each caption
    # says which law it draws; so for the fitted law (the default), whose captions say nothing of it.
    # The median of the forms has no one law: its figures draw the Chinchilla form's and say why (its
    # plan is now its own argmin along the compute curve, so the stars are that law's optima, not the plan's).
    data, _, fit = simulated
    fit = replace(fit, form=form)
    r = build_report(Inputs("sim", fit, data))
    law = fit.forms.entry("kaplan").law if form == "kaplan" else fit.law
    stars = next(c for c in _axis(r.figures["isoflop"], "Compute-optimal").collections
                 if c.get_label() == "law's optimum at each budget").get_offsets()
    for c, n in stars:
        assert n == pytest.approx(float(law.n_opt(c) if form == "median" else fit.plan(c).n), rel=1e-9)
    frontier = next(line for line in _axis(r.figures["frontiers"], "Iso-loss").get_lines()
                    if line.get_label() == "your fit, extrapolated")
    x, y = frontier.get_data()
    for k in (0, len(x) // 2, len(x) - 1):
        assert y[k] == pytest.approx(optimum(law, x[k])[0], rel=1e-9)
    resid = np.asarray(_axis(r.figures["residuals"], "Residuals against compute").collections[-1].get_offsets())[:, 1]
    assert resid == pytest.approx(np.log(data.loss) - np.log(law.loss(data.n, data.d)), abs=1e-12)
    if form == "kaplan":         # the check can fail: the Kaplan form's residuals are not the Chinchilla form's
        assert np.max(np.abs(resid - (np.log(data.loss) - np.log(fit.law.loss(data.n, data.d))))) > 1e-3
    md = r.doc.markdown()
    assert ("The law drawn is the kaplan form's" in md) == (form == "kaplan")
    assert ("has no one law of its own" in md) == (form == "median")
    assert ("It is the Chinchilla-form fit's" in md) == (form != "chinchilla")
    assert ("the plan and the figures of the law are the kaplan form's" in md) == (form == "kaplan")
    assert ("Predictions, plans and their intervals are the median of the forms'" in md) == (form == "median")


def _iso_legends(fig) -> list[str]:
    """The labels of the fit figure's IsoFLOP legends (the profiles', below both panels; the optimal
    sizes'), a note's lines joined."""
    sizes = _axis(fig, "Compute-optimal")
    legends = [*sizes.get_figure(root=False).legends, sizes.get_legend()]
    return [" ".join(t.get_text().split()) for legend in legends for t in legend.get_texts()]


@pytest.mark.parametrize("form", ["chinchilla", "kaplan", "median"])
def test_the_fit_figure_draws_the_intervals_of_the_law_it_draws(simulated, form):
    # The fit figure under --form kaplan draws the Kaplan form's law, so its band of N_opt is that form's
    # plan over its own resamples (not the Chinchilla-form bootstrap's, which differs), and its legends
    # name the form drawn, never "Approach 3" (the Chinchilla-form fit's). The band is always the plan's:
    # the fitted law's (the default) is its bootstrap's inside the data (beyond it the plan is the
    # backtest's law's); the median's is its own argmin's, with the median's loss interval named so.
    fit = replace(simulated[2], form=form)
    sizes = _axis(fig := fit_figure(fit), "Compute-optimal")
    (band,) = [c for c in sizes.collections if c.get_label().endswith("N_opt, 95% interval (bootstrap)")]
    x, y = band.get_paths()[0].vertices.T
    some = np.flatnonzero((x > x.min()) & (x < x.max()))[::15]     # not the corners that close the polygon
    lo, hi = fit.plan(x[some]).intervals.n
    assert np.all(np.isclose(y[some], lo, rtol=1e-9) | np.isclose(y[some], hi, rtol=1e-9)) and len(some) >= 6
    inside = x[some] <= fit.data.c_range[1]
    own = allocation.optimum_intervals(fit.law, fit.resampled, x[some][inside], level=0.95,
                                       widen=fit.ci.widened_by).n
    assert np.allclose(lo[inside], own[0], rtol=1e-9) == (form == "chinchilla") and inside.sum() >= 4
    labels = _iso_legends(fig)
    name = {"kaplan": "kaplan form's", "median": "median of the forms'"}.get(form, "law's")
    assert f"{name} loss at each optimum, 95% interval" in labels
    assert any("Approach 3" in label for label in labels) == (form != "kaplan")
    assert ("kaplan form, a = " in " ".join(labels)) == (form == "kaplan")


def test_the_fit_figure_draws_no_interval_of_a_law_it_does_not_draw(simulated):
    # The form --form chose could not be fitted: the figure draws the Chinchilla form's law (as the
    # report does), with no band nor loss bars, and says why; without resamples, none either.
    fit = replace(simulated[2], form="kaplan")
    failed = replace(fit, forms=replace(fit.forms, entries=tuple(
        replace(e, params=None, reason="no convergence") if e.name == "kaplan" else e for e in fit.forms.entries)))
    bare = replace(fit, forms=replace(fit.forms, entries=tuple(
        replace(e, samples=()) if e.name == "kaplan" else e for e in fit.forms.entries)))
    for unsure, why in ((failed, "the kaplan form chosen by --form could not be fitted; the law drawn is the "
                                 "Chinchilla form's"), (bare, "the kaplan form has no bootstrap resamples")):
        fig = fit_figure(unsure)
        sizes, profiles = _axis(fig, "Compute-optimal"), _axis(fig, "IsoFLOP profiles")
        assert not [c for c in sizes.collections if "interval" in c.get_label()] and not profiles.containers
        assert any(why in label for label in _iso_legends(fig))
