"""What the report draws of the law beyond its data: the forms side by side (their predictions along
compute with their intervals, each form's backtest and residual RMS), the backtest's cuts, and the
hold-out refit at a fraction asked for, which carries the fit's prior on E."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scaling.laws import analysis
from scaling.laws.checks import backtest as bt
from scaling.laws.design.simulate import isoflop_grid, simulate
from scaling.laws.forms.law import Law
from scaling.report.inputs import Inputs
from scaling.report.page import Report

TRUTH = Law(E=1.9, A=400.0, B=1500.0, alpha=0.33, beta=0.30)
BUDGETS = 1e17 * 2.0 ** np.arange(6)


def sweep(seed=0, noise=0.01):
    data = simulate(TRUTH, isoflop_grid(BUDGETS, tokens_per_param=20.0, per_budget=6, span=6.0), noise=noise,
                    seed=seed)
    return replace(data, budgets=np.repeat(BUDGETS, 6))


def test_holdout_refit_at_another_fraction_carries_the_fits_prior_on_E():
    # A strong prior on E far from the runs' own E: the fit's E is the prior's, and so is the E of the
    # report's hold-out refit at a fraction other than the fit's; without the prior it is the runs'.
    data = sweep()
    fit = analysis.fit_data(data, bootstrap=0, backtest=False, forms=False, E_prior=(1.7, 0.002),
                            grid=bt.COARSE_GRID)
    assert fit.law.E == pytest.approx(1.7, abs=0.01)
    check = Report.start(Inputs("sim", fit, data), holdout_fraction=0.3).holdout
    assert check is not None and check is not fit.holdout and check.fraction == 0.3
    assert check.law.E == pytest.approx(1.7, abs=0.01)
    free = Report.start(Inputs("sim", replace(fit, options=replace(fit.options, E_prior=None)), data),
                        holdout_fraction=0.3).holdout
    assert abs(free.law.E - 1.7) > 0.05
