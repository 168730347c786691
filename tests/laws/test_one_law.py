"""One law predicts and plans: the plan is the optimum of what `predict` gives, the user's options
reach it, and a fit of one compute budget says what it cannot know.

Real fits of real points: Hoffmann et al.'s runs (`--dataset chinchilla`), a public table's, and
simulated IsoFLOP sweeps of a known law at one and two budgets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import scaling
from scaling.laws import analysis
from scaling.laws.design.simulate import isoflop_grid, simulate
from scaling.laws.fitting import readers
from scaling.laws.forms.law import Law

TRUTH = Law(E=1.8, A=400.0, B=2000.0, alpha=0.34, beta=0.37)
BUDGETS = np.geomspace(1e18, 1e24, 7)
PUBLIC = Path(__file__).resolve().parents[2] / "bench" / "data" / "backtest"


def _public(name: str):
    """A public table of bench/data/backtest, with its budgets where it has them."""
    frame = pd.read_csv(PUBLIC / f"{name}.csv")
    return readers.from_frame(frame, source=name, n_col="N", d_col="D", loss_col="loss",
                              budget_col="budget" if "budget" in frame.columns else None)


@pytest.fixture(scope="module")
def chinchilla():
    return scaling.fit("chinchilla", bootstrap=20)


def _no_better_run_on_the_curve(fit, compute):
    """The plan at `compute`, after checking that no N along its compute curve (a factor 10 either
    side of the plan's) is predicted a lower loss, and that predict at the plan's N, D is its loss."""
    p = fit.plan(compute)
    assert fit.predict(p.n, p.d).loss == pytest.approx(p.loss, rel=1e-12)
    n = p.n * np.geomspace(0.1, 10.0, 401)
    assert np.min(fit.expected_loss(n, fit.law.flops.tokens(compute, n))) >= p.loss * (1 - 1e-12)
    return p


@pytest.mark.parametrize("source", ["chinchilla", "public"])
def test_the_plan_is_the_optimum_of_the_law_that_predicts(chinchilla, source):
    # Inside the data and up to 1e6x beyond it: along every compute curve the plan's run is predicted
    # the lowest loss, and the plan and the prediction name the same law.
    fit = chinchilla if source == "chinchilla" else analysis.fit_data(_public("gadre_c4"), bootstrap=20)
    for compute in BUDGETS:
        p = _no_better_run_on_the_curve(fit, compute)
        assert p.law == fit.predict(p.n, p.d).law == "the chinchilla form's law"
    assert "predicts and plans by the chinchilla form's law" in fit.summary()


def test_the_plan_beats_the_rule_of_thumb_under_its_own_prediction(chinchilla):
    # The issue this fixes: the median's loss with the Chinchilla law's allocation predicted the
    # recommended run worse than 20 tokens per parameter. Now nothing on the curve beats the plan.
    compute = 1e22
    p = chinchilla.plan(compute)
    n20 = np.sqrt(compute / (6 * 20))
    assert p.loss <= chinchilla.expected_loss(n20, compute / (6 * n20))


def test_a_tight_E_prior_and_another_delta_move_the_default_prediction(chinchilla):
    # The user's options reach the law that predicts: a prior on E far from the fit's, held tight,
    # and a smaller Huber delta each move the loss predicted 10x beyond the data.
    n, d = 3e10, 6e11                 # about 10x beyond Hoffmann et al.'s largest run
    base = scaling.fit("chinchilla", bootstrap=0)
    prior = scaling.fit("chinchilla", bootstrap=0, E_prior=(1.6, 0.01))
    narrow = scaling.fit("chinchilla", bootstrap=0, delta=1e-4)
    assert prior.law.E == pytest.approx(1.6, abs=0.05)
    moved = [abs(f.predict(n, d).loss / base.predict(n, d).loss - 1) for f in (prior, narrow)]
    assert min(moved) > 1e-3, moved


def _one_budget_table(budgets=(1e18,), seed=0, rounded=True):
    """An IsoFLOP sweep of TRUTH at `budgets`, 12 sizes a budget, 1% scatter, N and D rounded as a
    user's table is (the runs of one budget then differ in 6 N D by parts in 1e9)."""
    runs = isoflop_grid(budgets=budgets, law=TRUTH, per_budget=12, span=4.0)
    data = simulate(TRUTH, runs, noise=0.01, seed=seed)
    n, d = (np.round(v, -3) for v in (data.n, data.d)) if rounded else (data.n, data.d)
    frame = pd.DataFrame({"N": n, "D": d, "loss": data.loss})
    return readers.from_frame(frame, source="one budget", n_col="N", d_col="D", loss_col="loss")


def test_a_fit_of_one_budget_says_so_and_gives_no_interval_beyond_it():
    # One budget, rounded as a CSV is: no exception (the rounded budgets once made two, and an
    # OverflowError); the verdict names the one budget; beyond it the prediction has no interval and
    # says why; inside it, the bootstrap's interval stands.
    fit = analysis.fit_data(_one_budget_table(), bootstrap=20)
    assert fit.data.n_budgets == 1 and fit.one_budget
    assert any("every run lies on one compute budget" in r for r in fit.reasons)
    assert all(c.reason is not None for c in fit.backtest.cuts)          # nothing below any cut to refit
    far = fit.predict(1e9, 2e10)
    assert far.interval is None and "one compute budget: untested there, no interval" in far.note
    assert all(np.isnan(fit.plan(1e19).intervals.loss))                        # no interval of the loss
    inside = fit.predict(fit.data.n_range[0], fit.data.d_range[1])
    assert inside.interval is not None and inside.note == ""


def test_two_budgets_make_no_cut_of_one_budget():
    # Two budgets 10x apart: the cuts below the top leave one budget to refit, which cannot test how
    # the law scales, so none is made and the verdict says the rule is the public tables'.
    data = _one_budget_table(budgets=(1e17, 1e18))
    fit = analysis.fit_data(data, bootstrap=0)
    assert data.n_budgets == 2
    assert all(c.reason is not None for c in fit.backtest.cuts)
    assert any("the runs lie on 2 compute budgets" in r for r in fit.reasons)
