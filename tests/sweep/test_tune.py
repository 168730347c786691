"""`scaling tune` on the micro config: real tuning runs in the store, the choice, the outputs, bad input."""

import json
import math

import numpy as np
import pytest
import yaml

from scaling.cli import main
from scaling.config import load_config
from scaling.laws.lr_law import lr_law
from scaling.runs import store
from scaling.sweep.plan import plan
from scaling.sweep.tune import Choice, ShapeTuning, choose, read_tuning, tune, tuning_config
from tests.conftest import MICRO, micro_config

LRS = (3e-3, 1e-2, 3e-2)
TOKENS = 8192


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, cache_dir):
    """`scaling tune` run once on the micro config's 2 shapes at 3 rates: (config path, runs dir, out dir)."""
    root = tmp_path_factory.mktemp("tune")
    config = root / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    runs, out = root / "runs", root / "out"
    code = main(["tune", str(config), "--lrs", ",".join(map(str, LRS)), "--tokens", str(TOKENS),
                 "--runs-dir", str(runs), "--cache-dir", str(cache_dir), "--out", str(out)])
    assert code == 0
    return config, runs, out


def test_one_run_per_shape_and_rate_and_a_second_call_trains_nothing(tuned, cache_dir):
    _, runs, _ = tuned
    table = store.read_runs(runs / "micro-tune")
    assert len(table) == 6 and (table.status == "finished").all() and (table.tokens == TOKENS).all()
    assert sorted(table.groupby(["d_model", "lr"]).size().index) == [(d, lr) for d in (16, 32) for lr in LRS]
    summaries = {p: p.read_bytes() for p in (runs / "micro-tune").glob("*/summary.json")}
    again = tune(micro_config(), LRS, TOKENS, runs, cache_dir)
    assert (again.trained, again.skipped) == (0, 6)
    assert {p: p.read_bytes() for p in (runs / "micro-tune").glob("*/summary.json")} == summaries


def test_the_choice_is_the_best_recorded_loss_or_the_parabola_beside_it(tuned):
    _, runs, out = tuned
    table = store.read_runs(runs / "micro-tune")
    shapes = {s["d_model"]: s for s in json.loads((out / "tune.json").read_text())["shapes"]}
    for d, runs_of_shape in table.groupby("d_model"):
        runs_of_shape = runs_of_shape.sort_values("lr")
        best = int(np.argmin(runs_of_shape.final_val_loss.to_numpy()))
        chosen = shapes[d]
        assert chosen["losses"] == pytest.approx(list(runs_of_shape.final_val_loss))
        if best in (0, len(LRS) - 1):
            assert (chosen["method"], chosen["lr_opt"]) == ("edge", LRS[best])
            assert chosen["edge"] == ("lowest" if best == 0 else "highest")
        else:
            assert chosen["method"] == "parabola" and LRS[best - 1] < chosen["lr_opt"] < LRS[best + 1]
            assert chosen["loss_opt"] <= runs_of_shape.final_val_loss.min()


def test_tune_json_and_the_tuned_config_round_trip(tuned):
    config, runs, out = tuned
    record = json.loads((out / "tune.json").read_text())
    assert (record["tokens"], record["learning_rates"], record["tuning_sweep"]) == (TOKENS, list(LRS), "micro-tune")
    assert record["run_store"] == str(runs / "micro-tune") and record["config"] == str(config)
    tuned_cfg = load_config(out / "micro-tuned.yaml")
    assert tuned_cfg.name == "micro-tuned"  # a store of its own: never mixed with the runs at the old rates
    assert {m.d_model: m.lr for m in tuned_cfg.grid.models} == {s["d_model"]: s["lr_opt"] for s in record["shapes"]}
    original = load_config(config)
    assert tuned_cfg.model_dump(exclude={"name", "grid"}) == original.model_dump(exclude={"name", "grid"})
    assert tuned_cfg.grid.tokens == original.grid.tokens
    assert (out / "micro-tuned.yaml").read_text().startswith("# Learning rates from `scaling tune")
    assert (out / "tune.png").stat().st_size > 10_000 and (out / "tune.svg").exists()


def test_choose_finds_the_vertex_and_says_when_it_cannot():
    lrs = np.geomspace(1e-3, 3e-2, 7)
    bowl = 3.0 + (np.log(lrs) - math.log(5e-3)) ** 2
    vertex = choose(lrs, bowl)
    assert (vertex.lr, vertex.method, vertex.bracket) == (5e-3, "parabola", (lrs[2], lrs[4]))
    assert vertex.loss == pytest.approx(3.0) and vertex.parabola[0] == pytest.approx(1.0)
    assert choose(lrs, bowl[::-1]).method == "parabola"
    falling = 5.0 - np.arange(7) * 0.1
    assert (choose(lrs, falling).edge, choose(lrs, falling).lr) == ("highest", lrs[-1])
    assert choose(lrs, falling[::-1]).edge == "lowest"
    # A diverged run (None) is worse than any: past the best, it leaves the best grid point.
    assert choose(lrs[:3], [4.0, 3.9, None]) == Choice(lrs[1], 3.9, "grid point")
    assert choose(lrs[:3], [4.0, None, 3.9]).edge == "highest"
    assert choose(lrs[:3], [None, None, None]).method == "none"


def test_wsd_tuning_reads_its_branches_not_its_stable_runs(tmp_path):
    cfg = micro_config(train={**MICRO["train"], "schedule": "wsd"})
    tune_cfg = tuning_config(cfg, LRS)
    assert (tune_cfg.name, tune_cfg.grid.tokens) == ("micro-tune", [8192])
    assert sum(run.kind == "stable" for run in plan(tune_cfg)) == 6  # one stable run and one branch per rate
    shapes = read_tuning(cfg, tune_cfg, tmp_path / "no-store-yet")
    assert [s.lrs for s in shapes] == [LRS, LRS]
    assert all(s.statuses == ("incomplete",) * 3 and s.choice.method == "none" for s in shapes)


def test_an_isoflop_design_is_tuned_at_its_smallest_run():
    models = [*MICRO["grid"]["models"], {"d_model": 24, "n_layers": 1, "n_heads": 2}]
    iso = {"models": models, "isoflop": {"budgets": [5e8, 1e9], "tokens_per_param": 1, "span": 40}}
    cfg = micro_config(grid=iso)
    tune_cfg = tuning_config(cfg, LRS)
    assert tune_cfg.grid.tokens == [min(run.spec.tokens for run in plan(cfg))]


def test_retries_are_off_in_the_tuning_sweep():
    tune_cfg = tuning_config(micro_config(train={**MICRO["train"], "retries": 2}), LRS, 1e4)
    assert (tune_cfg.train.retries, tune_cfg.grid.tokens) == (0, [10_000])


def shape(n, lr, method="parabola"):
    return ShapeTuning(16, 1, 2, n, None, LRS, (4.0, 4.0, 4.0), ("finished",) * 3, ("a", "b", "c"),
                       Choice(lr, 4.0, method))


def test_lr_law_fits_the_inside_optima_only():
    shapes = [shape(n, 0.3 * n ** -0.4 * (1 + e)) for n, e in ((1e4, 0.01), (1e5, -0.01), (1e6, 0.02))]
    fitted = lr_law(shapes + [shape(1e7, 1.0, "edge")])
    law = fitted.power
    assert fitted.why is None and len(fitted.inside) == 3 and law.n_points == 3
    assert law.exponent == pytest.approx(-0.4, abs=0.01) and law.ci[0] < -0.4 < law.ci[1]
    assert fitted.to_json()["shapes"] == [s.name for s in fitted.inside] and "from 3 shapes" in fitted.describe()
    fitted = lr_law(shapes[:1] + [shape(1e7, 1.0, "edge")])
    assert fitted.power is None and "a law needs 2 sizes" in fitted.why and fitted.to_json() is None


def test_dry_run_lists_the_runs_and_writes_nothing(tmp_path, capsys):
    config = tmp_path / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    assert main(["tune", str(config), "--lrs", "1e-3,1e-2,3e-2,1e-1", "--dry-run", "--runs-dir", str(tmp_path / "r"),
                 "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "2 shapes x 4 learning rates" in printed and "8,192 tokens each" in printed
    assert printed.count("-D8.192K-") == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["micro.yaml"]


@pytest.mark.parametrize("flags, grid, message", [
    (["--lrs", "1e-3,abc,1e-2"], None, "--lrs '1e-3,abc,1e-2': a learning rate must be"),
    (["--lrs", "1e-3,1e-2,1e-2"], None, "at least 3 distinct rates, got 2"),
    (["--lrs", "0,1e-2,3e-2"], None, "a learning rate must be a positive"),
    (["--tokens", "0"], None, "--tokens must be a positive whole number"),
    (["--tokens", "1e3.5"], None, "--tokens must be"),
    ([], {"models": [], "tokens": [8192]}, "grid.models"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, flags, grid, message):
    config = tmp_path / "micro.yaml"
    config.write_text(yaml.safe_dump({**MICRO, "grid": grid or MICRO["grid"]}))
    code = main(["tune", str(config), *flags, "--runs-dir", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.startswith("scaling tune: error:")
    assert grid is not None or err.count("\n") == 1  # a config's own errors list each key on a line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["micro.yaml"]



def test_tune_json_prints_tune_json_alone(tuned, cache_dir, tmp_path, capsys):
    config, runs, _ = tuned
    capsys.readouterr()
    assert main(["tune", str(config), "--lrs", ",".join(map(str, LRS)), "--tokens", str(TOKENS), "--json",
                 "--runs-dir", str(runs), "--cache-dir", str(cache_dir), "--out", str(tmp_path)]) == 0
    shown = json.loads(capsys.readouterr().out)       # nothing but the JSON on stdout: no line per run
    assert shown == json.loads((tmp_path / "tune.json").read_text())
    assert [s["d_model"] for s in shown["shapes"]] == [16, 32]
