"""WSD schedule with cooldown branches (Hagele et al. 2024), on real micro sweeps: the lr schedule,
branches bitwise equal to the WSD runs they stand for, the store and the fitter, the dry run's
FLOPs, resuming, packing and a stable run that diverges."""

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from scaling.cli import main
from scaling.config import TrainConfig, load_config
from scaling.data.tokens import prepare_tokens
from scaling.errors import UsageError
from scaling.laws.curves.store import curves_from_store
from scaling.laws.fitting import readers
from scaling.runs import store
from scaling.sweeps.driver import run_sweep
from scaling.sweeps.job import token_data
from scaling.sweeps.plan import plan, plan_cost, run_id
from scaling.train.loop import STOP, Interrupted, request_stop, train_run
from scaling.train.schedule import lr_at, schedule_bounds
from tests.conftest import MICRO, micro_config

# The micro grid (2 shapes x budgets of 32, 64 and 128 steps of 256 tokens) with WSD and 25%
# cooldowns: branch points at steps 24, 48 and 96, a shared warmup of 2 steps (5% of 32).
WSD_TRAIN = {**MICRO["train"], "schedule": "wsd", "cooldown_fraction": 0.25}
WSD = {**MICRO, "name": "micro_wsd", "train": WSD_TRAIN}
TIMING = ("elapsed_s", "tokens_per_s")


def wsd_config(**overrides):
    return micro_config(name="micro_wsd", train={**WSD_TRAIN, **overrides.pop("train", {})}, **overrides)


def without_timing(records):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def metrics(run_dir: Path) -> list[dict]:
    return without_timing(store.read_jsonl(run_dir / store.METRICS))


@pytest.fixture(scope="module")
def wsd_sweep(tmp_path_factory, cache_dir):
    cfg = wsd_config()
    return cfg, run_sweep(cfg, tmp_path_factory.mktemp("wsd-runs"), cache_dir)


# ------------------------------------------------------------------------------ the schedule

@pytest.mark.parametrize("shape, halfway", [("linear", 0.5), ("1-sqrt", 1 - math.sqrt(0.5)), ("cosine", 0.5)])
def test_wsd_schedule_warms_up_holds_and_cools_down_to_min_lr_on_the_last_step(shape, halfway):
    train = TrainConfig(schedule="wsd", warmup_fraction=0.1, cooldown_fraction=0.2, cooldown_shape=shape,
                        min_lr_ratio=0.1)
    lr, steps = 3e-3, 200
    lrs = [lr_at(step, steps, lr, train) for step in range(1, steps + 1)]
    assert schedule_bounds(steps, train) == (20, 160)
    assert lrs[:20] == pytest.approx([lr * s / 20 for s in range(1, 21)])  # linear warmup to the peak
    assert lrs[19:160] == [lr] * 141                                       # stable: exactly the peak
    assert all(a > b for a, b in zip(lrs[159:], lrs[160:]))                # cooldown: strictly down
    assert lrs[179] == pytest.approx(0.1 * lr + 0.9 * lr * halfway)        # its shape, halfway
    assert lrs[-1] == 0.1 * lr                                             # exactly, at the last step


def test_budgets_with_a_shared_warmup_follow_one_lr_to_their_branch_points():
    """What makes branching possible: the stable run's lr is every budget's lr up to its branch point."""
    train = TrainConfig(schedule="wsd", warmup_fraction=0.05, cooldown_fraction=0.1)
    stable = [lr_at(s, 1759, 1e-3, train, warmup=12, constant=True) for s in range(1, 1760)]
    for steps in (245, 489, 977, 1954):
        warmup, branch_point = schedule_bounds(steps, train, warmup=12)
        assert (warmup, branch_point) == (12, steps - round(0.1 * steps))
        assert [lr_at(s, steps, 1e-3, train, warmup=12) for s in range(1, branch_point + 1)] == stable[:branch_point]
        assert lr_at(steps, steps, 1e-3, train, warmup=12) == 0.1 * 1e-3


# ------------------------------------------------------------------------------ the sweep and the store

def test_store_has_a_branch_per_point_and_stable_runs_the_fitter_leaves_out(wsd_sweep):
    cfg, result = wsd_sweep
    table = result.table.set_index("run_id")
    stable = table[table.status == "stable"]
    branches = table[table.branch_of.notna()]
    assert len(stable) == 2 and len(branches) == 6 and len(table) == 8
    assert (branches.status == "finished").all() and set(branches.branch_of) == set(stable.index)
    assert sorted(branches.tokens) == sorted(2 * [8192, 16384, 32768])  # D = D_k: the fit sees the budgets
    for branch_id, row in branches.iterrows():
        summary = json.loads((result.sweep_dir / branch_id / store.SUMMARY).read_text())
        steps = row.tokens // 256
        assert summary["schedule"] == "wsd" and summary["branch_step"] == steps - steps // 4
        assert row.branch_tokens == summary["branch_tokens"] == (steps // 4) * 256  # the cooldown only
        records = store.read_jsonl(result.sweep_dir / branch_id / store.METRICS)
        assert records[0]["step"] == 1  # the stable prefix is in the branch's log, on one clock
        assert [r["elapsed_s"] for r in records] == sorted(r["elapsed_s"] for r in records)
        assert summary["wall_s"] < records[-1]["elapsed_s"]  # its own time: the cooldown's
        assert records[-1]["step"] == steps and records[-1]["lr"] == 0.1 * summary["lr"]
        assert records[-1]["val_loss"] == summary["final_val_loss"]
    for stable_id in stable.index:
        summary = json.loads((result.sweep_dir / stable_id / store.SUMMARY).read_text())
        assert summary["branch_points"] == [24, 48, 96] and summary["tokens"] == 96 * 256
        assert sorted(summary["branches"]) == sorted(branches.index[branches.branch_of == stable_id])
        assert all((result.sweep_dir / stable_id / store.branch_checkpoint(s)).exists() for s in (24, 48, 96))
    assert pd_csv_columns(result.sweep_dir) >= {"branch_of", "branch_tokens"}

    data = readers.from_runs(result.sweep_dir)
    assert sorted(data.ids) == sorted(branches.index)
    assert {d.id: d.reason.split(":")[0] for d in data.dropped} == {run_id: "stable" for run_id in stable.index}
    assert all("stable phase of WSD" in d.reason for d in data.dropped)
    assert set(curves_from_store(result.sweep_dir).run_id) == set(branches.index)


def pd_csv_columns(sweep_dir: Path) -> set:
    return set((sweep_dir / store.TABLE).read_text().splitlines()[0].split(","))


@pytest.mark.parametrize("budget", [8192, 32768])
def test_a_branch_is_bitwise_the_wsd_run_it_stands_for(wsd_sweep, cache_dir, tmp_path, budget):
    """A run trained from step 0 to D_k with the WSD schedule (no stable run, no checkpoint) ends with
    the branch's final loss and logs the branch's metrics. 32768: the stable run's last branch point
    is logged only by the stable run, not by the run from step 0."""
    cfg, result = wsd_sweep
    branch = next(r for r in plan(cfg) if r.kind == "branch" and r.spec.model.d_model == 32
                  and r.spec.tokens == budget)
    single = dataclasses.replace(branch.spec, run_id="single", branch_of=None, branch_step=None,
                                 train=branch.spec.train.model_copy(update={"threads": 1}))
    threads = torch.get_num_threads()
    try:
        summary = train_run(single, token_data(prepare_tokens(cfg, cache_dir)), tmp_path)
    finally:
        torch.set_num_threads(threads)
    stored = json.loads((result.sweep_dir / branch.run_id / store.SUMMARY).read_text())
    assert summary["final_val_loss"] == stored["final_val_loss"]  # bitwise
    assert metrics(tmp_path) == metrics(result.sweep_dir / branch.run_id)
    assert stored["branch_tokens"] < stored["tokens"] == summary["tokens"]


def test_a_branch_without_its_checkpoint_trains_from_step_0(wsd_sweep, cache_dir, tmp_path):
    """The stable run ended but its checkpoint at a branch point is gone: the branch trains the whole
    WSD run from step 0, with a warning, and ends as the branch from the checkpoint did."""
    cfg, reference = wsd_sweep
    branch = next(r for r in plan(cfg) if r.kind == "branch" and r.spec.model.d_model == 16
                  and r.spec.tokens == 8192)  # 32 steps, from branch point 24
    sweep_dir = tmp_path / cfg.name
    shutil.copytree(reference.sweep_dir, sweep_dir, ignore=shutil.ignore_patterns(store.LOCK, store.TABLE_LOCK))
    shutil.rmtree(sweep_dir / branch.run_id)
    (sweep_dir / branch.spec.branch_of / store.branch_checkpoint(branch.spec.branch_step)).unlink()

    steps_trained = []

    class Steps:
        def begin(self, jobs): pass

        def started(self, job): pass

        def finished(self, job, summary): pass

        def progress(self, job, done, total, rate):
            steps_trained.append(done // 256)

    with pytest.warns(UserWarning, match=f"{branch.run_id} trains from step 0"):
        result = run_sweep(cfg, tmp_path, cache_dir, reporter=Steps())
    assert [s["run_id"] for s in result.trained] == [branch.run_id]
    assert steps_trained[0] == 1 and steps_trained[-1] == 32  # its first step is step 1, not 25
    summary = result.trained[0]
    assert summary["status"] == "finished" and summary["branch_start_step"] == 0
    assert summary["branch_tokens"] == summary["tokens"] == 32 * 256  # all of it trained here
    want = json.loads((reference.sweep_dir / branch.run_id / store.SUMMARY).read_text())
    assert want["branch_tokens"] == 8 * 256  # the reference trained its cooldown only
    assert summary["final_val_loss"] == want["final_val_loss"]  # bitwise
    assert metrics(sweep_dir / branch.run_id) == metrics(reference.sweep_dir / branch.run_id)


def test_second_sweep_trains_nothing(wsd_sweep, cache_dir):
    cfg, first = wsd_sweep
    summaries = {p: p.read_bytes() for p in first.sweep_dir.glob("*/summary.json")}
    again = run_sweep(cfg, first.sweep_dir.parent, cache_dir)
    assert again.trained == [] and len(again.skipped) == 8
    assert {p: p.read_bytes() for p in first.sweep_dir.glob("*/summary.json")} == summaries


def test_dry_run_prints_the_flops_saved(tmp_path, capsys):
    config = tmp_path / "wsd.yaml"
    config.write_text(yaml.safe_dump(WSD))
    assert main(["sweep", str(config), "--runs-dir", str(tmp_path / "runs"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    cost = plan_cost(plan(wsd_config()))
    # per shape: 96 stable steps + cooldowns of 8, 16, 32 steps, against 32 + 64 + 128 steps
    assert cost["fraction_of_separate"] == pytest.approx((96 + 8 + 16 + 32) / (32 + 64 + 128))
    assert lines[-2].startswith("total  8 runs")
    assert f"{cost['train_flops_exact']:.2e} FLOPs counted exactly" in lines[-2]
    left = f"left   8 of 8 runs to train; none in the store yet: {cost['train_flops_exact']:.2e} FLOPs"
    assert lines[-1].startswith(left)
    saved = next(line for line in lines if "saves" in line)
    assert f"{cost['separate_flops_6nd']:.2e}" in saved and f"saves {cost['saved_flops_6nd']:.2e} FLOP" in saved
    assert "(67.9%)" in saved and not (tmp_path / "runs").exists()


def test_cosine_run_ids_ignore_the_wsd_keys_and_wsd_refuses_retries():
    cosine = micro_config()
    other = micro_config(train={**MICRO["train"], "cooldown_fraction": 0.5, "cooldown_shape": "linear"})
    assert [r.run_id for r in plan(cosine)] == [r.run_id for r in plan(other)]
    shape = cosine.grid.models[0]
    assert run_id(cosine, shape, 8192, 0.01) not in {r.run_id for r in plan(wsd_config())}
    with pytest.raises(UsageError, match="train.retries is not supported"):
        wsd_config(train={"retries": 1})


# ------------------------------------------------------------------------------ resuming, packing, divergence

class StopAt:
    """A reporter that asks the sweep to stop once run `run_id` has logged step `step`."""

    def __init__(self, run_id: str, step: int):
        self.run_id, self.tokens = run_id, step * 256

    def begin(self, jobs): pass

    def started(self, job): pass

    def finished(self, job, summary): pass

    def progress(self, job, done, total, rate):
        if job.spec.run_id == self.run_id and done >= self.tokens:
            request_stop()


def assert_same_store(got: Path, want: Path) -> None:
    g, w = store.read_runs(got).set_index("run_id"), store.read_runs(want).set_index("run_id")
    assert g.status.to_dict() == w.status.to_dict()
    assert g.final_val_loss.to_dict() == w.final_val_loss.to_dict()
    for one in w.index:
        assert metrics(got / one) == metrics(want / one), one


def test_stopped_stable_run_and_branch_resume_to_the_same_store(wsd_sweep, cache_dir, tmp_path):
    cfg, reference = wsd_sweep
    stable = next(r for r in plan(cfg) if r.kind == "stable" and r.spec.model.d_model == 32)
    branch = next(r for r in plan(cfg) if r.spec.branch_of == stable.run_id and r.spec.tokens == 32768)
    try:
        with pytest.raises(Interrupted):  # between branch points 24 and 48
            run_sweep(cfg, tmp_path, cache_dir, reporter=StopAt(stable.run_id, 30))
        STOP.clear()
        assert (tmp_path / cfg.name / stable.run_id / store.branch_checkpoint(24)).exists()
        assert not (tmp_path / cfg.name / stable.run_id / store.branch_checkpoint(48)).exists()
        with pytest.raises(Interrupted):  # in the cooldown of the branch from step 96
            run_sweep(cfg, tmp_path, cache_dir, reporter=StopAt(branch.run_id, 110))
        STOP.clear()
        assert torch.load(tmp_path / cfg.name / branch.run_id / store.CHECKPOINT, weights_only=True)["step"] == 110
        run_sweep(cfg, tmp_path, cache_dir)
    finally:
        STOP.clear()
    assert_same_store(tmp_path / cfg.name, reference.sweep_dir)


def test_packed_branches_wait_for_their_checkpoints_and_match(wsd_sweep, cache_dir, tmp_path):
    """Two worker processes: branches start while stable runs train, and every result is the same."""
    cfg, reference = wsd_sweep
    result = run_sweep(wsd_config(executor={"workers": 2}), tmp_path, cache_dir)
    assert len(result.trained) == 8
    assert_same_store(result.sweep_dir, reference.sweep_dir)


def test_a_diverged_stable_run_keeps_its_earlier_branches(cache_dir, tmp_path, monkeypatch):
    cfg = wsd_config(grid={**MICRO["grid"], "models": MICRO["grid"]["models"][:1]})
    stable = next(r for r in plan(cfg) if r.kind == "stable")
    monkeypatch.setenv("SCALING_FAULT", f"nan_at={stable.run_id}:60")  # between branch points 48 and 96
    table = run_sweep(cfg, tmp_path, cache_dir).table.set_index("run_id")
    assert table.status[stable.run_id] == "diverged"
    branches = table[table.branch_of == stable.run_id]
    assert sorted(branches.tokens[branches.status == "finished"]) == [8192, 16384]
    late = branches[branches.status == "diverged"]
    assert len(late) == 1 and "diverged before this branch's branch point (step 96)" in late.reason.iloc[0]
    assert run_sweep(cfg, tmp_path, cache_dir).trained == []


def test_the_published_wsd_saving_is_what_the_plan_costs():
    # README and docs/config.md quote configs/tiny_wsd.yaml's cost: 57.9% of the cosine grid's
    # FLOPs at f = 0.1 (2.01e13 against 3.46e13), and 62.6% at f = 0.2. Read from the plan, not typed in.
    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "tiny_wsd.yaml")
    cost = plan_cost(plan(cfg))
    assert f"{100 * cost['fraction_of_separate']:.1f}%" == "57.9%"
    assert f"{cost['train_flops_6nd']:.3g}" == "2.01e+13" and f"{cost['separate_flops_6nd']:.3g}" == "3.46e+13"
    wider = cfg.model_copy(update={"train": cfg.train.model_copy(update={"cooldown_fraction": 0.2})})
    assert f"{100 * plan_cost(plan(wider))['fraction_of_separate']:.1f}%" == "62.6%"
