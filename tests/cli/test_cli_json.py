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


def test_plan_names_the_law_of_the_allocation_and_the_law_of_the_loss(tmp_path, capsys):
    """By design the default plan allocates by the fitted form's law and predicts every row's loss by
    the median of the forms; the text and the JSON say so alike. A fit that pinned E allocates by its
    fixed-E law: the text called it 'the Chinchilla-form law's optimum', and the JSON named neither."""
    table = tmp_path / "points.csv"
    table.write_text(POINTS)
    assert main(["fit", "--csv", str(table), "--E", "1.5", "--bootstrap", "0", "--out", str(tmp_path / "fit")]) == 0
    capsys.readouterr()
    assert main(["plan", "--fit", str(tmp_path / "fit"), "--compute", "1e21", "--json"]) == 0
    sources = json.loads(capsys.readouterr().out)
    best = sources["plans"][0]["allocations"][0]
    sources = sources["sources"]
    assert sources["allocation"].startswith("the fixed-E form's law fitted to your runs")
    assert sources["loss"].startswith("the median of the forms (the default): the geometric median of chinchilla")
    fit = load_fit(tmp_path / "fit")
    assert (best["n"], best["d"]) == pytest.approx((float(fit.law.n_opt(1e21)), float(fit.law.d_opt(1e21))))
    assert best["loss"] == pytest.approx(fit.predict(best["n"], best["d"]).loss)                  # the median's
    assert abs(best["loss"] / float(fit.law.loss(best["n"], best["d"])) - 1) > 0.01    # not the fixed-E law's
    assert main(["plan", "--fit", str(tmp_path / "fit"), "--compute", "1e21"]) == 0
    assert f"law optimum (N, D): {sources['allocation']}; loss (every row's): {sources['loss']}" in \
        capsys.readouterr().out
