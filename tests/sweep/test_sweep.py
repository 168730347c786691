"""The sweep runner on a real micro sweep: store layout, idempotence, dry runs, kills and bad configs."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import scaling as scaling_api
from scaling.cli import main
from scaling.runs import store
from scaling.sweeps.driver import run_sweep
from scaling.sweeps.estimates import estimate_walls, makespan
from scaling.sweeps.packing import ASSUMED_FLOPS
from scaling.sweeps.plan import plan, retry
from tests.conftest import MICRO, MICRO_RUNS, micro_config

SUMMARY_KEYS = {"status", "n_params_total", "n_params_non_embedding", "tokens", "flops_6nd", "flops_exact",
                "final_val_loss", "final_val_bpb", "epochs", "wall_s", "seed"}
METRIC_KEYS = {"step", "tokens", "train_loss", "lr", "elapsed_s", "tokens_per_s"}


def write_config(path: Path, **overrides) -> Path:
    path.write_text(yaml.safe_dump({**MICRO, **overrides}))
    return path


def scaling(*args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "scaling", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, **kw)


def test_store_layout(micro_sweep):
    cfg, result = micro_sweep
    assert len(result.trained) == MICRO_RUNS and (result.table.status == "finished").all()
    table = pd.read_csv(result.sweep_dir / store.TABLE)
    assert sorted(table.run_id) == sorted(run.run_id for run in plan(cfg))
    for run_dir in store.run_dirs(result.sweep_dir):
        summary = json.loads((run_dir / store.SUMMARY).read_text())
        assert SUMMARY_KEYS <= set(summary)
        assert yaml.safe_load((run_dir / store.CONFIG).read_text())["run_id"] == run_dir.name
        records = store.read_jsonl(run_dir / store.METRICS)
        assert all(METRIC_KEYS <= set(r) for r in records)
        assert [r["step"] for r in records] == sorted({r["step"] for r in records})
        assert records[-1]["val_loss"] == summary["final_val_loss"]
        assert summary["flops_6nd"] == 6 * summary["n_params_non_embedding"] * summary["tokens"]


def test_second_invocation_trains_nothing(micro_sweep, cache_dir):
    cfg, first = micro_sweep
    summaries = {p: p.read_bytes() for p in first.sweep_dir.glob("*/summary.json")}
    again = run_sweep(cfg, first.sweep_dir.parent, cache_dir)
    assert again.trained == [] and len(again.skipped) == MICRO_RUNS
    assert scaling_api.sweep(cfg, first.sweep_dir.parent, cache_dir=cache_dir).trained == []   # the same call
    assert {p: p.read_bytes() for p in first.sweep_dir.glob("*/summary.json")} == summaries


def test_every_run_learns(micro_sweep):
    _, result = micro_sweep
    t = result.table
    assert (t.final_val_loss < 5.5).all()  # below ln(320) = 5.77, the uniform guess: they learned


def test_dry_run_prints_plan_and_writes_nothing(tmp_path):
    config = write_config(tmp_path / "micro.yaml")
    done = scaling("sweep", config, "--runs-dir", tmp_path / "runs", "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-2].startswith(f"total  {MICRO_RUNS} runs") and " FLOPs counted exactly " in lines[-2]
    assert lines[-1].startswith(f"left   {MICRO_RUNS} of {MICRO_RUNS} runs to train; none in the store yet: ")
    assert sum(run_id in done.stdout for run_id in (r.run_id for r in plan(micro_config()))) == MICRO_RUNS
    assert not (tmp_path / "runs").exists()


def test_wall_estimates_use_each_shapes_measured_speed(micro_sweep, tmp_path):
    cfg, result = micro_sweep
    planned = plan(cfg)
    summaries = [json.loads(p.read_text()) for p in result.sweep_dir.glob("*/summary.json")]
    for d_model in {s["d_model"] for s in summaries}:  # each shape's median FLOP/s, from the summaries
        rate = np.median([s["flops_exact"] / s["wall_s"] for s in summaries if s["d_model"] == d_model])
        walls, basis = estimate_walls([r for r in planned if r.spec.model.d_model == d_model], result.sweep_dir)
        runs = [r for r in planned if r.spec.model.d_model == d_model]
        assert walls == pytest.approx([r.flops_exact / rate for r in runs], rel=1e-9)
        assert f"{MICRO_RUNS} finished runs of this store" in basis
    walls, basis = estimate_walls(planned, tmp_path / "empty")
    assert walls == [r.flops_exact / ASSUMED_FLOPS for r in planned] and "assumed" in basis


def dry_run_of(store_root: Path, capsys, *flags: str, **overrides) -> str:
    config = write_config(store_root.parent / "micro.yaml", **overrides)
    assert main(["sweep", str(config), "--runs-dir", str(store_root), "--dry-run", *flags]) == 0
    return capsys.readouterr().out


def test_dry_run_of_a_finished_store_reuses_every_run_and_estimates_nothing(micro_sweep, tmp_path, capsys):
    _, result = micro_sweep
    shutil.copytree(result.sweep_dir, tmp_path / "runs" / "micro")
    lines = dry_run_of(tmp_path / "runs", capsys).strip().splitlines()
    assert lines[-1] == (f"left   0 of {MICRO_RUNS} runs to train; {MICRO_RUNS} ended in the store, reused "
                         f"({MICRO_RUNS} finished): est. wall 0 s, nothing to train")
    assert sum(line.split()[-2:] == ["finished", "-"] for line in lines) == MICRO_RUNS
    shown = json.loads(dry_run_of(tmp_path / "runs", capsys, "--json"))
    assert (shown["runs_reused"], shown["runs_to_train"], shown["runs_resumed"]) == (MICRO_RUNS, 0, 0)
    assert shown["est_wall_s"] == 0 and shown["train_flops_exact_left"] == 0
    assert all(r["status"] == "finished" and r["est_wall_s"] == 0 for r in shown["runs"])


def test_dry_run_counts_only_the_runs_left_and_the_sweep_trains_just_those(micro_sweep, tmp_path, capsys, cache_dir):
    import torch

    cfg, result = micro_sweep
    sweep_dir = tmp_path / "runs" / "micro"
    shutil.copytree(result.sweep_dir, sweep_dir)
    planned = {(r.spec.model.d_model, r.spec.tokens): r for r in plan(cfg)}
    gone, cut = planned[(16, 8192)], planned[(16, 32768)]      # 32 steps; 128 steps, a checkpoint every 40
    shutil.rmtree(sweep_dir / gone.run_id)                     # never started: trains from step 0
    (sweep_dir / cut.run_id / store.SUMMARY).unlink()          # killed before its summary: resumes
    shown = json.loads(dry_run_of(tmp_path / "runs", capsys, "--json"))
    runs = {r["run_id"]: r for r in shown["runs"]}
    assert runs[gone.run_id]["status"] == "would train" and runs[cut.run_id]["status"] == "would resume"
    # The step the dry run reads from the log is the checkpoint's own (torch reads it here).
    checkpoint = torch.load(sweep_dir / cut.run_id / store.CHECKPOINT, weights_only=True)
    assert runs[cut.run_id]["resume_step"] == checkpoint["step"] == 120
    walls, _ = estimate_walls([gone, cut], sweep_dir)
    assert runs[gone.run_id]["est_wall_s"] == pytest.approx(walls[0])
    assert runs[cut.run_id]["est_wall_s"] == pytest.approx(walls[1] * (128 - 120) / 128)
    assert shown["train_flops_exact_left"] == pytest.approx(gone.flops_exact + cut.flops_exact * 8 / 128)
    assert walls[0] <= shown["est_wall_s"] <= walls[0] + walls[1] * 8 / 128
    assert (shown["runs_reused"], shown["runs_to_train"], shown["runs_resumed"]) == (MICRO_RUNS - 2, 2, 1)
    assert all(r["status"] == "finished" and r["est_wall_s"] == 0 for r in runs.values()
               if r["run_id"] not in (gone.run_id, cut.run_id))
    assert dry_run_of(tmp_path / "runs", capsys).strip().splitlines()[-1].startswith(
        f"left   2 of {MICRO_RUNS} runs to train (1 resumes from a checkpoint); {MICRO_RUNS - 2} ended in the "
        f"store, reused ({MICRO_RUNS - 2} finished): ")
    # The sweep trains exactly the runs the dry run listed, and reuses the others.
    again = run_sweep(cfg, tmp_path / "runs", cache_dir)
    assert sorted(s["run_id"] for s in again.trained) == sorted([gone.run_id, cut.run_id])
    assert len(again.skipped) == MICRO_RUNS - 2


def test_dry_run_lists_a_diverged_run_as_ended_and_its_retry_as_left(micro_sweep, tmp_path, capsys):
    cfg, result = micro_sweep
    sweep_dir = tmp_path / "runs" / "micro"
    shutil.copytree(result.sweep_dir, sweep_dir)
    run = plan(cfg)[0]
    path = sweep_dir / run.run_id / store.SUMMARY
    path.write_text(json.dumps({**json.loads(path.read_text()), "status": "diverged"}))
    shown = json.loads(dry_run_of(tmp_path / "runs", capsys, "--json", train={**MICRO["train"], "retries": 1}))
    statuses = {r["run_id"]: r["status"] for r in shown["runs"]}
    again = retry(micro_config(train={**MICRO["train"], "retries": 1}), run, {"status": "diverged"})
    assert len(statuses) == MICRO_RUNS + 1 and statuses[run.run_id] == "diverged"
    assert statuses[again.run_id] == "would train" and shown["runs_to_train"] == 1
    assert shown["est_wall_s"] > 0 and shown["runs_reused"] == MICRO_RUNS
    last = dry_run_of(tmp_path / "runs", capsys, train={**MICRO["train"], "retries": 1}).strip().splitlines()[-1]
    assert last.startswith(f"left   1 of {MICRO_RUNS + 1} runs to train; {MICRO_RUNS} ended in the store, reused "
                           f"({MICRO_RUNS - 1} finished, 1 diverged): ")


# How each run is logged, checkpointed and executed: none of it changes what a run computes, so
# none of it may change a run id (a sweep resumed with other settings must find its runs).
EXECUTION = [
    ("train", {"log_interval": 3}), ("train", {"eval_interval": 7}), ("train", {"checkpoint_interval": 11}),
    ("train", {"threads": 2}), ("train", {"device": "cpu"}), ("train", {"device": "cuda"}),
    ("train", {"compile": True}), ("train", {"divergence_factor": 9.0}),
    ("executor", {"workers": 3}), ("executor", {"threads_per_run": 2}), ("executor", {"runs_per_gpu": 1}),
]


def with_settings(changes, **base):
    """The micro config (or `base`'s sections) with each (section, settings) of `changes` applied."""
    sections = {"train": {**MICRO["train"], **base.pop("train", {})}, "executor": base.pop("executor", {})}
    for section, settings in changes:
        sections[section] = {**sections[section], **settings}
    return micro_config(**sections, **base)


@pytest.mark.parametrize("section, settings", EXECUTION, ids=lambda x: x if isinstance(x, str) else repr(x))
def test_run_ids_ignore_cadence_threads_and_device(section, settings):
    ids = [r.run_id for r in plan(micro_config())]
    assert [r.run_id for r in plan(with_settings([(section, settings)]))] == ids
    wsd = {"schedule": "wsd", "cooldown_fraction": 0.25}
    assert ([r.run_id for r in plan(with_settings([(section, settings)], train=wsd))]
            == [r.run_id for r in plan(with_settings([], train=wsd))])


def test_run_ids_follow_what_a_run_computes():
    """The other side of the promise: settings that change the computation change every id."""
    ids = {r.run_id for r in plan(micro_config())}
    for changes in ([("train", {"lr": 5e-3})], [("train", {"weight_decay": 0.0})], [("train", {"beta2": 0.99})],
                    [("train", {"warmup_tokens_per_param": 1.0})]):
        assert not {r.run_id for r in plan(with_settings(changes))} & ids, changes
    assert not {r.run_id for r in plan(micro_config(seed=1))} & ids


def test_warmup_per_parameter_is_one_warmup_per_shape_whatever_the_budget():
    """warmup_tokens_per_param: ceil(k N_total / batch) steps for every run of a shape (below its
    last step), in cosine and WSD runs alike; unset, runs keep warmup_fraction and their ids."""
    for run in plan(with_settings([("train", {"warmup_tokens_per_param": 2.0})])):
        expect = min(-(-2 * run.n_params_total // MICRO["train"]["batch_tokens"]), run.spec.steps - 1)
        assert run.spec.schedule()[0] == expect, run.run_id
    wsd = {"schedule": "wsd", "cooldown_fraction": 0.25}
    warmups = {}
    for run in plan(with_settings([("train", {**wsd, "warmup_tokens_per_param": 2.0})], train=wsd)):
        warmups.setdefault(run.shape.d_model, set()).add(run.spec.warmup)
    assert all(len(w) == 1 for w in warmups.values())   # the stable run and its branches share it
    assert "warmup_tokens_per_param" not in micro_config().train.model_dump()
    assert all(r.spec.warmup is None for r in plan(micro_config()))


def test_a_sweep_with_other_cadence_threads_and_device_finds_its_runs(micro_sweep, tmp_path, cache_dir):
    """The finished micro store, swept again with every execution setting changed: nothing to train."""
    _, first = micro_sweep
    shutil.copytree(first.sweep_dir, tmp_path / "micro", ignore=shutil.ignore_patterns(store.LOCK, store.TABLE_LOCK))
    summaries = {p.parent.name: p.read_bytes() for p in (tmp_path / "micro").glob(f"*/{store.SUMMARY}")}
    changed = with_settings([c for c in EXECUTION if c[1] not in ({"device": "cuda"}, {"compile": True})])
    assert sorted(r.run_id for r in plan(changed)) == sorted(summaries)
    again = run_sweep(changed, tmp_path, cache_dir)
    assert again.trained == [] and sorted(s["run_id"] for s in again.skipped) == sorted(summaries)
    assert {p.parent.name: p.read_bytes() for p in (tmp_path / "micro").glob(f"*/{store.SUMMARY}")} == summaries


def test_makespan_hands_each_run_to_the_first_free_worker():
    assert makespan([5, 4, 3, 3, 3], 2) == 10  # 5 | 4; 3 -> 7; 3 -> 8; 3 -> 10
    assert makespan([4, 1, 1], 2) == 4 and makespan([1, 1, 4], 2) == 5  # smallest first idles a worker
    assert makespan([5, 4, 3], 1) == 12 and makespan([5, 4, 3], 5) == 5


@pytest.mark.parametrize("override, expected", [
    ({"grid": {"models": [{"d_model": 30, "n_layers": 1, "n_heads": 4}], "tokens": [1000]}},
     "grid.models[0]: d_model 30 is not divisible by n_heads 4"),
    ({"grid": {"models": [{"d_model": 32, "n_layers": 1, "n_heads": 4}], "tokens": [-1000]}},
     "grid.tokens[0]"),
    ({"trian": {}}, "trian: unknown key"),
])
def test_bad_config_exits_2_and_writes_nothing(tmp_path, override, expected):
    config = write_config(tmp_path / "bad.yaml", **override)
    done = scaling("sweep", config, "--runs-dir", tmp_path / "runs")
    assert done.returncode == 2
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_killed_sweep_resumes_and_matches(micro_sweep, tmp_path, cache_dir):
    """SIGKILL mid-sweep (after a run finished and the next has a checkpoint), then restart."""
    _, reference = micro_sweep
    config = write_config(tmp_path / "micro.yaml")
    runs = tmp_path / "runs"
    sweep = subprocess.Popen([sys.executable, "-m", "scaling", "sweep", config, "--runs-dir", runs,
                              "--cache-dir", cache_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and sweep.poll() is None:
        dirs = store.run_dirs(runs / "micro") if (runs / "micro").exists() else []
        finished = [d for d in dirs if (d / store.SUMMARY).exists()]
        midway = [d for d in dirs if (d / store.CHECKPOINT).exists() and not (d / store.SUMMARY).exists()]
        if finished and midway:
            break
        time.sleep(0.05)
    assert sweep.poll() is None, "the sweep ended before it could be killed mid-run"
    sweep.send_signal(signal.SIGKILL)
    sweep.wait()
    before = {d.name: (d / store.SUMMARY).read_bytes() for d in finished}

    done = scaling("sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir)
    assert done.returncode == 0, done.stderr
    after = store.read_runs(runs / "micro").set_index("run_id")
    assert {name: (runs / "micro" / name / store.SUMMARY).read_bytes() for name in before} == before
    expected = reference.table.set_index("run_id")
    assert (after.status == "finished").all()
    assert after.final_val_loss.to_dict() == expected.final_val_loss.to_dict()
