"""The hold-out check as a pure function, on points made from a known law."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.errors import UsageError
from scaling.laws.checks.holdout import format_holdout, holdout, holdout_split
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.forms.law import Law

TRUE = Law(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)     # Hoffmann et al.'s published constants


def _points(law: Law, sizes, tokens, noise: float = 0.0, seed: int = 0) -> FitData:
    n, d = (v.ravel() for v in np.meshgrid(sizes, tokens))
    loss = law.loss(n, d) * np.exp(noise * np.random.default_rng(seed).standard_normal(n.size))
    return FitData(n=n, d=d, loss=loss, source="synthetic", ids=tuple(f"p{i}" for i in range(n.size)))


def test_split_takes_the_largest_compute():
    train, held = holdout_split([5.0, 1.0, 9.0, 3.0, 9.0, 2.0, 7.0, 4.0, 6.0, 8.0], 0.2)
    assert held.tolist() == [2, 4] and train.tolist() == [0, 1, 3, 5, 6, 7, 8, 9]
    train, held = holdout_split([1.0, 2.0, 3.0], 0.2)       # at least one point held out
    assert held.tolist() == [2] and train.tolist() == [0, 1]
    _, held = holdout_split([4.0, 4.0, 1.0, 2.0], 0.25)     # a tie: the later point goes
    assert held.tolist() == [1]


def test_points_on_the_law_are_predicted_exactly():
    """Without noise the refit finds the law again, so its predictions beyond the training points are
    the true losses; the law itself, standing for the full fit, has zero error by construction."""
    data = _points(TRUE, np.geomspace(1e7, 1e9, 5), np.geomspace(1.1e9, 0.9e11, 5))     # no ties in C
    check = holdout(data, TRUE, fraction=0.2)
    c = data.compute
    assert check.n_points == 25 and check.n_train == 20 and len(check.rows) == 5
    assert {r.id for r in check.rows} == {data.ids[i] for i in np.argsort(-c)[:5]}
    assert [r.compute for r in check.rows] == sorted(r.compute for r in check.rows)
    assert check.train_max_compute == pytest.approx(np.sort(c)[-6])
    assert check.mean_abs_rel_error < 1e-6 and check.full_mean_abs_rel_error == 0.0
    for row in check.rows:
        assert row.predicted == pytest.approx(TRUE.loss(row.n, row.d), rel=1e-6)
        assert row.abs_rel_error == pytest.approx(abs(row.predicted - row.loss) / row.loss, abs=1e-15)
    assert check.law.alpha == pytest.approx(0.34, rel=1e-3) and check.law.beta == pytest.approx(0.28, rel=1e-3)


def test_noise_shows_as_error_and_too_few_points_say_why():
    noisy = _points(TRUE, np.geomspace(1e7, 1e9, 5), np.geomspace(1e9, 1e11, 5), noise=0.01)
    check = holdout(noisy, TRUE, fraction=0.2)
    # 1% noise on each loss: the held-out errors are of that order, neither zero nor wild.
    assert 1e-3 < check.mean_abs_rel_error < 0.05
    few = _points(TRUE, [1e7, 1e8], [1e9, 1e10])                # 4 points: 3 left for 5 constants
    check = holdout(few, TRUE, fraction=0.2)
    assert check.rows == () and check.mean_abs_rel_error is None and "too few points" in check.reason
    assert "too few points" in format_holdout(check)
    with pytest.raises(UsageError, match="hold-out fraction must be between 0 and 1"):
        holdout(few, TRUE, fraction=1.0)


def test_held_out_runs_at_the_refit_s_own_budget_are_named_no_test_beyond_the_data():
    # An IsoFLOP design (the demo's): the top 20% are 3 of the top budget's 5 runs, whose other 2
    # stay in the refit, so the check interpolates; on a cross grid the held-out runs lie beyond.
    budgets = np.repeat([1e18, 1e19, 1e20], 5)
    n = np.tile(np.geomspace(1e7, 1e9, 5), 3) * np.repeat([1, 3, 10], 5)
    isoflop = FitData(n=n, d=budgets / (6 * n), loss=TRUE.loss(n, budgets / (6 * n)), source="synthetic",
                      ids=tuple(f"p{i}" for i in range(n.size)))
    same = holdout(isoflop, TRUE, fraction=0.2)
    assert len(same.rows) == 3 and same.train_max_compute == pytest.approx(1e20) and same.within_fitted
    assert format_holdout(same).endswith("at the budget the refit reached: not a test beyond the data")
    beyond = holdout(_points(TRUE, np.geomspace(1e7, 1e9, 5), np.geomspace(1.1e9, 0.9e11, 5)), TRUE, fraction=0.2)
    assert not beyond.within_fitted and "not a test beyond" not in format_holdout(beyond)
