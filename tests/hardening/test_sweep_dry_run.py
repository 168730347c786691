"""Issue 53, item 8: `scaling sweep --dry-run` said a run "resumes from a checkpoint" that was junk,
a FIFO or a folder, and the sweep then trained it from step 0. The dry run says what the sweep does."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from scaling.cli import main
from scaling.runs import store
from scaling.sweeps.driver import run_sweep
from scaling.sweeps.plan import plan
from tests.conftest import MICRO, MICRO_RUNS


def junk(path):
    path.write_bytes(b"not a checkpoint\n" * 10)


def folder(path):
    path.mkdir()
    (path / "data.pkl").write_bytes(b"")


CHECKPOINTS = {"junk": junk, "fifo": os.mkfifo, "folder": folder, "empty": lambda p: p.write_bytes(b"")}


@pytest.fixture
def interrupted(micro_sweep, tmp_path):
    """A copy of the micro sweep's store whose 128-step run was killed before its summary."""
    cfg, result = micro_sweep
    sweep_dir = tmp_path / "runs" / "micro"
    shutil.copytree(result.sweep_dir, sweep_dir)
    cut = next(r for r in plan(cfg) if (r.spec.model.d_model, r.spec.tokens) == (16, 32768))
    (sweep_dir / cut.run_id / store.SUMMARY).unlink()
    (sweep_dir / cut.run_id / store.CHECKPOINT).unlink()
    return sweep_dir, cut


def dry_run(sweep_dir, capsys, *flags) -> str:
    config = sweep_dir.parents[1] / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    assert main(["sweep", str(config), "--runs-dir", str(sweep_dir.parent), "--dry-run", *flags]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("kind", CHECKPOINTS)
def test_a_dry_run_says_an_unreadable_checkpoint_is_trained_again(interrupted, capsys, kind):
    sweep_dir, cut = interrupted
    CHECKPOINTS[kind](sweep_dir / cut.run_id / store.CHECKPOINT)
    shown = json.loads(dry_run(sweep_dir, capsys, "--json"))
    run = next(r for r in shown["runs"] if r["run_id"] == cut.run_id)
    assert run["status"] == "would train" and run["resume_step"] is None and shown["runs_resumed"] == 0
    assert run["est_wall_s"] > 0
    left = dry_run(sweep_dir, capsys).strip().splitlines()[-1]
    assert left.startswith(f"left   1 of {MICRO_RUNS} runs to train (1 with a checkpoint that cannot be read, "
                           f"trained again from step 0: {cut.run_id}: "), left
    assert "resumes" not in left


def test_the_sweep_does_what_its_dry_run_said(micro_sweep, interrupted, capsys, cache_dir):
    cfg, _ = micro_sweep
    sweep_dir, cut = interrupted
    junk(sweep_dir / cut.run_id / store.CHECKPOINT)
    assert "trained again from step 0" in dry_run(sweep_dir, capsys)
    with pytest.warns(UserWarning, match="unusable checkpoint"):
        run_sweep(cfg, sweep_dir.parent, cache_dir)
    assert (sweep_dir / cut.run_id / f"{store.CHECKPOINT}.unusable").read_bytes().startswith(b"not a checkpoint")
    steps = [r["step"] for r in store.read_jsonl(sweep_dir / cut.run_id / store.METRICS)]
    assert steps == sorted(steps) and store.read_summary(sweep_dir / cut.run_id)["status"] == "finished"


def test_a_readable_checkpoint_still_resumes(micro_sweep, tmp_path, capsys):
    _, result = micro_sweep
    sweep_dir = tmp_path / "runs" / "micro"
    shutil.copytree(result.sweep_dir, sweep_dir)
    cut = next(p.parent for p in sweep_dir.glob(f"*/{store.CHECKPOINT}"))
    (cut / store.SUMMARY).unlink()
    assert "(1 resumes from a checkpoint)" in dry_run(sweep_dir, capsys).strip().splitlines()[-1]
