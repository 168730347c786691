"""scaling.laws: the objective, the batched L-BFGS, the Approach-3 fit and the bootstrap, on real data.

The Chinchilla points are Hoffmann et al.'s runs as extracted by Besiroglu et al. (2024); the
reference constants are those of a plain per-start scipy loop on the same 240 points
(/work/shared/data/README.md and scaling/data/README.md).
"""

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize, rosen, rosen_der
from threadpoolctl import threadpool_limits

from scaling.errors import UsageError
from scaling.laws.fitting import fit, readers, selection
from scaling.laws.fitting.bootstrap import bootstrap, resample_weights
from scaling.laws.fitting.lbfgs import lbfgs_batched
from scaling.laws.fitting.objective import (
    DEFAULT_DELTA,
    _objective_stable,
    law_from_theta,
    objective,
    objective_batched,
    theta_from_law,
)
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import BESIROGLU

# Per-start scipy loop on the 240 points (drop the 5 highest losses): the reference optimum.
REFERENCE = {"A": 477.8, "B": 2143.0, "E": 1.8172, "alpha": 0.3473, "beta": 0.3672}


@pytest.fixture(scope="module")
def chinchilla():
    return selection.apply_filters(readers.from_dataset("chinchilla"), drop_highest_loss=5)


@pytest.fixture(scope="module")
def chinchilla_fit(chinchilla):
    return fit.fit_law(chinchilla.n, chinchilla.d, chinchilla.loss)


@pytest.fixture(scope="module")
def chinchilla_boot(chinchilla, chinchilla_fit):
    return bootstrap(chinchilla.n, chinchilla.d, chinchilla.loss, n_resamples=200, seed=0,
                         full_fit=chinchilla_fit)


def _logs(data):
    return np.log(data.n), np.log(data.d), np.log(data.loss)


# ----------------------------------------------------------------------------- objective

def test_gradient_matches_central_differences(chinchilla):
    log_n, log_d, log_loss = _logs(chinchilla)
    rng = np.random.default_rng(3)
    theta = np.column_stack([rng.uniform(-1, 1, 20), rng.uniform(0, 10, 20), rng.uniform(0, 10, 20),
                             rng.uniform(0.1, 1, 20), rng.uniform(0.1, 1, 20)])
    weights = rng.integers(0, 3, size=(20, log_n.size)).astype(float)
    for w in (None, weights):
        f, g = objective_batched(theta, log_n, log_d, log_loss, 1e-3, w)
        h = 1e-6
        for k in range(5):
            step = np.zeros(5)
            step[k] = h
            fp, _ = objective_batched(theta + step, log_n, log_d, log_loss, 1e-3, w)
            fm, _ = objective_batched(theta - step, log_n, log_d, log_loss, 1e-3, w)
            np.testing.assert_allclose(g[:, k], (fp - fm) / (2 * h), rtol=1e-4, atol=1e-9)
        # The one-vector version used by scipy gives the same numbers.
        for i in range(3):
            f1, g1 = objective(theta[i], log_n, log_d, log_loss, 1e-3, None if w is None else w[i])
            assert f1 == pytest.approx(f[i], rel=1e-12)
            np.testing.assert_allclose(g1, g[i], rtol=1e-10, atol=1e-15)


def test_objective_is_summed_huber_of_log_residuals(chinchilla):
    law = BESIROGLU.law
    theta = theta_from_law(law)
    r = np.log(law.loss(chinchilla.n, chinchilla.d)) - np.log(chinchilla.loss)
    delta = 1e-3
    huber = np.where(np.abs(r) <= delta, 0.5 * r**2, delta * (np.abs(r) - 0.5 * delta))
    f, _ = objective(theta, *_logs(chinchilla), delta)
    assert f == pytest.approx(huber.sum(), rel=1e-10)


def test_overflowing_rows_fall_back_to_the_stable_form(chinchilla):
    log_n, log_d, log_loss = _logs(chinchilla)
    theta = np.array([[0.5, 800.0, 7.0, 0.3, 0.3], [0.5, 6.0, 7.0, 0.3, 0.3]])   # e^(a - e) overflows
    f, g = objective_batched(theta, log_n, log_d, log_loss)
    fs, gs = _objective_stable(theta, log_n, log_d, log_loss, 1e-3, None)
    assert np.all(np.isfinite(f)) and np.all(np.isfinite(g))
    np.testing.assert_allclose(f, fs, rtol=1e-12)
    np.testing.assert_allclose(g, gs, rtol=1e-9, atol=1e-12)


def test_per_row_losses_score_each_row_against_its_own_points(chinchilla):
    """(S, M) losses, as a residual bootstrap passes them: each row equals a call with that row's
    losses alone, the overflowing row (stable form) included."""
    log_n, log_d, log_loss = _logs(chinchilla)
    theta = np.array([[0.5, 800.0, 7.0, 0.3, 0.3], [0.5, 6.0, 7.0, 0.3, 0.3]])   # row 0 overflows
    per_row = np.vstack([log_loss, log_loss[::-1]])
    f, g = objective_batched(theta, log_n, log_d, per_row)
    for i in range(2):
        fi, gi = objective_batched(theta[i:i + 1], log_n, log_d, per_row[i])
        assert f[i] == fi[0]
        np.testing.assert_array_equal(g[i], gi[0])


def test_batched_lbfgs_minimises_rosenbrock_from_many_starts():
    starts = np.random.default_rng(0).uniform(-2, 2, size=(64, 4))

    def fun(x, rows):
        return np.array([rosen(v) for v in x]), np.array([rosen_der(v) for v in x])

    res = lbfgs_batched(fun, starts, ftol=1e-15, gtol=1e-9)
    ends_at_one = np.all(np.abs(res.x - 1.0) < 1e-4, axis=1)
    # Rosenbrock in 4-D has a second local minimum near (-1, 1, 1, 1); all others reach (1, 1, 1, 1).
    near_other = np.abs(res.x[:, 0] + 0.78) < 0.05
    assert np.all(ends_at_one | near_other)
    assert ends_at_one.sum() > 40
    assert res.converged.all()


def test_grid_is_hoffmanns():
    grid = fit.hoffmann_grid()
    assert grid.shape == (4500, 5)
    assert sorted(set(grid[:, 0])) == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert sorted(set(grid[:, 1])) == sorted(set(grid[:, 2])) == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]
    assert sorted(set(grid[:, 3])) == sorted(set(grid[:, 4])) == [0.0, 0.5, 1.0, 1.5, 2.0]


# ----------------------------------------------------------------------------- the fit

def test_chinchilla_fit_matches_the_per_start_scipy_reference(chinchilla, chinchilla_fit):
    res = chinchilla_fit
    assert len(chinchilla) == 240
    for name, value in REFERENCE.items():
        assert getattr(res.law, name) == pytest.approx(value, rel=5e-3), name
    assert res.n_starts == 4500 and res.converged
    assert res.n_starts_converged == 4500
    assert 100 < res.n_starts_at_optimum < 4500
    assert res.residual_rms == pytest.approx(0.00755, rel=1e-2)
    assert res.law.a == pytest.approx(0.514, abs=2e-3)


# An independent reference, written here from the method's description and sharing no code with
# scaling.laws: Hoffmann et al.'s objective (Huber, delta = 1e-3, on log L_pred - log L_obs with
# log L_pred = LSE(a - alpha ln N, b - beta ln D, e)) and their grid of starts, minimised by a
# plain scipy.optimize.minimize(L-BFGS-B) call per start at scipy's default tolerances.
HOFFMANN_AXES = {"log_e": (-1.0, -0.5, 0.0, 0.5, 1.0), "log_a": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
                 "log_b": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0), "alpha": (0.0, 0.5, 1.0, 1.5, 2.0),
                 "beta": (0.0, 0.5, 1.0, 1.5, 2.0)}


def huber_objective(ln_n, ln_d, ln_loss, delta=1e-3):
    """(f, grad) of sum_i Huber_delta(r_i) over theta = (e, a, b, alpha, beta), from the formula."""

    def f_and_grad(theta):
        e, a, b, alpha, beta = theta
        t1, t2 = a - alpha * ln_n, b - beta * ln_d
        top = np.maximum(np.maximum(t1, t2), e)
        x1, x2, x3 = np.exp(t1 - top), np.exp(t2 - top), np.exp(e - top)
        s = x1 + x2 + x3
        r = top + np.log(s) - ln_loss
        value = np.sum(np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta)))
        q = np.clip(r, -delta, delta) / s           # Huber'(r) times d LSE / d term = x_k / s
        grad = np.array([q @ x3, q @ x1, q @ x2, -(q * x1) @ ln_n, -(q * x2) @ ln_d])
        return value, grad

    return f_and_grad


def test_fit_law_matches_an_independent_scipy_loop_over_hoffmanns_grid(chinchilla, chinchilla_fit):
    f_and_grad = huber_objective(np.log(chinchilla.n), np.log(chinchilla.d), np.log(chinchilla.loss))
    starts = list(itertools.product(*HOFFMANN_AXES.values()))
    assert len(starts) == 4500
    # One BLAS thread: scipy's L-BFGS-B calls BLAS on 5-vectors, which busy cores make slow.
    with threadpool_limits(limits=1, user_api="blas"):
        ends = [minimize(f_and_grad, x0, jac=True, method="L-BFGS-B") for x0 in starts]
    best = min(ends, key=lambda end: end.fun)
    e, a, b, alpha, beta = best.x
    reference = {"E": np.exp(e), "A": np.exp(a), "B": np.exp(b), "alpha": alpha, "beta": beta,
                 "a": beta / (alpha + beta)}
    for name, value in reference.items():   # the same optimum, to 4 significant digits
        assert getattr(chinchilla_fit.law, name) == pytest.approx(value, rel=1e-4), name
    # No start of the plain loop ends lower than the batched fit (beyond rounding), and the fit's
    # objective is the formula's at its own optimum.
    assert best.fun >= chinchilla_fit.objective * (1 - 1e-9)
    assert chinchilla_fit.objective == pytest.approx(f_and_grad(np.array(chinchilla_fit.theta))[0], rel=1e-12)
    # scipy started at the fit's optimum finds nothing lower and does not move.
    again = minimize(f_and_grad, np.array(chinchilla_fit.theta), jac=True, method="L-BFGS-B")
    assert again.fun >= chinchilla_fit.objective * (1 - 1e-12)
    np.testing.assert_allclose(again.x, chinchilla_fit.theta, rtol=1e-6)


def test_fit_scipy_loop_the_benchmark_compares_against(chinchilla, chinchilla_fit):
    # bench/bench_fit.py times fit.fit_scipy_loop as the plain method: over 150 random grid starts
    # it reports the formula's objective at its best end point, no lower than the batched fit's,
    # and that end point is the same optimum to scipy's default tolerances.
    f_and_grad = huber_objective(np.log(chinchilla.n), np.log(chinchilla.d), np.log(chinchilla.loss))
    subset = np.random.default_rng(1).choice(4500, size=150, replace=False)
    best, f_loop, _, _ = fit.fit_scipy_loop(chinchilla.n, chinchilla.d, chinchilla.loss, starts_subset=subset)
    assert f_loop == pytest.approx(f_and_grad(best)[0], rel=1e-12)
    assert chinchilla_fit.objective * (1 - 1e-9) <= f_loop <= chinchilla_fit.objective * (1 + 1e-6)
    loop_law = fit.law_from_theta(best)
    for name in ("E", "A", "B", "alpha", "beta"):
        assert getattr(loop_law, name) == pytest.approx(getattr(chinchilla_fit.law, name), rel=1e-3)


def test_synthetic_law_is_recovered_through_noise():
    true = Law(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
    n = np.repeat(np.geomspace(1e6, 1e11, 12), 12)
    d = n * np.tile(np.geomspace(1, 500, 12), 12)
    rng = np.random.default_rng(0)
    loss = true.loss(n, d) * np.exp(0.01 * rng.standard_normal(n.size))   # 1% log-normal noise
    res = fit.fit_law(n, d, loss)
    assert res.law.alpha == pytest.approx(true.alpha, abs=0.02)
    assert res.law.beta == pytest.approx(true.beta, abs=0.02)
    assert res.law.E == pytest.approx(true.E, rel=0.02)
    assert res.residual_rms == pytest.approx(0.01, rel=0.25)


def test_fixed_E_pins_the_asymptote(chinchilla, chinchilla_fit):
    free_fit = chinchilla_fit
    pinned = fit.fit_law(chinchilla.n, chinchilla.d, chinchilla.loss, fixed_E=free_fit.law.E)
    assert pinned.law.E == free_fit.law.E and pinned.fixed_E == free_fit.law.E
    assert pinned.n_starts == 900                 # the 5 values of e collapse to one
    for name in ("A", "B", "alpha", "beta"):
        assert getattr(pinned.law, name) == pytest.approx(getattr(free_fit.law, name), rel=1e-3)
    off = fit.fit_law(chinchilla.n, chinchilla.d, chinchilla.loss, fixed_E=2.0)
    assert off.law.E == 2.0
    assert off.objective > free_fit.objective * 1.01
    assert off.law.alpha != pytest.approx(free_fit.law.alpha, rel=0.05)


def test_fit_is_deterministic(chinchilla, chinchilla_fit):
    again = fit.fit_law(chinchilla.n, chinchilla.d, chinchilla.loss)
    assert again.theta == chinchilla_fit.theta
    assert again.objective == chinchilla_fit.objective
    assert again.n_starts_at_optimum == chinchilla_fit.n_starts_at_optimum


def test_custom_grid_and_delta(chinchilla):
    grid = {"log_e": (0.0, 0.5), "log_a": (5.0, 10.0), "log_b": (5.0, 10.0), "alpha": (0.5,), "beta": (0.5,)}
    res = fit.fit_law(chinchilla.n, chinchilla.d, chinchilla.loss, grid=grid, delta=1e-2)
    assert res.n_starts == 8 and res.delta == 1e-2
    assert res.law.alpha == pytest.approx(REFERENCE["alpha"], abs=0.05)
    with pytest.raises(UsageError, match="missing beta"):
        fit.fit_law(chinchilla.n, chinchilla.d, chinchilla.loss, grid={k: grid[k] for k in list(grid)[:4]})
    with pytest.raises(UsageError, match="delta must be positive"):
        fit.fit_law(chinchilla.n, chinchilla.d, chinchilla.loss, delta=0.0)


def test_fit_refuses_data_that_cannot_determine_the_law():
    n, d, loss = np.array([1e7, 1e8, 1e9, 1e7]), np.array([1e9, 1e9, 1e10, 1e10]), np.array([3.0, 2.8, 2.5, 2.9])
    with pytest.raises(UsageError, match="4 point.*5 free parameters"):
        fit.fit_law(n, d, loss)
    with pytest.raises(UsageError, match="one model size"):
        fit.fit_law(np.full(6, 1e8), np.geomspace(1e9, 1e11, 6), np.linspace(3, 2.5, 6))
    with pytest.raises(UsageError, match="one token count"):   # issue 15, case 2
        fit.fit_law(np.geomspace(1e7, 1e9, 6), np.full(6, 1e10), np.linspace(3, 2.5, 6))
    with pytest.raises(UsageError, match="loss must be positive and finite; 1 value"):
        fit.fit_law(np.geomspace(1e7, 1e9, 6), np.geomspace(1e9, 1e11, 6), np.array([3, 2.9, np.nan, 2.7, 2.6, 2.5]))
    with pytest.raises(UsageError, match="compute 6 n d must be below"):   # issue 15, case 3
        fit.fit_law(np.geomspace(1e7, 1e200, 6), np.geomspace(1e9, 1e108, 6), np.linspace(3, 2.5, 6))
    with pytest.raises(UsageError, match="fixed E = 100 must be below the lowest loss"):   # issue 15, case 14
        fit.fit_law(np.geomspace(1e7, 1e9, 6), np.geomspace(1e9, 1e11, 6), np.linspace(3, 2.5, 6), fixed_E=100)


# ----------------------------------------------------------------------------- bootstrap

def test_bootstrap_intervals_contain_the_published_values(chinchilla_fit, chinchilla_boot):
    ci = chinchilla_boot.intervals
    assert chinchilla_boot.n_resamples == 200 and chinchilla_boot.n_converged == 200
    for name, published in (("alpha", 0.348), ("beta", 0.366), ("alpha", BESIROGLU.law.alpha),
                            ("beta", BESIROGLU.law.beta), ("E", BESIROGLU.law.E), ("A", BESIROGLU.law.A),
                            ("B", BESIROGLU.law.B), ("a", 0.513)):
        lo, hi = ci[name]
        assert lo < published < hi, (name, ci[name])
    # Meaningful widths: Besiroglu et al.'s are 0.056 (alpha) and 0.084 (beta).
    assert 0.03 < ci["alpha"][1] - ci["alpha"][0] < 0.09
    assert 0.04 < ci["beta"][1] - ci["beta"][0] < 0.12
    # Every interval holds the full-data estimate.
    law = chinchilla_fit.law
    point = {"E": law.E, "A": law.A, "B": law.B, "alpha": law.alpha, "beta": law.beta, "a": law.a,
             "b": law.b, "G": law.G,
             "tokens_per_param": float(law.tokens_per_param(chinchilla_boot.reference_compute))}
    for name, value in point.items():
        assert ci[name][0] < value < ci[name][1], name


def test_bootstrap_reference_compute_defaults_to_the_largest_6ND(chinchilla, chinchilla_boot):
    assert chinchilla_boot.reference_compute == pytest.approx(float(np.max(6 * chinchilla.n * chinchilla.d)))
    s = chinchilla_boot.samples
    np.testing.assert_allclose(s["a"], s["beta"] / (s["alpha"] + s["beta"]))
    # tokens per parameter from the derived formula equals the Law's own, resample by resample.
    for i in range(3):
        law = Law(*(s[k][i] for k in ("E", "A", "B", "alpha", "beta")))
        assert s["tokens_per_param"][i] == pytest.approx(float(law.tokens_per_param(
            chinchilla_boot.reference_compute)), rel=1e-9)
        assert s["G"][i] == pytest.approx(law.G, rel=1e-9)


def test_bootstrap_warm_starts_find_the_grid_optimum(chinchilla, chinchilla_boot):
    """The shortcut (start each resample from the full-data optima) loses nothing against scipy's
    L-BFGS-B run on the same weighted resample from every 150th start of Hoffmann's grid, for the
    first two resamples."""
    weights = resample_weights(len(chinchilla), 200, seed=0)
    log_n, log_d, log_loss = fit.log_points(chinchilla.n, chinchilla.d, chinchilla.loss)
    free = fit.free_mask(None)
    for r in range(2):
        ends = [fit._polish(start, log_n, log_d, log_loss, DEFAULT_DELTA, free, weights[r])
                for start in fit.hoffmann_grid()[::150]]
        best = law_from_theta(min(ends, key=lambda end: end[1])[0])
        for name in ("E", "A", "B", "alpha", "beta"):
            assert chinchilla_boot.samples[name][r] == pytest.approx(getattr(best, name), rel=1e-5), (r, name)


def test_bayesian_bootstrap_weights_are_positive_and_sum_to_the_points():
    """Rows of n_points x Dirichlet(1, ..., 1): no point left out, each row the total weight of a
    multinomial resample, each weight of mean 1 and variance (n - 1) / (n + 1) (a count's:
    (n - 1) / n); and drawn in sequence, resample by resample."""
    w = resample_weights(20, 20_000, seed=0)
    assert (w > 0).all()
    np.testing.assert_allclose(w.sum(axis=1), 20.0)
    assert w.mean() == pytest.approx(1.0)
    assert w.var() == pytest.approx(19 / 21, rel=0.02)
    np.testing.assert_array_equal(resample_weights(20, 3, seed=0), w[:3])


def test_bootstrap_is_seeded(chinchilla, chinchilla_fit):
    args = (chinchilla.n, chinchilla.d, chinchilla.loss)
    a = bootstrap(*args, n_resamples=20, seed=7, full_fit=chinchilla_fit)
    b = bootstrap(*args, n_resamples=20, seed=7, full_fit=chinchilla_fit)
    c = bootstrap(*args, n_resamples=20, seed=8, full_fit=chinchilla_fit)
    assert a.intervals == b.intervals
    np.testing.assert_array_equal(a.samples["alpha"], b.samples["alpha"])
    assert a.intervals["alpha"] != c.intervals["alpha"]
    with pytest.raises(UsageError, match="from 1 to 100,000"):
        bootstrap(*args, n_resamples=0, full_fit=chinchilla_fit)


def test_chunked_starts_and_streamed_resamples_give_the_same_numbers(monkeypatch):
    """Issue 15, case 9: memory bounded by slicing the starts and streaming the resamples; each
    start is an independent problem, so the numbers are those of one batch, to the bit."""
    from scaling.laws.fitting import bootstrap as resampling
    from scaling.laws.fitting import objective

    rng = np.random.default_rng(3)
    n, d = np.repeat([1e6, 1e7, 1e8, 1e9], 5), np.tile([1e8, 3e8, 1e9, 3e9, 1e10], 4)
    loss = (1.7 + 400 / n ** 0.34 + 2000 / d ** 0.28) * np.exp(0.01 * rng.standard_normal(n.size))
    grid = {"log_e": (0.0, 0.5), "log_a": (5.0, 10.0), "log_b": (5.0, 10.0), "alpha": (0.5,), "beta": (0.5,)}
    whole = fit.fit_law(n, d, loss, grid=grid)
    boot = resampling.bootstrap(n, d, loss, 12, full_fit=whole)
    monkeypatch.setattr(objective, "BATCH_ELEMENTS", 3 * n.size)   # 3 starts a slice
    sliced = fit.fit_law(n, d, loss, grid=grid)
    streamed = resampling.bootstrap(n, d, loss, 12, full_fit=sliced)
    assert sliced.theta == whole.theta and sliced.n_starts_at_optimum == whole.n_starts_at_optimum
    assert all(np.array_equal(streamed.samples[k], boot.samples[k], equal_nan=True) for k in boot.samples)
