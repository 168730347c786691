"""--json on the commands that print results: the output parses, and holds the command's own
typed result (the plan, the run table), not a re-parse of its text."""

from __future__ import annotations

import json

import pytest
import yaml

from scaling.cli import main
from scaling.laws.results.fit_file import load_fit
from scaling.runs import store
from scaling.sweeps.plan import plan
from tests.conftest import MICRO, micro_config
from tests.hardening.helpers import POINTS


def test_sweep_dry_run_json_is_the_plan_and_writes_nothing(tmp_path, capsys):
    config = tmp_path / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    assert main(["sweep", str(config), "--dry-run", "--json", "--runs-dir", str(tmp_path / "runs")]) == 0
    shown = json.loads(capsys.readouterr().out)
    planned = plan(micro_config())
    assert [r["run_id"] for r in shown["runs"]] == [r.run_id for r in planned]
    assert [r["flops_exact"] for r in shown["runs"]] == [r.flops_exact for r in planned]
    assert shown["train_flops_exact"] == pytest.approx(sum(r.flops_exact for r in planned))
    assert all(r["est_wall_s"] > 0 for r in shown["runs"]) and shown["est_wall_s"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["micro.yaml"]


def test_sweep_json_without_dry_run_is_refused(tmp_path, capsys):
    config = tmp_path / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    assert main(["sweep", str(config), "--json", "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "--json goes with --dry-run" in capsys.readouterr().err


def test_runs_json_is_the_run_table(micro_sweep, capsys):
    _, result = micro_sweep
    assert main(["runs", str(result.sweep_dir), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    table = store.read_runs(result.sweep_dir)
    assert [r["run_id"] for r in shown] == list(table.run_id)
    assert [r["status"] for r in shown] == list(table.status)
    assert [r["final_val_loss"] for r in shown] == pytest.approx(list(table.final_val_loss))


def test_tune_dry_run_json_lists_the_tuning_runs(tmp_path, capsys):
    config = tmp_path / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    assert main(["tune", str(config), "--lrs", "1e-3,1e-2,3e-2", "--dry-run", "--json",
                 "--runs-dir", str(tmp_path / "r")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert len(shown["runs"]) == 2 * 3 and {r["tokens"] for r in shown["runs"]} == {8192}  # the grid's smallest D


@pytest.mark.parametrize("argv", [["cost", "rules", "--params", "1e11"], ["cost", "inference-aware"]])
def test_several_computes_give_the_list_of_what_each_gives_alone(argv, capsys):
    # --compute takes one or more values wherever it is accepted, as plan's does
    each = []
    for c in ("1e21", "1e23"):
        assert main([*argv, "--compute", c, "--json"]) == 0
        each.append(json.loads(capsys.readouterr().out))
    assert main([*argv, "--compute", "1e21", "1e23", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == each
    assert main([*argv, "--compute", "1e21", "1e23"]) == 0
    out = capsys.readouterr().out
    assert out.count("assumptions:") == 1 and ("C = 1.00e21" in out and "C = 1.00e23" in out
                                               or out.count("target loss") == 2), out


def test_plan_names_the_one_law_of_the_allocation_and_the_loss(tmp_path, capsys):
    """One law gives the plan's N and D and every row's loss: a fit that pinned E plans by its fixed-E
    law (beyond the data its backtest's), the minimum of what it predicts; the text and the JSON say
    so alike. (The median of the forms once predicted the loss while the fitted law allocated, and the
    recommended run was predicted worse than 20 tokens per parameter.)"""
    table = tmp_path / "points.csv"
    table.write_text(POINTS)
    assert main(["fit", "--csv", str(table), "--E", "1.5", "--bootstrap", "0", "--out", str(tmp_path / "fit")]) == 0
    capsys.readouterr()
    assert main(["plan", "--fit", str(tmp_path / "fit"), "--compute", "1e21", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    best, *rules = out["plans"][0]["allocations"]
    sources = out["sources"]
    assert sources["allocation"].startswith("the fixed-E form's law (beyond the fitted compute its backtest's law")
    assert sources["loss"].startswith("the fixed-E form's law") and out["form"] == "fixed-E"
    fit = load_fit(tmp_path / "fit")
    plan = fit.plan(1e21)
    assert (best["n"], best["d"], best["loss"]) == pytest.approx((plan.n, plan.d, plan.loss), rel=1e-12)
    assert best["loss"] == pytest.approx(fit.predict(best["n"], best["d"]).loss, rel=1e-12)
    assert all(best["loss"] <= r["loss"] for r in rules)            # the 20-tokens rule and Kaplan's: no lower
    assert main(["plan", "--fit", str(tmp_path / "fit"), "--compute", "1e21"]) == 0
    assert f"law optimum (N, D): {sources['allocation']}; loss (every row's): {sources['loss']}" in \
        capsys.readouterr().out
