"""A Gaussian prior on E: its scale against the Huber objective, its pull, and its interval."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from scaling.errors import UsageError
from scaling.laws import analysis, api
from scaling.laws.checks import backtest as bt
from scaling.laws.checks import backtest_verdict
from scaling.laws.design.simulate import isoflop_grid, simulate
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.objective import EPrior, quasi_likelihood_scale
from scaling.laws.fitting.prior import prior_scale
from scaling.laws.forms.law import Law
from scaling.laws.results import fit_file

TRUTH = Law(E=1.9, A=400.0, B=1500.0, alpha=0.33, beta=0.30)
BUDGETS = 1e17 * 2.0 ** np.arange(6)


def sweep(seed=0, noise=0.01):
    runs = isoflop_grid(BUDGETS, tokens_per_param=20.0, per_budget=6, span=6.0)
    data = simulate(TRUTH, runs, noise=noise, seed=seed)
    return replace(data, budgets=np.repeat(BUDGETS, 6))


def test_the_scale_is_the_laplace_likelihoods_on_hubers_linear_arm():
    # Laplace residuals of scale b, far above delta: the Huber objective is delta * b times the
    # negative log-likelihood (plus a constant), so the scale recovers delta * b.
    r = np.random.default_rng(0).laplace(0.0, 0.01, 20_000)
    assert quasi_likelihood_scale(r, 1e-3) == pytest.approx(1e-3 * 0.01, rel=0.03)
    g = np.random.default_rng(1).normal(0.0, 1e-4, 20_000)       # inside delta: Huber is r^2 / 2
    assert quasi_likelihood_scale(g, 1e-3) == pytest.approx(1e-8, rel=0.03)


def test_a_tight_prior_is_the_prior_a_loose_one_the_datas_and_the_interval_the_posteriors():
    data = sweep()
    free = fitting.fit_law(data.n, data.d, data.loss)
    scale = quasi_likelihood_scale(np.log(free.law.loss(data.n, data.d) / data.loss), free.delta)
    boot = resampling.bootstrap(data.n, data.d, data.loss, n_resamples=150, full_fit=free)
    sd_data = float(np.std(boot.samples["E"]))
    tight = fitting.fit_law(data.n, data.d, data.loss, E_prior=EPrior(1.7, 1e-4, scale))
    widest = float(data.loss.min())                  # an SD past the whole range of E, 0 to it, is refused
    loose = fitting.fit_law(data.n, data.d, data.loss, E_prior=EPrior(1.7, widest, scale))
    with pytest.raises(UsageError, match="wider than the whole range E can take"):
        fitting.fit_law(data.n, data.d, data.loss, E_prior=EPrior(1.7, 1e300, scale))
    assert tight.law.E == pytest.approx(1.7, abs=1e-3)
    assert loose.law.E == pytest.approx(free.law.E, rel=1e-3)
    # A prior as wide as the data's own spread for E, in the unit `prior_scale` measures: the fitted
    # E moves half way to the prior's mean and the resamples (each drawing its prior's mean) spread
    # as sd / sqrt(2), as a Gaussian posterior's would.
    prior = EPrior(free.law.E - sd_data, sd_data, prior_scale(data.n, data.d, data.loss, free))
    fit = fitting.fit_law(data.n, data.d, data.loss, E_prior=prior)
    post = resampling.bootstrap(data.n, data.d, data.loss, n_resamples=150, full_fit=fit, E_prior=prior)
    assert float(np.std(post.samples["E"])) / sd_data == pytest.approx(2 ** -0.5, abs=0.2)
    assert (free.law.E - fit.law.E) / sd_data == pytest.approx(0.5, abs=0.2)
    # The Laplace unit alone (the fallback) counts the runs as more precise than their spread: less pull.
    laplace = fitting.fit_law(data.n, data.d, data.loss, E_prior=replace(prior, scale=scale))
    assert fit.law.E < laplace.law.E < free.law.E


def test_fit_records_the_prior_and_checks_it(tmp_path):
    data = sweep()
    fit = analysis.fit_data(data, bootstrap=30, backtest=False, E_prior=(1.85, 0.05), grid=bt.COARSE_GRID)
    assert fit.options.E_prior["mean"] == 1.85 and fit.options.E_prior["sd"] == 0.05
    path = fit_file.write_fit(tmp_path / "a", fit)
    assert json.loads(path.read_text())["options"]["E_prior"]["scale"] > 0
    assert fit_file.load_fit(path).options.E_prior == fit.options.E_prior          # the schema accepts it
    mean, sd, source = api.E_prior_from(path)                                        # --E-from
    lo, hi = fit.interval("E")
    assert mean == fit.law.E and sd == pytest.approx((hi - lo) / 3.92, rel=1e-3) and str(path) in source
    for bad in ((10.0, 0.1), (1.8, -1.0), (1.8,)):                                  # above the lowest loss, sd < 0
        with pytest.raises(UsageError):
            analysis.fit_data(data, bootstrap=0, backtest=False, E_prior=bad, grid=bt.COARSE_GRID)
    with pytest.raises(UsageError, match="not both"):
        analysis.fit_data(data, bootstrap=0, backtest=False, fixed_E=1.8, E_prior=(1.8, 0.1), grid=bt.COARSE_GRID)


def test_the_E_check_cautions_far_below_and_when_E_moves():
    data = sweep()
    check = bt.backtest(data, fitting.fit_law(data.n, data.d, data.loss))
    lowest = float(data.loss.min())
    # At its bound (under 2% of the lowest loss) E is the E_floor check's caution, not this one's.
    assert backtest_verdict.E_drift_check(check, (0.0, 3.0), 1e-4, lowest).status == "pass"
    assert "far below" in backtest_verdict.E_drift_check(check, (0.1, 3.0), 0.2 * lowest, lowest).reason
    values = [c.law.E for c in check.made]
    spread = max(values) - min(values)
    # An interval that holds every cut's E but is narrower than their spread: E moves more than it.
    wide_enough = (min(values) - 1e-9, max(values) + 1e-9)
    assert backtest_verdict.E_drift_check(check, wide_enough, 1.9, lowest).status == "pass"
    centre = 0.5 * (min(values) + max(values))
    assert spread > 0
    narrow = backtest_verdict.E_drift_check(check, (centre - spread / 4, centre + spread / 4), 1.9, lowest)
    assert narrow.status == "caution" and "beyond its interval" in narrow.reason


def test_E_at_its_bound_is_cautioned_once_with_the_advice():
    # Runs with no floor (E = 1e-6): the fitted E runs to its bound. The verdict says so once (E_floor),
    # with what to do about it; E_drift, which said it too, leaves it to E_floor (the cuts' E, all at the
    # bound, differ by orders of magnitude of nothing).
    law = Law(E=1e-6, A=482.0, B=2085.0, alpha=0.3478, beta=0.3658)
    data = replace(simulate(law, isoflop_grid(BUDGETS, law, per_budget=6, span=4.0), noise=0.01, seed=1),
                   budgets=np.repeat(BUDGETS, 6))
    fit = analysis.fit_data(data, bootstrap=20, forms=False, grid=bt.COARSE_GRID, form="chinchilla")
    checks = {c.name: c for c in fit.diagnostics.checks}
    assert fit.law.E < 0.02 * float(data.loss.min()) and fit.verdict == "use with caution"
    floor = f"caution: {checks['E_floor'].reason}"
    assert [r for r in fit.reasons if "bound" in r] == [floor]
    assert [r for r in fit.reasons if backtest_verdict.E_ADVICE in r] == [floor]
    assert checks["E_drift"].status == "pass" and "E_floor" in checks["E_drift"].reason
