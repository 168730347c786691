"""Compute counted as it is spent: c(N) = 6 kappa N^gamma FLOPs per token, IsoFLOP budgets at equal
real FLOPs, and the allocation solved under C = c(N) D (closed form against a numerical minimiser)."""

import collections
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from scaling.config import SweepConfig, load_config
from scaling.laws.fitting.bootstrap import derived_quantities
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import BESIROGLU
from scaling.laws.optimal.allocation import numerical_optimum, optimum_intervals, plan, rule_of_thumb
from scaling.sweeps.plan import plan as plan_sweep
from scaling.train.compute import FlopsPerToken, expected_optimum, fit_flops_per_token

ROOT = Path(__file__).resolve().parents[2]
TINY_FLOPS = FlopsPerToken("exact", kappa=1.464, gamma=0.9827)      # the demo family's c(N), total N
COUNTS = pytest.mark.parametrize("flops", [FlopsPerToken(), TINY_FLOPS, FlopsPerToken("exact", 3.0, 0.8)],
                                 ids=["6N", "tiny-exact", "steep"])


def law_with(flops):
    return Law(**BESIROGLU.law.to_dict(), flops=flops)


@COUNTS
@pytest.mark.parametrize("compute", [1e12, 1e18, 1e24])
def test_closed_form_optimum_matches_a_numerical_minimiser_and_spends_C(flops, compute):
    law = law_with(flops)
    closed, numeric = plan(law, compute), numerical_optimum(law, compute)
    assert closed.n == pytest.approx(numeric.n, rel=1e-6)
    assert closed.d == pytest.approx(numeric.d, rel=1e-6)
    # The constraint in the law's measure: c(N_opt) D_opt = C.
    assert float(flops.per_token(closed.n)) * closed.d == pytest.approx(compute, rel=1e-9)
    assert closed.loss <= numeric.loss + 1e-12


def test_the_default_count_is_chinchillas_to_the_bit():
    law, c = BESIROGLU.law, 3.3e21
    g = (law.alpha * law.A / (law.beta * law.B)) ** (1 / (law.alpha + law.beta))
    assert law.n_opt(c) == g * (c / 6.0) ** (law.beta / (law.alpha + law.beta))
    assert law.d_opt(c) == (c / 6.0) ** (law.alpha / (law.alpha + law.beta)) / g


@COUNTS
def test_bootstrap_tokens_per_param_is_the_laws_under_the_same_count(flops):
    law = law_with(flops)
    theta = np.array([[math.log(law.E), math.log(law.A), math.log(law.B), law.alpha, law.beta]])
    derived = derived_quantities(theta, 1e20, flops)
    assert derived["tokens_per_param"][0] == pytest.approx(float(law.tokens_per_param(1e20)), rel=1e-10)
    assert derived["a"][0] == pytest.approx(law.a, rel=1e-12)


def test_optimum_intervals_satisfy_the_constraint_per_resample():
    law = law_with(TINY_FLOPS)
    rng = np.random.default_rng(0)
    base = np.array([law.E, law.A, law.B, law.alpha, law.beta])
    resampled = base * np.exp(rng.normal(0, 0.02, (200, 5)))
    iv = optimum_intervals(law, resampled, 1e13)
    assert iv.n[0] < float(law.n_opt(1e13)) < iv.n[1]
    assert iv.d[0] < float(law.d_opt(1e13)) < iv.d[1]


def test_rule_of_thumb_spends_C_under_the_count():
    law = law_with(TINY_FLOPS)
    row = rule_of_thumb(1e15, 20, law=law)
    assert row.d == pytest.approx(20 * row.n)
    assert float(TINY_FLOPS.per_token(row.n)) * row.d == pytest.approx(1e15, rel=1e-12)
    assert expected_optimum(FlopsPerToken(), 6e6, 1.0) == 1000.0


def test_fitted_count_of_the_demo_family():
    # Exact FLOPs per token of the demo's shapes (train/counts.py) against total N: c(N) fits them
    # within a few percent; a count that is exactly 6 N is recognised as Chinchilla's.
    cfg = load_config(ROOT / "configs" / "tiny.yaml")
    runs = plan_sweep(cfg)
    n = np.array([r.n_params_total for r in runs], dtype=float)
    per_token = np.array([r.flops_exact / r.spec.tokens for r in runs])
    fitted = fit_flops_per_token(n, per_token, "exact")
    assert fitted.max_error < 0.05 and 1.1 < float(fitted.per_token(1e5)) / 6e5 < 1.3
    assert fit_flops_per_token(n, 6 * n, "6n_total").is_six_n


def test_isoflop_budgets_are_iso_in_real_flops():
    # The demo's budgets in exact FLOPs: every run of a budget spends it to whole-batch rounding,
    # where 6 N_non-embedding budgets gave the smallest model 1.8x the real FLOPs of the largest.
    raw = yaml.safe_load((ROOT / "configs" / "tiny.yaml").read_text())
    for measure, spread in (("exact", 1.01), ("6n_total", 1.15), ("6n_non_embedding", 2.5)):
        raw["grid"]["isoflop"]["measure"] = measure
        by_budget = collections.defaultdict(list)
        for run in plan_sweep(SweepConfig.model_validate(raw)):
            by_budget[run.spec.budget].append(run)
            assert run.spec.budget_measure == measure
        ratios = [max(r.flops_exact for r in rs) / min(r.flops_exact for r in rs) for rs in by_budget.values()]
        assert max(ratios) < spread, (measure, ratios)
        if measure == "exact":
            for budget, rs in by_budget.items():
                assert all(abs(r.flops("exact") / budget - 1) < 0.01 for r in rs)
        else:
            assert max(ratios) > 1.04       # the other counts are not iso-compute at these shapes


def test_a_6n_non_embedding_design_keeps_the_run_ids_it_had():
    # Ids computed by the code before the measure existed (8b5291c, configs/tiny.yaml of then).
    raw = yaml.safe_load((ROOT / "configs" / "tiny.yaml").read_text())
    then = ((24, 2, 2, 5.7e-3), (32, 2, 2, 5.0e-3), (48, 2, 3, 4.14e-3), (48, 3, 3, 3.78e-3), (64, 3, 4, 3.32e-3),
            (64, 4, 4, 3.09e-3), (80, 4, 5, 2.80e-3), (96, 4, 4, 2.58e-3))
    raw["grid"]["models"] = [dict(zip(("d_model", "n_layers", "n_heads", "lr"), shape)) for shape in then]
    raw["grid"]["isoflop"].update(budgets=[2.5e11, 5e11, 1e12], tokens_per_param=100, measure="6n_non_embedding",
                                  span=3, per_budget=5)
    del raw["train"]["warmup_tokens_per_param"]         # then each run warmed up over 5% of its steps
    ids = [r.run_id for r in plan_sweep(SweepConfig.model_validate(raw))]
    assert ids[:3] == ['d24-l2-h2-D2962.43K-73d50e4e', 'd32-l2-h2-D1673.22K-dd07fcd8', 'd48-l2-h3-D747.52K-79480a7c']
    assert ids[-1] == 'd48-l3-h3-D1993.73K-deb14007'
