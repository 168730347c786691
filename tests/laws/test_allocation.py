"""Compute-optimal allocation: the closed forms of Law against a numerical minimiser."""

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from scaling.errors import UsageError
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import BESIROGLU, CHINCHILLA
from scaling.laws.optimal.allocation import (
    PF_DAY_FLOP,
    compare_allocations,
    kaplan_allocation,
    numerical_optimum,
    optimum_intervals,
    plan,
    rule_of_thumb,
)

BUDGETS = (1e18, 1e21, 1e23, 1e25)


@pytest.mark.parametrize("law", [CHINCHILLA.law, BESIROGLU.law], ids=["chinchilla", "besiroglu"])
@pytest.mark.parametrize("compute", BUDGETS)
def test_closed_form_matches_numerical_minimiser(law, compute):
    closed, numeric = plan(law, compute), numerical_optimum(law, compute)
    assert closed.n == pytest.approx(numeric.n, rel=1e-6)
    assert closed.d == pytest.approx(numeric.d, rel=1e-6)
    assert closed.tokens_per_param == pytest.approx(numeric.tokens_per_param, rel=1e-6)
    assert closed.loss == pytest.approx(numeric.loss, rel=1e-12)
    assert 6 * closed.n * closed.d == pytest.approx(compute, rel=1e-12)


# Laws spanning the shapes that matter: the published two, alpha = beta (constant D/N), and
# alpha far above and far below beta.
README_LAWS = [CHINCHILLA.law, BESIROGLU.law, Law(E=1.8, A=400.0, B=400.0 * 20**0.3, alpha=0.3, beta=0.3),
               Law(E=2.0, A=1e3, B=50.0, alpha=0.6, beta=0.15), Law(E=1.0, A=30.0, B=5e4, alpha=0.1, beta=0.7)]
WIDE_BUDGETS = (1e15, 1e18, 1e21, 1e23, 1e25, 1e27)


def minimise_on_log_n(law: Law, compute: float) -> float:
    """N minimising L(N, C / (6N)), found by minimize_scalar on x = ln N; written here, apart from
    scaling.laws.optimal.allocation.

    L is flat at its minimum, so L itself cannot place the argmin closer than about
    sqrt(eps L / L'') ~ 1e-7 in x. Minimised instead: L(x0 + u) - L(x0) =
    A e^(-alpha x0) expm1(-alpha u) + B (C/6)^-beta e^(beta x0) expm1(beta u), exact to rounding
    relative to itself, from the best x0 of a grid, over u within one grid step."""
    log_c6 = math.log(compute / 6)
    grid = np.linspace(0.0, log_c6, 401)
    x0 = grid[np.argmin(law.A * np.exp(-law.alpha * grid) + law.B * np.exp(-law.beta * (log_c6 - grid)))]
    t_n, t_d = law.A * math.exp(-law.alpha * x0), law.B * math.exp(-law.beta * (log_c6 - x0))
    step = grid[1] - grid[0]
    res = minimize_scalar(lambda u: t_n * math.expm1(-law.alpha * u) + t_d * math.expm1(law.beta * u),
                          bounds=(-step, step), method="bounded", options={"xatol": 1e-13, "maxiter": 10_000})
    assert res.success and abs(res.x) < step
    return math.exp(x0 + res.x)


@pytest.mark.parametrize("law", README_LAWS, ids=["chinchilla", "besiroglu", "equal", "alpha>beta", "alpha<beta"])
def test_closed_forms_match_a_numerical_minimiser_to_1e_7(law):
    """README: the closed forms agree with a numerical minimiser of L subject to 6ND = C to 1e-7."""
    n_num = {c: minimise_on_log_n(law, c) for c in WIDE_BUDGETS}
    for c in WIDE_BUDGETS:
        closed = plan(law, c)
        assert closed.n == pytest.approx(n_num[c], rel=1e-7)
        assert closed.d == pytest.approx(c / (6 * n_num[c]), rel=1e-7)
        # The package's own numerical path (numerical_optimum) meets the same promise.
        numeric = numerical_optimum(law, c)
        assert closed.n == pytest.approx(numeric.n, rel=1e-7)
        assert closed.d == pytest.approx(numeric.d, rel=1e-7)
    # a and b are the slopes of ln N_opt and ln D_opt in ln C; G = N_opt / (C/6)^a.
    lo, hi = WIDE_BUDGETS[0], WIDE_BUDGETS[-1]
    a = math.log(n_num[hi] / n_num[lo]) / math.log(hi / lo)
    b = math.log((hi / n_num[hi]) / (lo / n_num[lo])) / math.log(hi / lo)
    assert law.a == pytest.approx(a, rel=1e-7)
    assert law.b == pytest.approx(b, rel=1e-7)
    assert law.G == pytest.approx(n_num[lo] / (lo / 6) ** a, rel=1e-7)


@pytest.mark.parametrize("compute", BUDGETS)
def test_optimum_beats_its_neighbours(compute):
    # A third check that needs neither method: moving N by 1% either way at fixed C costs loss.
    law = BESIROGLU.law
    best = plan(law, compute)
    for f in (0.99, 1.01):
        n = best.n * f
        assert law.loss(n, compute / (6 * n)) > best.loss


def test_numerical_minimiser_is_not_the_closed_form():
    # If the numerical path silently reused Law.n_opt it would agree with a broken G too.
    law = CHINCHILLA.law

    class Broken(Law):
        @property
        def G(self):
            return 2 * super().G

    broken = Broken(**law.to_dict())
    assert plan(broken, 1e21).n != pytest.approx(numerical_optimum(broken, 1e21).n, rel=1e-3)


def test_tokens_per_param_drifts_with_compute_unless_alpha_equals_beta():
    chinchilla = CHINCHILLA.law  # alpha 0.34 > beta 0.28: D grows faster than N
    ratios = [plan(chinchilla, c).tokens_per_param for c in BUDGETS]
    assert all(b > 1.5 * a for a, b in zip(ratios, ratios[1:]))
    # Slope of ln(D/N) in ln C is b - a = (alpha - beta) / (alpha + beta).
    slope = np.polyfit(np.log(BUDGETS), np.log(ratios), 1)[0]
    assert slope == pytest.approx((0.34 - 0.28) / 0.62, rel=1e-9)

    besiroglu = BESIROGLU.law  # alpha < beta: D/N shrinks
    ratios = [plan(besiroglu, c).tokens_per_param for c in BUDGETS]
    assert all(b < a for a, b in zip(ratios, ratios[1:]))

    equal = Law(E=1.8, A=400.0, B=400.0 * 20**0.3, alpha=0.3, beta=0.3)
    ratios = [numerical_optimum(equal, c).tokens_per_param for c in BUDGETS]
    # G = (A/B)^(1/0.6) = 20^(-1/2), so D/N = G^-2 = 20 at every budget.
    assert ratios == pytest.approx([20.0] * len(BUDGETS), rel=1e-6)


def test_rule_of_thumb():
    r = rule_of_thumb(1e23)
    assert r.n == pytest.approx(math.sqrt(1e23 / 120))
    assert r.tokens_per_param == pytest.approx(20.0)
    assert 6 * r.n * r.d == pytest.approx(1e23)
    # Chinchilla itself: 70e9 parameters on 1.4e12 tokens is 20 tokens/param at 5.88e23 FLOPs.
    chin = rule_of_thumb(6 * 70e9 * 1.4e12)
    assert chin.n == pytest.approx(70e9) and chin.d == pytest.approx(1.4e12)
    assert rule_of_thumb(1e23).loss is None
    assert rule_of_thumb(1e23, law=CHINCHILLA.law).loss > plan(CHINCHILLA.law, 1e23).loss


def test_kaplan_allocation_anchor_and_exponent():
    one = kaplan_allocation(PF_DAY_FLOP)
    assert PF_DAY_FLOP == 8.64e19
    assert one.n == pytest.approx(1.3e9)
    assert 6 * one.n * one.d == pytest.approx(PF_DAY_FLOP)
    ten = kaplan_allocation(10 * PF_DAY_FLOP)
    assert math.log10(ten.n / one.n) == pytest.approx(0.73)
    assert math.log10(ten.d / one.d) == pytest.approx(0.27)
    # Kaplan puts far more into N than Chinchilla does at large C.
    assert kaplan_allocation(1e23).tokens_per_param < 1.0 < rule_of_thumb(1e23).tokens_per_param


def test_compare_allocations_law_optimum_is_lowest():
    rows = compare_allocations(CHINCHILLA.law, 1e22)
    assert [r.method for r in rows] == ["law", "20 tokens/param", "kaplan"]
    assert rows[0].loss == min(r.loss for r in rows)
    assert [r.method for r in compare_allocations(None, 1e22)] == ["20 tokens/param", "kaplan"]


@pytest.mark.parametrize("bad", [0, -1e20, float("nan"), float("inf"), "x", None])
def test_bad_compute_is_a_usage_error(bad):
    with pytest.raises(UsageError, match="compute"):
        plan(CHINCHILLA.law, bad)
    with pytest.raises(UsageError, match="compute"):
        rule_of_thumb(bad)
    with pytest.raises(UsageError, match="compute"):
        kaplan_allocation(bad)


def test_interval_bounds_past_a_float_are_infinite_not_nan():
    # A resample with A = 0 (a not-identified fit's) has N_opt = 0, D_opt and D/N inf; with 4 such
    # of 40 the 97.5th percentile lies between two of them: inf, where numpy's interpolation
    # gave NaN (inf - inf) and a RuntimeWarning that `scaling plan` printed.
    law = CHINCHILLA.law
    resampled = np.tile([law.E, law.A, law.B, law.alpha, law.beta], (40, 1))
    resampled[:, 1] *= np.linspace(0.9, 1.1, 40)
    resampled[:4, 1], resampled[:4, 3] = 0.0, 50.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        iv = optimum_intervals(law, resampled, 1e21)
    assert iv.n[0] == 0.0 and iv.d[1] == math.inf and iv.tokens_per_param[1] == math.inf
    assert 0 < iv.n[1] < math.inf and 0 < iv.d[0] < math.inf and all(np.isfinite(iv.loss))
    # Bounds between finite values are numpy's linear ones, as before.
    finite = optimum_intervals(law, resampled[4:], 1e21)
    n_opt = Law(*resampled[4:].T).n_opt(1e21)
    assert finite.n == tuple(np.percentile(n_opt, [2.5, 97.5]))
