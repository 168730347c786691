"""Lack of fit (scaling.laws.checks.lack_of_fit): tests that hold their size on clean scatter, catch the
per-size offsets a mistuned learning rate gives, and a verdict that row order cannot move."""

import numpy as np
import pytest
from scipy import stats

from scaling.laws import analysis
from scaling.laws.checks.lack_of_fit import group_labels, grouped_test, lack_of_fit
from scaling.laws.design.simulate import cross_grid, isoflop_grid, simulate
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.forms.references import BESIROGLU
from scaling.laws.results.fit_file import dumps_fit

LAW = BESIROGLU.law
BUDGETS = np.geomspace(1e18, 1e20, 5)
LADDER = np.geomspace(3e6, 3e10, 21)
ISOFLOP = isoflop_grid(BUDGETS, LAW, per_budget=5, ladder=LADDER)


def test_groups_are_values_within_a_tenth_of_a_percent():
    labels = group_labels(np.array([1.0, 2.0, 1.0005, 2.0, 3.0]))
    assert labels[0] == labels[2] and labels[1] == labels[3] and len(set(labels)) == 3


@pytest.mark.parametrize("runs, replicates", [(ISOFLOP, 1), (cross_grid([1e7, 1e8, 1e9], [1e9, 1e10]), 3)])
def test_p_values_are_uniform_when_the_law_is_true(runs, replicates):
    """Against the true law (no parameters fitted) the F-tests are exact: over 400 tables of
    independent scatter their p-values are uniform (a wrong degree of freedom would show)."""
    runs = np.repeat(runs, replicates, axis=0)
    p = {}
    for seed in range(400):
        data = simulate(LAW, runs, noise=0.01, seed=seed)
        for test in lack_of_fit(data.n, data.d, data.loss, LAW.loss(data.n, data.d), compute=data.compute,
                                n_params=0).tests:
            p.setdefault(test.by, []).append(test.p_value)
    assert set(p) >= ({"size", "budget"} if replicates == 1 else {"size", "tokens", "replicates"})
    for by, values in p.items():
        assert stats.kstest(values, "uniform").pvalue > 0.01, by


def test_per_size_offsets_are_caught_and_the_sizes_named():
    """The issue's case: 5 budgets x 5 sizes of one family, 1% offsets per size, 0.5% scatter (one
    table; over many, bench/bench_diagnostics.py measures how often such offsets are caught)."""
    seed = 0
    data = simulate(LAW, ISOFLOP, noise=0.005, size_offset=0.01, seed=seed)
    rng = np.random.default_rng(seed)           # the offsets simulate() drew, to know the truth
    rng.standard_normal(len(data))
    sizes = np.unique(data.n)
    offsets = dict(zip(sizes, 0.01 * rng.standard_normal(sizes.size)))
    fit = analysis.fit_data(data, bootstrap=100, backtest=False)   # lack of fit is within the data
    assert fit.diagnostics.verdict != "trustworthy"
    check = next(c for c in fit.diagnostics.checks if c.name == "lack_of_fit")
    assert check.status == "caution" and "by model size" in check.reason
    size_test = next(t for t in fit.lack_of_fit["tests"] if t["by"] == "size")
    named = size_test["offenders"]
    assert named
    centre = np.mean([offsets[n] for n in data.n])      # what the fitted E absorbs
    for entry in named:   # each named size is off the way its offset (beyond the common one) says
        size = min(sizes, key=lambda s: abs(np.log(s / entry["value"])))
        assert np.sign(entry["mean_residual_pct"]) == np.sign(offsets[size] - centre)
    repeated = [s for s in sizes if (data.n == s).sum() >= 2]
    worst = max(repeated, key=lambda s: abs(offsets[s]))
    assert any(abs(np.log(e["value"] / worst)) < 1e-6 for e in named)


def test_clean_scatter_passes():
    data = simulate(LAW, ISOFLOP, noise=0.005, seed=3)
    fit = analysis.fit_data(data, bootstrap=100, backtest=False)   # lack of fit is within the data
    check = next(c for c in fit.diagnostics.checks if c.name == "lack_of_fit")
    assert check.status == "pass" and check.value > 0.01


def test_row_order_changes_nothing():
    data = simulate(LAW, ISOFLOP, noise=0.01, seed=5)
    shuffled = data.take(np.random.default_rng(0).permutation(len(data)))
    assert shuffled.digest != data.digest
    assert dumps_fit(analysis.fit_data(shuffled, bootstrap=100)) == dumps_fit(analysis.fit_data(data, bootstrap=100))


@pytest.mark.parametrize("rho", [0.0, 0.2, 0.5])
def test_design_effect_recovers_the_shared_share(rho):
    """Residuals with a known intra-class correlation rho, 5 to a group: the median estimated
    design effect over 200 draws is 1 + 4 rho to within 15% (Kish's deff for groups of 5)."""
    rng = np.random.default_rng(int(rho * 10))
    labels = np.repeat(np.arange(1, 21), 5).astype(float)          # 20 groups of 5 points
    effects = []
    for _ in range(200):
        shared = np.sqrt(rho) * rng.standard_normal(20)
        residuals = np.repeat(shared, 5) + np.sqrt(1 - rho) * rng.standard_normal(100)
        effects.append(grouped_test(residuals, labels, "size").design_effect)
    assert np.median(effects) == pytest.approx(1 + 4 * rho, rel=0.15, abs=0.05)


def test_spread_widens_every_percentile_interval_about_the_median():
    rng = np.random.default_rng(0)
    values = np.exp(0.3 * rng.standard_normal(401))
    values[:3] = [np.nan, np.inf, 0.0]                 # undefined: left as they are
    moved = resampling.spread(values, 1.5)
    assert np.isnan(moved[0]) and moved[1] == np.inf and moved[2] == 0.0
    logs, mid = np.log(values[3:]), np.median(np.log(values[3:]))
    for q in (2.5, 25, 97.5):
        assert np.log(np.percentile(moved[3:], q)) - mid == pytest.approx(1.5 * (np.percentile(logs, q) - mid))
    exponents = rng.normal(0.3, 0.05, 101)
    np.testing.assert_allclose(resampling.spread(exponents, 2.0, log=False) - np.median(exponents),
                               2.0 * (exponents - np.median(exponents)))
    assert np.array_equal(resampling.spread(values, 1.0), values, equal_nan=True)


def test_offsets_widen_the_intervals_by_the_design_effect():
    """The issue's table (1% offsets per size): the intervals in fit.json are the bootstrap's
    widened by sqrt of the size test's design effect about their median, and fit.json says by how
    much; the plan at the reference compute gives the same interval, from the stored resamples."""
    data = simulate(LAW, ISOFLOP, noise=0.005, size_offset=0.01, seed=0)
    fit = analysis.fit_data(data, bootstrap=100, backtest=False)   # lack of fit is within the data
    factor = fit.ci.widened_by
    assert factor == pytest.approx(fit.lack_of_fit["interval_factor"]) and factor > 1.2
    size_test = next(t for t in fit.lack_of_fit["tests"] if t["by"] == "size")
    assert factor ** 2 == pytest.approx(max(t["design_effect"] for t in fit.lack_of_fit["tests"]))
    assert size_test["design_effect"] > 1.2
    points = fit.points                                      # in the fit's canonical order: the same resamples
    plain = resampling.bootstrap(points.n, points.d, points.loss, n_resamples=100, full_fit=fit.optimum,
                                 reference_compute=fit.reference_compute, flops=data.flops)
    lo, hi = fit.boot.intervals["tokens_per_param"]
    assert fit.interval("tokens_per_param") == pytest.approx((lo, hi), rel=1e-6)      # as fit.json holds it
    lo0, hi0 = plain.intervals["tokens_per_param"]
    widened = resampling.spread(plain.samples["tokens_per_param"], factor)   # each resample moved in log
    assert (lo, hi) == pytest.approx(tuple(np.percentile(widened, [2.5, 97.5])), rel=1e-9)
    assert lo < lo0 and hi0 < hi
    at_reference = fit.optimum_at(fit.reference_compute)
    assert at_reference.tokens_per_param == pytest.approx((lo, hi), rel=1e-9)


def test_clean_scatter_leaves_the_intervals_nearly_as_they_were():
    data = simulate(LAW, ISOFLOP, noise=0.005, seed=3)
    assert analysis.fit_data(data, bootstrap=20, backtest=False).ci.widened_by < 1.2
