"""The data-constrained law (Muennighoff et al. 2023): the law against the authors' own formula and
numbers, its fit and bootstrap on synthetic data, and the allocation with U unique tokens."""

import math

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from scaling.errors import UsageError
from scaling.laws.fitting.fit import fit_law
from scaling.laws.fitting.objective import objective
from scaling.laws.forms.law import Law
from scaling.laws.optimal.allocation import plan
from scaling.laws.repeated.fit import (
    bootstrap_repeated_law,
    fit_repeated_law,
    repeated_objective,
    repeated_points,
)
from scaling.laws.repeated.law import MUENNIGHOFF_2023, RepeatedLaw
from scaling.laws.repeated.plan import diminishing_epochs, repeat_value, repeated_allocation

BASE = MUENNIGHOFF_2023.base


def design(epochs=(0.25, 0.5, 1, 2, 4, 8, 16, 40)):
    """4 model sizes x 3 unique-token budgets x the given epochs: (N, D, U) arrays."""
    sizes, uniques = np.array([2e7, 6e7, 2e8, 6e8]), np.array([1e8, 4e8, 1.5e9])
    n, u, e = (v.ravel() for v in np.meshgrid(sizes, uniques, np.asarray(epochs, dtype=float), indexing="ij"))
    return n, e * u, u


def noisy(loss, seed=0, sigma=0.01):
    return loss * np.exp(sigma * np.random.default_rng(seed).standard_normal(np.shape(loss)))


# --- the law against the paper's formula ------------------------------------------------------

# The constants as printed in huggingface/datablations README.md, section "Parametric Fit":
# a, b, e, alpha, beta, rd_star, rn_star = [6.255414, 7.3049974, 0.6254804, 0.3526596, 0.3526596, 15.387756, 5.309743]
PAPER = (6.255414, 7.3049974, 0.6254804, 0.3526596, 0.3526596, 15.387756, 5.309743)


def paper_loss(N, D, U):
    """Transcribed from the paper's formula, independently of scaling.laws.repeated.law:
    L = E + A / (U_N + U_N R_N* (1 - e^(-R_N/R_N*)))^alpha + B / (U_D + U_D R_D* (1 - e^(-R_D/R_D*)))^beta,
    U_D = min(U, D), R_D = D/U_D - 1, U_N = min(N, N_opt(C_U)) with C_U the compute whose Chinchilla-optimal
    D is U_D, R_N = N/U_N - 1."""
    a, b, e, alpha, beta, rd_star, rn_star = PAPER
    A, B, E = math.exp(a), math.exp(b), math.exp(e)
    G = ((alpha * A) / (beta * B)) ** (1 / (alpha + beta))
    a_exp, b_exp = beta / (alpha + beta), alpha / (alpha + beta)
    U_D = min(U, D)
    R_D = max(D / U_D - 1, 0)
    C_U = 6 * (G * U_D) ** (1 / b_exp)          # D_opt(C) = (C/6)^b / G, solved for C
    U_N = min(N, G * (C_U / 6) ** a_exp)        # N_opt(C) = G (C/6)^a
    R_N = max(N / U_N - 1, 0)
    N_eff = U_N + U_N * rn_star * (1 - math.exp(-R_N / rn_star))
    D_eff = U_D + U_D * rd_star * (1 - math.exp(-R_D / rd_star))
    return E + A / N_eff**alpha + B / D_eff**beta


CASES = [
    (6.34e9, 242e9, 25e9),     # README "Models in Figure 1 (right)": 9.7 epochs, excess parameters
    (8.67e9, 178e9, 25e9),     # the other Figure 1 (right) model: 7.1 epochs, more excess parameters
    (2.81e9, 55e9, 1.25e9),    # their run 2b855b1b25: 44 epochs
    (1e8, 1e11, 1e8),          # 1,000 epochs on 100M tokens, N 20x N_opt(U)
    (1e10, 1e10, 1e12),        # one epoch, but N far above N_opt(D): only parameters decay
    (1e7, 5e9, 1e12),          # one epoch, few parameters: the plain Chinchilla law
]


@pytest.mark.parametrize("n,d,u", CASES)
def test_law_reproduces_the_papers_formula(n, d, u):
    assert float(MUENNIGHOFF_2023.loss(n, d, u)) == pytest.approx(paper_loss(n, d, u), abs=1e-12)


def test_law_broadcasts_and_matches_case_by_case():
    n, d, u = (np.array(v) for v in zip(*CASES))
    assert np.allclose(MUENNIGHOFF_2023.loss(n, d, u), [paper_loss(*c) for c in CASES], rtol=0, atol=1e-12)


def test_published_constants_are_the_readmes():
    law = MUENNIGHOFF_2023
    assert (math.log(law.base.A), math.log(law.base.B), math.log(law.base.E)) == pytest.approx(PAPER[:3], rel=1e-15)
    assert (law.base.alpha, law.base.beta, law.r_d_star, law.r_n_star) == PAPER[3:]


def test_pinned_numbers_from_the_datablations_repo():
    # README.md "Parametric Fit": print(scaling_law(6.34e9, 242e9, 25e9)) # 2.2256440889984477
    #                             print(scaling_law(8.67e9, 178e9, 25e9)) # 2.2269634075087867
    assert float(MUENNIGHOFF_2023.loss(6.34e9, 242e9, 25e9)) == pytest.approx(2.2256440889984477, abs=1e-12)
    assert float(MUENNIGHOFF_2023.loss(8.67e9, 178e9, 25e9)) == pytest.approx(2.2269634075087867, abs=1e-12)
    # utils/parametric_fit.ipynb, cell output of optimal_N(D_to_C(55e9)), ... (the U_N of their runs).
    assert float(MUENNIGHOFF_2023.n_for_data(55e9)) == pytest.approx(2804258470.9512057, rel=1e-12)
    assert float(MUENNIGHOFF_2023.n_for_data(100e6)) == pytest.approx(5098651.765365828, rel=1e-12)


def test_readme_optimal_allocation_example():
    # README.md: optimal_allocation(10**22, 25e9), a grid of 500 multipliers in [1.0001, 3] on the
    # Chinchilla optimum, -> 237336955477.55075 tokens, 9.49347821910203 epochs, 7022364735.879969 parameters.
    best = repeated_allocation(MUENNIGHOFF_2023, 1e22, 25e9)
    assert best.n == pytest.approx(7022364735.879969, rel=5e-3)     # their grid's step is ~0.4%
    assert best.epochs == pytest.approx(9.49347821910203, rel=5e-3)
    assert best.loss <= paper_loss(7022364735.879969, 237336955477.55075, 25e9) + 1e-15


def test_single_epoch_is_the_base_law():
    n, d = np.array([1e8, 1e9, 3e9]), np.array([2e9, 2e10, 5e10])
    assert np.array_equal(RepeatedLaw(BASE, 15.0).loss(n, d, d * 3), BASE.loss(n, d))
    assert np.array_equal(RepeatedLaw(BASE, 15.0).effective_data(d, d), d)


def test_effective_data_saturates_at_u_times_one_plus_r_d_star():
    law = RepeatedLaw(BASE, 15.0)
    assert float(law.effective_data(1e16, 1e9)) == pytest.approx(16e9, rel=1e-12)
    assert float(law.effective_data(2e9, 1e9)) == pytest.approx(1e9 * (1 + 15 * (1 - math.exp(-1 / 15))), rel=1e-15)


def test_law_rejects_bad_decay_constants():
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(UsageError, match="R_D"):
            RepeatedLaw(BASE, bad)
        with pytest.raises(UsageError, match="R_N"):
            RepeatedLaw(BASE, 15.0, bad)


# --- the objective ----------------------------------------------------------------------------

def test_objective_gradient_matches_finite_differences():
    n, d, u = design()
    pts = repeated_points(n, d, u, noisy(MUENNIGHOFF_2023.loss(n, d, u)))
    x = np.array([0.6, 6.0, 7.5, 0.34, 0.36, math.log(12.0), math.log(4.0)])
    for excess in (False, True):
        def f(z, excess=excess):
            return repeated_objective(z, pts, delta=0.05, excess=excess)[0][0]
        g = repeated_objective(x, pts, delta=0.05, excess=excess)[1][0]
        assert g == pytest.approx(approx_fprime(x, f, 1e-7), rel=1e-4, abs=1e-6)


def test_objective_is_the_base_objective_at_effective_data():
    n, d, u = design()
    loss = noisy(MUENNIGHOFF_2023.loss(n, d, u))
    pts = repeated_points(n, d, u, loss)
    theta = np.array([0.6, 6.0, 7.5, 0.34, 0.36])
    d_eff = RepeatedLaw(BASE, 12.0).effective_data(d, u)
    f, g = repeated_objective(np.r_[theta, math.log(12.0), 0.0], pts)
    f0, g0 = objective(theta, np.log(n), np.log(d_eff), np.log(loss))
    assert f[0] == pytest.approx(f0, rel=1e-12)
    assert g[0, :5] == pytest.approx(g0, rel=1e-9, abs=1e-12)


# --- the fit and the bootstrap ----------------------------------------------------------------

@pytest.fixture(scope="module")
def noisy_fit():
    """Runs of a law with R_D* = 15 at 0.25 to 40 epochs, 1% log-normal noise, and their fit."""
    n, d, u = design()
    loss = noisy(RepeatedLaw(BASE, 15.0).loss(n, d, u))
    return n, d, u, loss, fit_repeated_law(n, d, u, loss)


def test_fit_and_bootstrap_recover_r_d_star(noisy_fit):
    n, d, u, loss, fit = noisy_fit
    assert fit.converged and fit.r_d_star_determined and fit.law.r_n_star is None
    assert fit.n_repeated == 4 * 3 * 5
    boot = bootstrap_repeated_law(n, d, u, loss, fit, n_resamples=200, seed=0)
    lo, hi = boot.intervals["r_d_star"]
    # Fitted R_D* = 13.6 with 95% interval (10.8, 18.0) when this was written.
    assert lo < 15.0 < hi and 3.0 < lo and hi < 80.0
    assert boot.n_converged == 200 and boot.n_at_bound == {"r_d_star": 0}
    assert set(boot.intervals) == {"E", "A", "B", "alpha", "beta", "r_d_star"}
    again = bootstrap_repeated_law(n, d, u, loss, fit, n_resamples=200, seed=0)
    assert again.intervals == boot.intervals


def test_fit_recovers_both_decays_exactly_on_exact_data():
    n, d, u = design()
    truth = RepeatedLaw(BASE, 15.0, 5.0)
    fit = fit_repeated_law(n, d, u, truth.loss(n, d, u), fit_r_n_star=True)
    assert fit.law.r_d_star == pytest.approx(15.0, rel=1e-4)
    assert fit.law.r_n_star == pytest.approx(5.0, rel=1e-4)
    assert fit.law.base.alpha == pytest.approx(BASE.alpha, rel=1e-4)
    assert fit.n_excess > 0 and fit.message == ""


def test_fit_says_when_repeats_look_as_good_as_new():
    n, d, u = design()
    fit = fit_repeated_law(n, d, u, RepeatedLaw(BASE, None).loss(n, d, u))
    assert fit.law.r_d_star == pytest.approx(1e4, rel=1e-6)
    assert "at a bound" in fit.message


def test_single_epoch_fit_is_fit_law_exactly():
    n, d, u = design(epochs=(0.1, 0.25, 0.5, 1.0))
    loss = noisy(BASE.loss(n, d))
    fit = fit_repeated_law(n, d, u, loss)
    plain = fit_law(n, d, loss)
    assert fit.law.base == plain.law and fit.objective == plain.objective
    assert fit.law.r_d_star is None and not fit.r_d_star_determined
    assert "not determined" in fit.message


def test_fit_validates_unique():
    n, d, u = design()
    loss = MUENNIGHOFF_2023.loss(n, d, u)
    with pytest.raises(UsageError, match="one value per point"):
        fit_repeated_law(n, d, u[:-1], loss)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(UsageError, match="unique must be positive and finite"):
            fit_repeated_law(n, d, np.r_[u[:-1], bad], loss)


def test_bootstrap_rejects_a_fit_of_other_points(noisy_fit):
    n, d, u, loss, fit = noisy_fit
    with pytest.raises(UsageError, match="not of these"):
        bootstrap_repeated_law(n[1:], d[1:], u[1:], loss[1:], fit)


# --- the plan ---------------------------------------------------------------------------------

def grid_argmin(law, compute, unique):
    """ln N minimising L(N, C/6N, U) by nested dense grids (20,001 points, then +-2 steps, twice)."""
    log_c6 = math.log(compute / 6)
    lo, hi = 0.0, log_c6
    for _ in range(3):
        x = np.linspace(lo, hi, 20001)
        i = int(np.argmin(law.reducible(np.exp(x), np.exp(log_c6 - x), unique)))
        lo, hi = x[max(i - 2, 0)], x[min(i + 2, x.size - 1)]
    return math.exp(x[i])


LAWS = [MUENNIGHOFF_2023, RepeatedLaw(BASE, 15.0), RepeatedLaw(Law(1.8, 400.0, 2000.0, 0.3, 0.4), 5.0, 20.0)]


@pytest.mark.parametrize("law", LAWS, ids=["published", "no-excess-decay", "alpha<beta"])
@pytest.mark.parametrize("compute,unique", [(1e20, 1e9), (1e22, 25e9), (1e24, 1e11), (1e21, 1e13)])
def test_plan_matches_a_dense_grid(law, compute, unique):
    best = repeated_allocation(law, compute, unique)
    assert best.n == pytest.approx(grid_argmin(law, compute, unique), rel=1e-6)
    assert 6 * best.n * best.d == pytest.approx(compute, rel=1e-12)
    assert best.epochs == best.d / unique


@pytest.mark.parametrize("law", LAWS, ids=["published", "no-excess-decay", "alpha<beta"])
def test_plan_with_unlimited_unique_data_is_the_base_optimum(law):
    for compute in (1e19, 1e22, 1e25):
        best, base = repeated_allocation(law, compute, 1e30), plan(law.base, compute)
        assert best.n == pytest.approx(base.n, rel=1e-6)
        assert best.loss == pytest.approx(base.loss, rel=1e-12)
        assert best.loss_lost == pytest.approx(0.0, abs=1e-12)


def test_loss_lost_grows_as_unique_data_shrinks():
    lost = [repeated_allocation(MUENNIGHOFF_2023, 1e22, u).loss_lost for u in (1e13, 1e11, 25e9, 5e9, 1e9, 1e8)]
    assert lost[0] == pytest.approx(0.0, abs=1e-12)
    assert all(x >= 0 for x in lost) and all(b > a for a, b in zip(lost[1:], lost[2:]))
    assert lost[1] > 0


def test_plan_rejects_bad_inputs():
    for bad in (0, -1.0, math.nan, "x"):
        with pytest.raises(UsageError):
            repeated_allocation(MUENNIGHOFF_2023, 1e22, bad)
    with pytest.raises(UsageError):
        repeated_allocation(MUENNIGHOFF_2023, 6.0, 1e9)


def test_return_on_compute_point():
    law = MUENNIGHOFF_2023
    assert diminishing_epochs(law) == pytest.approx(1 + 15.387756, rel=1e-15)
    assert float(repeat_value(law, diminishing_epochs(law))) == pytest.approx(1 / math.e, rel=1e-12)
    assert diminishing_epochs(law, 0.5) == pytest.approx(1 + 15.387756 * math.log(2), rel=1e-15)
    assert float(repeat_value(law, 0.5)) == 1.0 == float(repeat_value(law, 1.0))
    # repeat_value is dD'/dD, by a central difference at 4 and 40 epochs of 1e9 unique tokens.
    for epochs in (4.0, 40.0):
        h = 1e5
        slope = (law.effective_data(epochs * 1e9 + h, 1e9) - law.effective_data(epochs * 1e9 - h, 1e9)) / (2 * h)
        assert float(repeat_value(law, epochs)) == pytest.approx(float(slope), rel=1e-6)
    with pytest.raises(UsageError, match="no R_D"):
        diminishing_epochs(RepeatedLaw(BASE, None))
