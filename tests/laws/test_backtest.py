"""The leave-future-out backtest: its cuts, the rule it learns, and predictions beyond the data."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from scaling.laws.checks import backtest as bt
from scaling.laws.checks import backtest_verdict
from scaling.laws.checks import extrapolation as xp
from scaling.laws.design.simulate import isoflop_grid, simulate
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.objective import theta_from_law
from scaling.laws.forms.law import Law

TRUTH = Law(E=1.9, A=400.0, B=1500.0, alpha=0.33, beta=0.30)
BUDGETS = 1e17 * 2.0 ** np.arange(7)        # 1e17 to 6.4e18: the top is 64x the smallest


def sweep(law=TRUTH, seed=0, noise=0.005):
    """An IsoFLOP sweep of 7 budgets x 6 sizes about 20 tokens per parameter, its budgets recorded."""
    runs = isoflop_grid(BUDGETS, tokens_per_param=20.0, per_budget=6, span=6.0)   # 0.6 to 720 tokens/param
    data = simulate(law, runs, noise=noise, seed=seed)
    return replace(data, budgets=np.repeat(BUDGETS, 6))


def test_future_split_cuts_by_budget_and_by_compute():
    budgets = np.array([1.0, 1.0, 3.0, 3.0, 10.0, 10.0, 30.0, 30.0])
    train, test, top = bt.future_split(budgets, budgets, 10.0)
    assert top == 30.0 and list(test) == [6, 7] and list(train) == [0, 1, 2, 3]
    # Without budgets: the top band is the runs within 2x of the third-largest compute.
    compute = np.array([1.0, 2.0, 5.0, 9.0, 10.0, 12.0, 100.0])
    train, test, top = bt.future_split(compute, None, 2.0)
    assert list(test) == [2, 3, 4, 5, 6] and top == 5.0 and list(train) == [0, 1]


def test_the_rule_widens_with_distance_and_falls_back_to_the_prior():
    rule = xp.learn_extrapolation(())                       # no cut: the fallback alone
    assert (rule.growth, rule.bias, rule.n_cuts) == (xp.PRIOR.growth, xp.PRIOR.bias, 0)
    rule = replace(rule, noise=0.01)
    widths = [np.log(hi / lo) / 2 for _, lo, hi in (rule.widen(3.0, x) for x in (0.0, 0.5, 1.0, 1.5))]
    assert widths[0] == pytest.approx(1.959964 * 0.01, rel=1e-5) and np.all(np.diff(widths) > 0)
    center, _, _ = rule.widen(3.0, 1.0)
    assert center == pytest.approx(3.0 * math.exp(xp.PRIOR.bias))


def test_backtest_of_a_well_specified_sweep_predicts_within_its_scatter():
    data = sweep()
    full = fitting.fit_law(data.n, data.d, data.loss)
    check = bt.backtest(data, full)
    made = {c.factor: c for c in check.made}
    top_trained = int(np.sum((data.budgets == BUDGETS[-1]) & (data.d / data.n >= bt.UNDERTRAINED_TPP)))
    assert set(made) == {2.0, 3.0, 10.0, 30.0} and all(c.n_test == len(c.errors) == top_trained for c in made.values())
    # 12 runs below the 10x cut: the refit itself errs by 1-4% there; the fallback's bias (the public
    # tables' pessimism, which a well-specified sweep does not share) moves it a little further.
    assert made[3.0].median_abs_error < 0.03 and made[10.0].median_abs_error < 0.06
    assert np.median(np.abs(made[10.0].raw_errors)) < 0.04 and check.farthest.factor == 30.0
    assert all(c.covered is not None and 0 <= c.covered <= c.n_test for c in made.values())
    assert bt.Backtest.from_json(check.to_json()) == check        # fit.json keeps it whole
    assert "predicts runs 30x beyond its fitted compute" in bt.summary_line(check)


def test_a_sweep_too_small_to_cut_says_so():
    data = sweep()
    data = data.take(np.flatnonzero(data.budgets >= BUDGETS[-3]))     # 3 budgets, 4x range
    check = bt.backtest(data, fitting.fit_law(data.n, data.d, data.loss))
    assert [c.made for c in check.cuts] == [True, False, False, False]
    assert all("too few runs" in c.reason for c in check.cuts[1:])
    assert backtest_verdict.backtest_check(check).value is not None and check.farthest.factor == 2.0
    top = data.take(np.flatnonzero(data.budgets == BUDGETS[-1]))        # one budget: nothing below it
    none = bt.backtest(top, fitting.fit_law(data.n, data.d, data.loss))
    assert none.farthest is None and "not tested beyond its data" in backtest_verdict.backtest_check(none).reason


def test_under_trained_runs_are_left_out_of_the_law_beyond_the_data():
    # Runs far below 5 tokens per parameter that the law's form does not describe (their loss 10%
    # above it, as a long warmup would leave them): the law beyond the data is fitted without them.
    data = sweep()
    under = data.d / data.n < bt.UNDERTRAINED_TPP
    assert 0 < under.sum() < len(data) - 10
    data = replace(data, loss=np.where(under, data.loss * 1.1, data.loss))
    check = bt.backtest(data, fitting.fit_law(data.n, data.d, data.loss))
    assert check.n_trained == int((~under).sum())
    assert check.law.E == pytest.approx(TRUTH.E, rel=0.05)


def made_cut(factor, n_train, cmax, distance, log_residual, runs=5):
    """A made cut whose `runs` predicted runs all erred by `log_residual` at `distance` decades."""
    err = math.expm1(-log_residual)
    return bt.Cut(factor, n_train, runs, cmax, cmax * 10 ** distance, (err,) * runs, (distance,) * runs,
                  (0.01,) * runs, runs, raw_errors=(err,) * runs)


def test_cuts_of_the_same_runs_count_once_and_the_growth_has_a_floor():
    same = [made_cut(2.0, 40, 1e18, 0.3, -0.01), made_cut(3.0, 40, 1e18, 0.48, -0.016)]   # one set of runs
    rule = xp.learn_extrapolation(same, noise=0.005, calibrate=False)
    assert rule.n_cuts == 1 and rule.power == 0.5
    # Cuts that agree exactly cannot narrow the interval below what the public tables showed.
    agree = [made_cut(f, n, c, x, -0.03 * x) for f, n, c, x in ((2.0, 40, 1e18, 0.3), (10.0, 30, 3e17, 0.8),
                                                                (30.0, 20, 1e17, 1.3))]
    assert xp.learn_extrapolation(agree, noise=0.005).growth == xp.GROWTH_FLOOR
    # The variance grows with the distance: the half-width at 4 decades is about twice that at one.
    wide = replace(xp.PRIOR, noise=0.0)
    (_, lo1, hi1), (_, lo4, hi4) = wide.widen(3.0, 1.0), wide.widen(3.0, 4.0)
    assert math.log(hi4 / lo4) / math.log(hi1 / lo1) == pytest.approx(2.0)


def test_cuts_that_err_beyond_the_rule_of_the_others_widen_it_and_caution():
    calm = [made_cut(f, n, c, x, -0.02 * x) for f, n, c, x in ((2.0, 40, 1e18, 0.3), (10.0, 30, 3e17, 0.8),
                                                               (30.0, 20, 1e17, 1.3))]
    assert xp.learn_extrapolation(calm, noise=0.005).calibration == 1.0
    # Errors that swing from +6% to -8% between cuts: each cut, predicted by the others' rule, lies
    # far outside it.
    wild = [made_cut(f, n, c, x, r) for f, n, c, x, r in ((2.0, 40, 1e18, 0.3, 0.06), (10.0, 30, 3e17, 0.8, -0.08),
                                                          (30.0, 20, 1e17, 1.3, 0.09))]
    plain = xp.learn_extrapolation(wild, noise=0.005, calibrate=False)
    rule = xp.learn_extrapolation(wild, noise=0.005)
    assert rule.calibration > backtest_verdict.CALIBRATION_CAUTION
    assert rule.growth == pytest.approx(plain.growth * rule.calibration)
    check = bt.Backtest(tuple(wild), rule)
    verdict = backtest_verdict.backtest_check(check)
    assert verdict.status == "caution" and "grow faster than the cuts show" in verdict.reason
    assert "widened" in "\n".join(bt.format_backtest(check))


def test_a_fit_json_written_before_the_square_root_rule_keeps_its_linear_growth():
    old = {"growth": 0.02, "bias": -0.027, "n_cuts": 0, "source": "old", "noise": 0.01}
    rule = xp.Extrapolation.from_json(old)
    assert (rule.power, rule.calibration) == (1.0, 1.0)
    _, lo, hi = rule.widen(3.0, 2.0)
    assert math.log(hi / lo) / 2 == pytest.approx(1.959964 * math.hypot(0.01, 0.04), rel=1e-5)
    assert xp.Extrapolation.from_json(xp.PRIOR.to_json()) == xp.PRIOR


def test_trustworthy_needs_a_passing_backtest_at_the_farthest_cut_and_says_how_far():
    good = made_cut(30.0, 20, 1e17, 1.4, 0.01)
    far_off = replace(made_cut(30.0, 20, 1e17, 1.4, 0.06), covered=1)        # 6% off, 1 of 5 held
    near = made_cut(3.0, 40, 1e18, 0.4, 0.005)
    passing = backtest_verdict.backtest_check(bt.Backtest((near, good), xp.PRIOR))
    assert passing.status == "pass" and passing.reason.startswith("tested 30x beyond its fitted compute")
    # The near cut passing does not rescue the farthest one: the verdict is held to the largest factor.
    failing = backtest_verdict.backtest_check(bt.Backtest((near, far_off), xp.PRIOR))
    assert failing.status == "caution" and "tested 30x" in failing.reason and "1 of them inside" in failing.reason


def test_a_cuts_precision_is_the_spread_of_its_refits_over_the_scatter():
    # Second method: refit the 10x cut's 12 runs on 30 draws of 1% scatter and compare the spread of
    # their log predictions of the top budget's runs with the Gauss-Newton sd of each refit.
    start = theta_from_law(TRUTH)[None]
    predictions, sds = [], []
    for seed in range(30):
        data = sweep(seed=seed, noise=0.01)
        cut, result = bt.fit_cut(data, 10.0, delta=1e-3, fixed_E=None, starts=start, coarse=False)
        cut = bt.with_precision(data, cut, result, fixed_E=None)
        predictions.append(np.log1p(cut.errors))
        sds.append(cut.prediction_sd)
    ratio = np.std(predictions, axis=0) / np.median(sds, axis=0)
    assert cut.n_train == 12 and np.all((ratio > 0.8) & (ratio < 1.3))
    assert bt.Cut.from_json(cut.to_json()).prediction_sd == cut.prediction_sd


def test_a_bias_its_cuts_cannot_tell_from_chance_falls_back_and_a_precise_one_stays():
    # Three cuts that each measured -8% per decade: with a precision of 0.5% per decade the table
    # keeps about its own bias; with 8% per decade (a refit of a few noisy runs) about the fallback's.
    def cuts(se):
        return [replace(made_cut(f, n, c, x, -0.08 * x), prediction_sd=(se * x,) * 5)
                for f, n, c, x in ((2.0, 40, 1e18, 0.5), (10.0, 30, 3e17, 1.0), (30.0, 20, 1e17, 1.5))]
    precise, noisy = (xp.learn_extrapolation(cuts(se), calibrate=False).bias for se in (0.005, 0.08))
    assert precise == pytest.approx(-0.08, abs=0.003)
    assert noisy == pytest.approx(xp.PRIOR.bias, abs=0.006)
    # Cuts without a measured precision (a fit.json from before) count as one cut each, as they did.
    plain = xp.learn_extrapolation([made_cut(2.0, 40, 1e18, 0.5, -0.04)], calibrate=False)
    assert plain.bias == pytest.approx((-0.08 + xp.PRIOR.bias) / 2)
