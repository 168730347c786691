"""IsoFLOP designs: the sweep picks, per compute budget, the shapes near the expected optimum and
trains each on D = C / 6N; the budgets are recorded and Approach 2 groups by them."""

import math

import pytest
import yaml

from scaling.cli import main
from scaling.errors import UsageError
from scaling.laws import analysis, fitdata
from scaling.sweep.driver import run_sweep
from scaling.sweep.plan import plan
from tests.conftest import MICRO, micro_config

MODELS = [{"d_model": 16, "n_layers": 1, "n_heads": 2}, {"d_model": 16, "n_layers": 2, "n_heads": 2},
          {"d_model": 32, "n_layers": 1, "n_heads": 2}, {"d_model": 32, "n_layers": 2, "n_heads": 2}]
DESIGN = {"budgets": [5e8, 1.5e9], "tokens_per_param": 1, "span": 8}


def isoflop_config(**design):
    return micro_config(name="iso", grid={"models": MODELS, "isoflop": {**DESIGN, **design}})


def test_each_budget_gets_the_shapes_near_its_optimum_on_d_equal_c_over_6n():
    cfg = isoflop_config(per_budget=3)
    runs = plan(cfg)
    batch = cfg.train.batch_tokens
    for c in DESIGN["budgets"]:
        mine = [r for r in runs if r.spec.budget == c]
        n_opt = math.sqrt(c / 6.0)                           # tokens_per_param 1
        assert 3 == len(mine)                                # per_budget caps the 4 in range
        for r in mine:
            n = r.n_params_non_embedding
            assert abs(math.log(n / n_opt)) <= math.log(8)
            assert r.spec.tokens % batch == 0 and abs(r.spec.tokens - c / (6 * n)) <= batch / 2
        # the ones kept are the nearest to the optimum in log N
        kept = {r.n_params_non_embedding for r in mine}
        every = {r.n_params_non_embedding for r in plan(isoflop_config(per_budget=4)) if r.spec.budget == c}
        dropped = every - kept
        assert all(abs(math.log(d / n_opt)) >= max(abs(math.log(k / n_opt)) for k in kept) for d in dropped)


def test_a_budget_the_family_cannot_bracket_is_refused_and_designs_are_exclusive():
    with pytest.raises(UsageError, match="budget 1e\\+15 FLOPs has 0 model"):
        plan(isoflop_config(budgets=[5e8, 1e15]))
    for grid in ({"models": MODELS}, {"models": MODELS, "tokens": [8192], "isoflop": DESIGN}):
        with pytest.raises(UsageError, match="give grid.tokens .* or grid.isoflop"):
            micro_config(grid=grid)
    with pytest.raises(UsageError, match="needs grid.tokens"):
        micro_config(grid={"models": MODELS, "isoflop": DESIGN}, train={"schedule": "wsd", "batch_tokens": 256})


def test_an_isoflop_sweep_records_its_budgets_and_approach_2_groups_by_them(tmp_path, cache_dir, capsys):
    path = tmp_path / "iso.yaml"
    path.write_text(yaml.safe_dump({**MICRO, "name": "iso", "grid": {"models": MODELS, "isoflop": DESIGN}}))
    assert main(["sweep", str(path), "--dry-run", "--runs-dir", str(tmp_path)]) == 0
    dry = capsys.readouterr().out
    assert "budget C = 5e+08 FLOPs: expected optimum N = 9.13K" in dry and "D/N" in dry
    run_sweep(isoflop_config(), tmp_path, cache_dir=cache_dir)
    data = fitdata.from_runs(tmp_path / "iso")
    assert sorted(set(data.budgets)) == DESIGN["budgets"]
    fit = analysis.fit_data(data, bootstrap=0)
    assert fit.approaches["approach_2"]["grouping"].startswith("given budgets (2)")
