"""scaling.laws.tasks on data with a known answer: a smooth per-token accuracy rises gradually and its
16th power sharply; a known sigmoid link is recovered and extrapolated within its intervals; the law
is refused on metrics it does not describe."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.errors import UsageError
from scaling.laws import tasks

COMPUTE = np.geomspace(1e15, 1e18, 12)
X = np.linspace(0, 1, 12)              # log compute, scaled to [0, 1]


def test_smooth_accuracy_rises_gradually_and_its_16th_power_sharply():
    rng = np.random.default_rng(0)
    p = 0.35 + 0.6 * X                                   # per-token accuracy, a straight line in log C
    noise = rng.normal(0, 0.005, X.size)
    smooth, exact = tasks.rise(COMPUTE, p + noise), tasks.rise(COMPUTE, tasks.independent_tokens(p, 16) + noise)
    assert smooth.kind == "gradual" and smooth.late_share == pytest.approx(0.5, abs=0.05)
    assert exact.kind == "sharp" and exact.late_share > 0.9
    assert tasks.rise(COMPUTE, 0.2 + 0.3 * np.sqrt(X)).kind == "gradual"        # saturating: early rise
    flat = tasks.rise(COMPUTE, np.zeros(X.size))                                  # exact match at its floor
    assert flat.kind == "flat" and flat.late_share is None
    assert tasks.rise(COMPUTE, 0.5 - 0.2 * X).kind == "flat"                      # falls: no rise
    # noise only: a rise beyond 2 standard errors by chance, one-sided, in about 2.5% of sweeps
    false_rises = np.mean([tasks.rise(COMPUTE, 0.5 + rng.normal(0, 0.05, X.size)).kind != "flat" for _ in range(400)])
    assert false_rises < 0.06
    with pytest.raises(UsageError, match="3 or more compute values"):
        tasks.rise([1e15, 1e15, 1e16], [0.1, 0.2, 0.3])


def test_two_step_recovers_a_known_link_and_covers_held_out_truth():
    truth = tasks.Link(ceiling=0.8, midpoint=3.0, width=0.15)
    loss = np.linspace(3.8, 2.6, 14)                     # falling with compute
    rng = np.random.default_rng(1)
    metric = truth(loss) + rng.normal(0, 0.01, loss.size)
    train, held = slice(0, 11), slice(11, None)          # the three lowest losses are predicted
    step = tasks.two_step(loss[train], metric[train], loss[held], resamples=200, seed=0)
    grid = np.linspace(2.6, 3.8, 50)
    assert np.max(np.abs(step.link(grid) - truth(grid))) < 0.05
    assert np.max(np.abs(step.predicted - truth(loss[held]))) < 0.05
    assert np.all((step.lo <= truth(loss[held]) + 0.01) & (truth(loss[held]) - 0.01 <= step.hi))
    assert np.all(step.lo <= step.predicted) and np.all(step.predicted <= step.hi)
    again = tasks.two_step(loss[train], metric[train], loss[held], resamples=200, seed=0)
    np.testing.assert_array_equal(again.lo, step.lo)     # seeded
    with pytest.raises(UsageError, match="3 or more runs"):
        tasks.fit_link([3.0, 2.9], [0.1, 0.2])


@pytest.mark.parametrize("name", ["exact_match_1", "exact_match_4", "exact_match_16", "token_accuracy",
                                  "continuation_logprob", "perplexity"])
def test_metrics_the_law_does_not_describe_are_refused(name):
    with pytest.raises(UsageError) as err:
        tasks.fit_metric(name)
    assert "\n" not in str(err.value) and name in str(err.value)


def test_fitted_metrics_fall_with_scale_to_a_floor():
    accuracy = np.array([0.2, 0.5, 0.9])
    np.testing.assert_allclose(tasks.fit_metric("token_error").transform(accuracy), [0.8, 0.5, 0.1])
    np.testing.assert_allclose(tasks.fit_metric("neg_log_accuracy").transform(accuracy), -np.log(accuracy))
    assert tasks.fit_metric("continuation_nll").transform(np.array([-40.0]))[0] == 40.0
