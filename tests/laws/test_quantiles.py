"""The distribution functions taken from scipy.special equal scipy.stats' (fitting/quantiles.py)."""

import pytest
from scipy import stats

from scaling.laws.fitting.quantiles import f_tail, normal_quantile, student_quantile


@pytest.mark.parametrize("q", [0.5, 0.75, 0.8, 0.975, 0.995])
def test_normal_quantile_is_scipy_stats(q):
    assert normal_quantile(q) == pytest.approx(stats.norm.ppf(q), rel=1e-12)


@pytest.mark.parametrize("dof", [1.0, 1.5, 3.0, 30.0, 1e4])
def test_student_quantile_is_scipy_stats(dof):
    assert student_quantile(0.975, dof) == pytest.approx(stats.t.ppf(0.975, dof), rel=1e-10)


@pytest.mark.parametrize("f", [0.1, 1.0, 2.5, 40.0])
def test_f_tail_is_scipy_stats(f):
    assert f_tail(f, 3, 20) == pytest.approx(stats.f.sf(f, 3, 20), rel=1e-10)
