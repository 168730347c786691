"""The median of the forms (`scaling.laws.checks.combined`, `--form median`): its cuts, its interval
beyond the data, and the fit, plan and predict that use it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from scaling.cli import main
from scaling.errors import UsageError
from scaling.laws import analysis
from scaling.laws.checks import combined, cross_forms
from scaling.laws.checks import extrapolation as xp
from scaling.laws.checks.backtest import Cut
from scaling.laws.checks.backtest_text import pct
from scaling.laws.fitting import readers
from scaling.laws.results.fit_file import load_fit
from tests.laws.test_backtest import TRUTH, few_runs

BUDGETS = 1e17 * 2.0 ** np.arange(10)      # 10 budgets 2x apart: cuts at 3x, 10x and 30x all made


def _tied(n, d):
    """One of the forms the median combines (tied exponents) is the truth."""
    return 1.8 + 480.0 / n ** 0.35 + 2100.0 / d ** 0.35


def _sweep(truth, budgets=BUDGETS, seed=0, noise=0.004):
    """An IsoFLOP sweep of `truth`: 7 sizes a budget about its 20-tokens-per-parameter size."""
    rng = np.random.default_rng(seed)
    rows = [(n, c / (6 * n), c) for c in budgets for n in 0.09 * c ** 0.5 * np.geomspace(0.25, 4.0, 7)]
    n, d, c = (np.array(v) for v in zip(*rows))
    frame = pd.DataFrame({"N": n, "D": d, "loss": truth(n, d) * np.exp(noise * rng.standard_normal(n.size)),
                          "budget": c})
    return frame, readers.from_frame(frame, source="simulated", n_col="N", d_col="D", loss_col="loss",
                                     budget_col="budget")


@pytest.fixture(scope="module")
def fitted():
    _, data = _sweep(_tied)
    return data, analysis.fit_data(data, bootstrap=10, form="median")


def test_the_median_s_cut_is_the_geometric_median_of_the_forms_cut_predictions(fitted):
    # Each of its cuts predicts the same top runs as the members' cuts: per run, the geometric median of
    # the four members' predictions as each predicts beyond the data (its refit's own, moved by its bias),
    # i.e. the geometric mean of the middle two.
    _, fit = fitted
    median = fit.median
    assert median is not None and median.members == ("chinchilla", "tied", "kaplan", "farseer")
    assert [c.factor for c in median.cuts] == [3.0, 10.0, 30.0]
    entries = {e.name: e for e in fit.forms.entries}
    for cut in median.cuts:
        x = np.asarray(cut.distances)
        ratios = []                          # each member's predicted / observed, per run
        for name in median.members:
            own = next(c for c in entries[name].cuts if c.factor == cut.factor)
            assert own.n_test == cut.n_test and own.test_compute == cut.test_compute
            ratios.append((1 + np.asarray(own.raw_errors or own.errors)) * np.exp(entries[name].extrapolation.bias * x))
        middle = np.sort(np.array(ratios), axis=0)[1:3]
        assert np.allclose(1 + np.asarray(cut.errors), np.sqrt(middle[0] * middle[1]), rtol=1e-12)
    # Its rule is learned from those cuts by the Chinchilla fit's machinery, with no bias (the members'
    # are in their predictions): the growth about none, as a rule learned with its bias given as 0 says,
    # kept above the median's own floor (below the Chinchilla fit's: on this clean sweep it binds).
    rule = median.extrapolation
    assert rule.n_cuts == 3 and rule.bias == 0.0
    r = np.array([np.median(np.log1p(c.errors)) for c in median.cuts])
    x = np.array([np.median(c.distances) for c in median.cuts])
    spread = np.sqrt((np.sum(r ** 2 / x) + xp.PRIOR.growth ** 2) / 4)       # one fallback observation beside 3 cuts
    assert spread < combined.MEDIAN_FLOOR < xp.GROWTH_FLOOR
    assert rule.growth == pytest.approx(combined.MEDIAN_FLOOR * rule.calibration) and rule.growth < xp.GROWTH_FLOOR


def test_the_median_predicts_the_runs_beyond_its_data_inside_its_interval():
    # Fitted on the budgets up to a tenth of the top one, it predicts the top budget's runs (10x beyond):
    # its center the geometric median of the members' own predictions, the truth inside its interval,
    # and the interval widening with the distance as its rule says.
    frame, data = _sweep(_tied)
    below = frame[frame.budget <= BUDGETS[-1] / 10]
    sub = readers.from_frame(below, source="below", n_col="N", d_col="D", loss_col="loss", budget_col="budget")
    fit = analysis.fit_data(sub, bootstrap=10, form="median")
    top = frame[frame.budget == BUDGETS[-1]]
    n, d = top.N.to_numpy(), top.D.to_numpy()
    p = fit.predict(n, d)
    far = fit.beyond(n, d)
    members = [e.predict(n, d, far, level=0.95, noise=False)[0] for e in fit.forms.entries
               if e.name in fit.median.members]
    rule = fit.median.extrapolation
    assert np.allclose(p.loss, np.exp(np.median(np.log(members), axis=0)) * np.exp(rule.bias * far), rtol=1e-12)
    lo, hi = p.interval
    assert np.all((lo < _tied(n, d)) & (_tied(n, d) < hi)) and np.all((lo < top.loss) & (top.loss < hi))
    assert np.median(np.abs(p.loss / top.loss.to_numpy() - 1)) < 0.02
    half = np.log(hi / p.loss)
    z = norm.ppf(0.975)
    assert np.allclose(half, z * np.sqrt(rule.noise ** 2 + rule.growth ** 2 * far), rtol=1e-9)
    near, farther = fit.predict(n[0], d[0] / 10), fit.predict(n[0], d[0] * 10)
    assert near.interval[1] / near.loss < farther.interval[1] / farther.loss


def test_form_median_through_the_cli_plan_and_predict(tmp_path, capsys):
    # `scaling fit --form median`: the summary names the median as the law that predicts and plans (with
    # --verbose, its row among the forms); fit.json round-trips; plan over an array of budgets gives each
    # budget's own plan, its loss and loss interval the median's at its N and D; `scaling plan --fit` says so.
    frame, _ = _sweep(_tied, budgets=BUDGETS[:7])
    frame.to_csv(tmp_path / "pts.csv", index=False)
    out = tmp_path / "fit"
    assert main(["fit", "--csv", str(tmp_path / "pts.csv"), "--budget", "budget", "--form", "median",
                 "--bootstrap", "10", "--out", str(out), "--verbose"]) == 0
    printed = capsys.readouterr().out
    assert " *median " in printed and "form: median (--form): predict and plan use the geometric median" in printed
    fit = load_fit(out)
    assert fit.form == combined.NAME and fit.median is not None and fit.form_entry is None
    assert cross_forms.Forms.from_json(fit.forms.to_json()) == fit.forms
    top = float(frame.budget.max())
    budgets = np.array([[top / 10, top], [10 * top, 1000 * top]])
    plan = fit.plan(budgets)
    assert np.allclose(fit.law.flops.per_token(plan.n) * plan.d, budgets)
    center, lo, hi = fit.median.predict(fit.forms.entries, plan.n, plan.d, fit.beyond(plan.n, plan.d),
                                        floor=fit.backtest)
    assert np.array_equal(plan.loss, center)
    assert plan.intervals is not None and np.array_equal(plan.intervals.loss[0], lo)
    assert np.array_equal(plan.intervals.loss[1], hi) and np.all(lo < center) and np.all(center < hi)
    one = fit.plan(budgets[1, 1])
    assert (one.n, one.loss) == (plan.n[1, 1], plan.loss[1, 1])
    assert main(["plan", "--fit", str(out), "--compute", f"{10 * top:g}"]) == 0
    assert "median of the forms" in capsys.readouterr().out


def test_a_cut_combines_only_the_members_that_predicted_the_same_runs():
    # Three members' cuts on the same two runs, one on other runs: the median's errors are each run's
    # middle prediction of the three (each raw prediction moved by its member's bias at the run's distance).
    x = (0.5, 1.0)
    same = [Cut(10.0, 40, 2, 1e19, 1e20, errors=e, distances=x) for e in ((0.02, -0.01), (0.0, 0.03), (-0.04, 0.01))]
    other = Cut(10.0, 30, 2, 1e19, 2e20, errors=(0.5, 0.5), distances=x)
    biases = [0.0, -0.02, 0.01, 0.0]
    cut = combined.combined_cut([*same, other], biases)
    moved = np.array([(1 + np.array(c.errors)) * np.exp(b * np.array(x)) for c, b in zip(same, biases)])
    assert np.allclose(1 + np.array(cut.errors), np.median(moved, axis=0), rtol=1e-12)
    assert cut.n_train == 40 and cut.raw_errors == () and cut.covered is None
    assert combined.combined_cut([same[0], other], [0.0, 0.0]) is None       # no two members on the same runs


def test_where_the_fitted_form_s_bias_is_unknown_so_is_the_median_s(fitted):
    # The fitted form's rule with an unknown bias (its E far below the runs, `rule_beyond`): the median's
    # rule carries one too, as large as its own cuts' slopes say (`unknown_bias`) or the fitted form's, whichever
    # is larger, and its interval widens.
    _, fit = fitted
    assert fit.median.extrapolation.bias_sd == 0.0
    entries = [replace(e, extrapolation=replace(e.extrapolation, bias_sd=0.01)) if e.name == "chinchilla" else e
               for e in fit.forms.entries]
    unknown = combined.combine(entries)
    own = xp.unknown_bias(fit.median.extrapolation, fit.median.cuts)
    assert unknown.extrapolation == replace(own, bias_sd=max(own.bias_sd, 0.01)) and own.bias_sd > 0
    _, lo, hi = unknown.predict(entries, 1e10, 2e11, 1.5, floor=None)
    _, known_lo, known_hi = fit.median.predict(fit.forms.entries, 1e10, 2e11, 1.5, floor=None)
    assert hi - lo > known_hi - known_lo


def test_the_forms_table_shows_the_median_s_backtest_as_every_form_s_its_refits_own_errors(fitted):
    # Every form's row shows its refit's own median error at its farthest cut (before its bias correction);
    # the median's row the same kind: per run, the geometric median of its members' refits' own errors,
    # not its interval's cuts (those are moved by the members' biases, and read otherwise here).
    _, fit = fitted
    median, entries = fit.median, {e.name: e for e in fit.forms.entries}
    cuts = [next(c for c in entries[m].cuts if c.factor == 30.0) for m in median.members]
    own = np.array([1 + np.asarray(c.raw_errors or c.errors) for c in cuts])
    raw = np.median(np.abs(np.exp(np.median(np.log(own), axis=0)) - 1))
    moved = next(c for c in median.cuts if c.factor == 30.0).median_abs_error
    row = next(line for line in cross_forms.format_forms(fit.forms) if line[2:].startswith("median "))
    assert f"backtest {pct(raw)} at 30x" in row and pct(raw) != pct(moved)
    assert median.raw_cuts(fit.forms.entries)[-1].median_abs_error == pytest.approx(raw, rel=1e-12)
    for line, e in zip(cross_forms.format_forms(fit.forms)[1:], fit.forms.entries):
        cut = e.farthest
        assert f"backtest {pct(float(np.median(np.abs(cut.raw_errors or cut.errors))))} at 30x" in line



def test_the_median_s_interval_is_never_narrower_than_the_fitted_law_s_estimation_error():
    # OLMo's ladder in miniature (`few_runs`): 8 runs at 3 sizes of the Chinchilla-form truth, too few
    # for any cut, so the median's rule is the fallback's (2% at one decade, learned from cuts of 20-170
    # runs), and a model 7x larger 1.3-1.9 decades beyond. Five constants from 8 runs err far out by
    # more: the rule alone missed the truth at the farthest run; beyond the data the interval is at
    # least the backtest law's own estimation error at Student's t for its 3 degrees of freedom, as
    # the default's is (`extrapolation.at_least`), and holds the truth and the runs.
    data = few_runs(seed=1)
    fit = analysis.fit_data(data.take(np.arange(8)), bootstrap=10, seed=0, form="median")
    n, d, truth = data.n[8:], data.d[8:], TRUTH.loss(data.n[8:], data.d[8:])
    far, check, median = fit.beyond(n, d), fit.backtest, fit.median
    assert median.extrapolation.n_cuts == 0 and check.dof == 3 and np.all(far > 1.3)
    _, lo_alone, hi_alone = median.predict(fit.forms.entries, n, d, far, floor=None)
    assert not np.all((lo_alone < truth) & (truth < hi_alone))
    p = fit.predict(n, d)
    lo, hi = p.interval
    floor = np.hypot(norm.ppf(0.975) * median.extrapolation.noise, student_t.ppf(0.975, 3) * check.estimation_sd(n, d))
    assert np.all(np.log(hi_alone / lo_alone) / 2 < floor)
    assert np.allclose(np.log(hi / lo) / 2, floor, rtol=1e-9) and np.allclose(np.log(hi / p.loss), floor, rtol=1e-9)
    assert np.all((lo < truth) & (truth < hi)) and np.all((lo < data.loss[8:]) & (data.loss[8:] < hi))
    plan = fit.plan(fit.law.flops.per_token(n[2]) * d[2] * 3)     # plan's loss interval: the same floor
    _, plan_lo, plan_hi = median.predict(fit.forms.entries, plan.n, plan.d, fit.beyond(plan.n, plan.d), floor=check)
    assert plan.intervals.loss == (plan_lo, plan_hi) and plan_lo < plan.loss < plan_hi
    inside = fit.predict(data.n[0], data.d[0])        # inside the data: the runs' scatter, no floor
    assert inside.interval == pytest.approx(tuple(median.predict(fit.forms.entries, data.n[0], data.d[0], 0.0,
                                                                 floor=None)[1:]), rel=1e-12)


def test_the_default_predicts_by_the_median_and_the_verdict_reads_its_own_cuts(fitted):
    # With no form asked, a backtested fit predicts by the median of the forms; its cuts carry their
    # runs' intervals under its own rule, and the verdict's backtest check and the summary's backtest
    # line are the median's, the Chinchilla-form law's figures beside them.
    _, fit = fitted
    assert fit.form == combined.NAME and fit.median is not None
    rule = fit.median.extrapolation
    for cut in fit.median.cuts:
        half = norm.ppf(0.975) * np.sqrt(rule.noise ** 2 + rule.growth ** 2 * np.asarray(cut.distances))
        assert cut.covered == int(np.sum(np.abs(np.log1p(np.asarray(cut.errors))) <= half))
        assert np.allclose(cut.half_widths, np.sinh(half), rtol=1e-12)
    far, own = fit.median.cuts[-1], fit.backtest.farthest
    check = next(c for c in fit.diagnostics.checks if c.name == "backtest")
    assert check.value == far.median_abs_error != own.median_abs_error
    assert check.reason.startswith(f"the median of the forms tested {far.factor:g}x beyond its fitted compute: "
                                   f"median error {pct(far.median_abs_error)} over {len(far.errors)} runs, "
                                   f"{far.covered} of them inside")
    assert check.reason.endswith(f"the chinchilla form's law alone, {own.factor:g}x: median error "
                                 f"{pct(own.median_abs_error)}, {own.covered} of {len(own.errors)} inside")
    lines = fit.summary(verbose=True).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("backtest"))
    assert lines[first].startswith("backtest of the median of the forms (which predicts): predicts runs 30x")
    assert lines[first + 1].startswith("backtest of the chinchilla form's law (the constants and allocation above)")
    assert fit.median_backtest.farthest == far and "the median of the forms tested 30x" in fit.summary(verbose=True)


def test_what_a_fit_predicts_by_when_no_form_is_asked():
    # The fitted law alone, with no other form fitted (forms=True fits them beside it as cross-checks);
    # the median of the forms only when asked, and then only with its members' backtests.
    data = few_runs(seed=0).take(np.arange(8))
    alone = analysis.fit_data(data, bootstrap=0)
    assert alone.form == "chinchilla" and alone.forms is None and alone.median is None
    assert alone.predict(1e9, 2e10).law == alone.plan(1e20).law == "the chinchilla form's law"
    beside = analysis.fit_data(data, bootstrap=0, forms=True)
    assert beside.form == "chinchilla" and beside.forms is not None and beside.median is None
    assert beside.predict(1e9, 2e10).loss == alone.predict(1e9, 2e10).loss
    median = analysis.fit_data(data, bootstrap=0, form="median")
    assert median.median is not None and median.predict(1e9, 2e10).law.startswith("the median of the forms (")
    assert median.predict(1e9, 2e10).loss != alone.predict(1e9, 2e10).loss
    with pytest.raises(UsageError, match="needs the backtest"):
        analysis.fit_data(data, bootstrap=0, backtest=False, form="median")


def test_the_median_plans_by_its_own_optimum(fitted):
    # One surface predicts and plans: along each compute curve no N has a lower median prediction than
    # the plan's, and predict at the plan's N and D is the plan's loss.
    _, fit = fitted
    for compute in np.geomspace(1e18, 1e24, 7):
        p = fit.plan(compute)
        assert fit.predict(p.n, p.d).loss == pytest.approx(p.loss, rel=1e-12)
        n = p.n * np.geomspace(0.2, 5.0, 101)
        assert np.all(fit.expected_loss(n, fit.law.flops.tokens(compute, n)) >= p.loss * (1 - 1e-9))


def test_the_median_is_refused_where_fewer_than_two_forms_were_fitted(fitted):
    # Asked for by name where fewer than two forms could be fitted, the median is refused (one line,
    # naming --form): there is no surface to predict or plan by.
    _, fit = fitted
    with pytest.raises(UsageError, match="the median of the forms needs at least two forms"):
        analysis._check_chosen(replace(fit.forms, combined=None), combined.NAME, None)
