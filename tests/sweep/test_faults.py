"""Fault injection: sweeps killed at named points and at random times, stopped by signals, run two
at once, fed a NaN loss, a full disk and damaged files. Each test ends by comparing the store
with a clean run's: every summary and metrics record (timing fields aside), runs.csv (wall time
aside) and the fitted law must be identical, and runs that had finished must not be touched.

Killed sweeps run in children of a multiprocessing fork server that has imported torch and the
package already, so a kill point costs a fork rather than an interpreter start; the SIGKILL comes
from the child itself, at the point named by $SCALING_FAULT (scaling.runs.faults). Signals, the
concurrent sweeps and the file-size limit use real `python -m scaling sweep` processes.
"""

import csv
import errno
import math
import multiprocessing
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

from scaling.cli import main
from scaling.config import load_config
from scaling.laws.fitting import readers
from scaling.laws.fitting.fit import fit_law
from scaling.runs import faults, locks, store
from scaling.sweeps.driver import run_sweep
from scaling.sweeps.plan import plan
from tests.conftest import MICRO

# The micro sweep with smaller budgets and frequent checkpoints: 6 runs of 8, 16 and 32 steps,
# 16 checkpoints, 112 steps in all, a few seconds of training.
KILL = {**MICRO, "name": "kill",
        "grid": {"models": MICRO["grid"]["models"], "tokens": [2048, 4096, 8192]},
        "train": {**MICRO["train"], "eval_interval": 8, "log_interval": 4, "checkpoint_interval": 6}}
KILL_RUNS = 6
TIMING = ("wall_s", "tokens_per_s", "elapsed_s")

# (site, count) of scaling.runs.faults: where the sweep SIGKILLs itself. Counts are over the process:
# a fresh sweep writes 6 config.yaml, then trains the runs longest first (32, 16 and 8 steps at d32,
# then at d16), writing each run's summary.json and then runs.csv, and runs.csv once more at the end.
KILL_POINTS = [
    "step:1",                     # the first step: no checkpoint yet, the run starts again
    "step:7",                     # just after the first checkpoint (step 6)
    "step:32",                    # the first run's last step, before its final evaluation
    "step:44",                    # run 2 at step 12, before that step's checkpoint
    "step:72",                    # run 4 (32 steps) at step 16
    "step:112",                   # the very last step of the sweep
    "append:metrics.jsonl:1",     # half of the first metrics line written: a torn line
    "append:metrics.jsonl:12",    # a torn line in the middle of run 2 (its step 8)
    "write:checkpoint.pt:1",      # half a checkpoint in its temporary file
    "rename:checkpoint.pt:2",     # a complete temporary checkpoint, not yet renamed
    "renamed:checkpoint.pt:3",    # renamed, folder not yet synced
    "write:checkpoint.pt:9",      # the first checkpoint of the second shape
    "write:summary.json:1",       # half of the first summary
    "rename:summary.json:3",      # third summary complete, not renamed
    "renamed:summary.json:6",     # the last summary in place, runs.csv not yet rewritten
    "write:runs.csv:1",           # half of the first runs.csv
    "rename:runs.csv:2",
    "renamed:runs.csv:7",         # the final runs.csv in place: only the exit is left
    "write:config.yaml:1",        # half of the first run's config.yaml
    "rename:config.yaml:4",
]


def kill_config(path: Path, **overrides) -> Path:
    path.write_text(yaml.safe_dump({**KILL, **overrides}))
    return path


def without_timing(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TIMING}


def snapshot(sweep_dir: Path) -> dict:
    """What no fault may change: each run's summary and metrics, runs.csv and the fitted law."""
    runs = {}
    for run_dir in store.run_dirs(sweep_dir):
        summary = store.read_summary(run_dir)
        runs[run_dir.name] = (summary and without_timing(summary),
                              [without_timing(r) for r in store.read_jsonl(run_dir / store.METRICS)])
    with open(sweep_dir / store.TABLE, newline="") as f:
        table = sorted((without_timing(row) for row in csv.DictReader(f)), key=lambda row: row["run_id"])
    data = readers.from_runs(sweep_dir)
    return {"runs": runs, "table": table, "digest": data.digest,
            "fit": fit_law(data.n, data.d, data.loss).law.to_dict()}


def summaries(sweep_dir: Path) -> dict:
    return {p.parent.name: p.read_bytes() for p in sweep_dir.glob(f"*/{store.SUMMARY}")}


@pytest.fixture(scope="module")
def clean_store(tmp_path_factory, cache_dir) -> Path:
    """The kill sweep trained without faults."""
    runs = tmp_path_factory.mktemp("clean")
    result = run_sweep(load_config(kill_config(tmp_path_factory.mktemp("cfg") / "kill.yaml")), runs, cache_dir)
    assert len(result.trained) == KILL_RUNS and (result.table.status == "finished").all()
    return result.sweep_dir


@pytest.fixture(scope="module")
def clean(clean_store) -> dict:
    """The store every faulty run must end up equal to."""
    return snapshot(clean_store)


def restart(config: Path, runs: Path, cache_dir: Path):
    """Run the sweep again, in this process, without faults."""
    return run_sweep(load_config(config), runs, cache_dir)


# ------------------------------------------------------------------------------ children


def _sweep_child(argv: list[str], fault: str, log: str) -> None:
    """In a fork-server child: the command line, with a fault, its output into `log`."""
    os.environ[faults.ENV] = fault
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.exit(main(argv))


_context = None


def forked(argv, fault: str, log: Path) -> multiprocessing.Process:
    """Start `scaling ARGV` in a child of the fork server (torch already imported there)."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(["tests.sweep.test_faults"])
    child = _context.Process(target=_sweep_child, args=([str(a) for a in argv], fault, str(log)))
    child.start()
    return child


def run_forked(argv, fault: str, log: Path, timeout: float = 120) -> int:
    child = forked(argv, fault, log)
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail(f"the sweep with {fault} did not end: {log.read_text()}")
    return child.exitcode


def scaling(*args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "scaling", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, **kw)


def popen_scaling(*args, env=None, **kw):
    return subprocess.Popen([sys.executable, "-m", "scaling", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})}, **kw)


# ------------------------------------------------------------------------------ kills


@pytest.mark.parametrize("point", KILL_POINTS)
def test_sigkill_at_a_fault_point_loses_nothing(point, clean, tmp_path, cache_dir):
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    code = run_forked(["sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir], f"kill_at={point}",
                      tmp_path / "log")
    assert code == -signal.SIGKILL, f"{point} was never reached: {(tmp_path / 'log').read_text()}"
    ended = summaries(runs / "kill")

    if point.startswith("append:"):  # the torn line is named and skipped
        with pytest.warns(UserWarning, match=r"metrics\.jsonl:\d+: skipping a torn or corrupt line"):
            result = restart(config, runs, cache_dir)
    else:
        result = restart(config, runs, cache_dir)

    assert summaries(runs / "kill").items() >= ended.items()  # finished runs untouched
    assert not {s["run_id"] for s in result.trained} & set(ended)  # and not trained again
    assert snapshot(runs / "kill") == clean
    temps = f".*{store.TEMP_SUFFIX}"
    assert not list((runs / "kill").glob(f"*/{temps}")) and not list((runs / "kill").glob(temps))


@pytest.mark.parametrize("first, second", [
    ("step:20", "write:metrics.jsonl:1"),  # killed again while the resume rewrites metrics.jsonl
    ("step:40", "step:3"),                 # killed again three steps into the resumed run
    ("write:checkpoint.pt:5", "rename:checkpoint.pt:1"),  # a kill in each of two checkpoint writes
])
def test_killed_again_while_resuming(first, second, clean, tmp_path, cache_dir):
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    argv = ["sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir]
    for point in (first, second):
        assert run_forked(argv, f"kill_at={point}", tmp_path / "log") == -signal.SIGKILL, point
    restart(config, runs, cache_dir)
    assert snapshot(runs / "kill") == clean


def test_killed_while_building_the_token_cache(clean, tmp_path):
    config, runs, cache = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs", tmp_path / "cache"
    code = run_forked(["sweep", config, "--runs-dir", runs, "--cache-dir", cache], "kill_at=rename:tokens:1",
                      tmp_path / "log")
    assert code == -signal.SIGKILL
    assert [p.name.startswith(".") for p in (cache / "tokens").iterdir()] == [True, True]  # lock, temporary
    restart(config, runs, cache)
    assert [p.name.startswith(".") for p in (cache / "tokens").iterdir()].count(False) == 1
    assert len(list((cache / "tokens").iterdir())) == 2  # the cache and its lock: the half build is gone
    assert snapshot(runs / "kill") == clean


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_killed_at_random_times_until_done(seed, clean, clean_store, tmp_path, cache_dir):
    """SIGKILL from outside at random moments, over and over, then one last uninterrupted start.
    The moments are drawn within the clean sweep's training time, so the first kill lands."""
    rng = random.Random(seed)
    training_s = sum(s["wall_s"] for s in map(store.read_summary, store.run_dirs(clean_store)))
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    argv = ["sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir]
    kills = 0
    for _ in range(4):
        child = forked(argv, "", tmp_path / "log")
        child.join(rng.uniform(0.05, 0.8) * training_s)
        if not child.is_alive():
            break
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        kills += 1
    assert kills, "the sweep ended before the first kill"
    restart(config, runs, cache_dir)
    assert snapshot(runs / "kill") == clean


# ------------------------------------------------------------------------------ stops


def test_sigterm_stops_after_a_checkpoint_and_says_how_to_resume(clean, tmp_path, cache_dir):
    """The sweep sends itself SIGTERM at step 51 (run 3, step 3 of 8: not a checkpoint step)."""
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    done = scaling("sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir,
                   env={faults.ENV: "kill_at=step:51,signal=SIGTERM"})
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "stopped by SIGTERM" in done.stdout and "at step 3 of 8, with a checkpoint there" in done.stdout
    assert f"Resume with: scaling sweep {config} --runs-dir {runs} --cache-dir {cache_dir}" in done.stdout
    stopped = [d for d in store.run_dirs(runs / "kill") if not (d / store.SUMMARY).exists()]
    assert torch.load(stopped[0] / store.CHECKPOINT, weights_only=True)["step"] == 3
    assert len(summaries(runs / "kill")) == 2

    restart(config, runs, cache_dir)
    assert snapshot(runs / "kill") == clean


def test_sigint_from_outside_stops_after_a_checkpoint(clean, tmp_path, cache_dir):
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    sweep = popen_scaling("sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir)
    deadline = time.monotonic() + 120
    while not list(runs.glob(f"kill/*/{store.SUMMARY}")):
        assert sweep.poll() is None and time.monotonic() < deadline, "the sweep ended or stalled"
        time.sleep(0.02)
    sweep.send_signal(signal.SIGINT)
    out, _ = sweep.communicate(timeout=120)
    if sweep.returncode == 0:
        pytest.skip("the sweep finished before SIGINT arrived")
    assert sweep.returncode == 128 + signal.SIGINT, out
    assert "stopped by SIGINT" in out and f"Resume with: scaling sweep {config}" in out
    assert "Traceback" not in out
    restart(config, runs, cache_dir)
    assert snapshot(runs / "kill") == clean


def test_a_second_sigint_stops_at_once(clean, tmp_path, cache_dir):
    """The first SIGINT asks for a stop after the current step, which a hung step holds up (a stall
    of 60 s after the first step); a second SIGINT ends the sweep at once, without a checkpoint,
    and the next sweep completes the store as a clean one."""
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    sweep = popen_scaling("sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir,
                          env={faults.ENV: "stall_at=step:1,seconds=60"})
    deadline = time.monotonic() + 60
    while not list(runs.glob(f"kill/*/{store.CONFIG}")):  # the first run is taken: no stop check until step 1
        assert sweep.poll() is None and time.monotonic() < deadline, "the sweep ended or stalled"
        time.sleep(0.02)
    try:
        sweep.send_signal(signal.SIGINT)
        time.sleep(2)
        assert sweep.poll() is None, "the first SIGINT should wait for the step to end"
        sweep.send_signal(signal.SIGINT)
        start = time.monotonic()
        out, _ = sweep.communicate(timeout=10)  # well before the stall would end
        assert time.monotonic() - start < 10
    finally:
        sweep.kill()
        sweep.communicate()
    assert sweep.returncode == 128 + signal.SIGINT, out
    assert "scaling sweep: interrupted" in out and "stopped by SIGINT" not in out, out
    assert not list(runs.glob(f"kill/*/{store.CHECKPOINT}")) and not summaries(runs / "kill")
    restart(config, runs, cache_dir)
    assert snapshot(runs / "kill") == clean


# ------------------------------------------------------------------------------ concurrency


def test_two_sweeps_at_once_train_each_run_once(clean, tmp_path, cache_dir):
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    sweeps = [popen_scaling("sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir) for _ in range(2)]
    outputs = [sweep.communicate(timeout=300)[0] for sweep in sweeps]
    assert [sweep.returncode for sweep in sweeps] == [0, 0], outputs
    trained = [int(out.split(": trained ")[1].split(",")[0]) for out in outputs]
    assert sum(trained) == KILL_RUNS, outputs
    for run_dir in store.run_dirs(runs / "kill"):  # one writer per run: each step logged once
        steps = [r["step"] for r in store.read_jsonl(run_dir / store.METRICS)]
        assert steps == sorted(set(steps))
    assert snapshot(runs / "kill") == clean


def test_a_locked_run_is_left_for_the_end_and_a_dead_owners_lock_is_taken(clean, tmp_path, cache_dir,
                                                                          monkeypatch):
    """One run is held by a live lock (released later, as by a sweep that dies), another carries
    the lock file of a process long gone: both are trained, the held one last."""
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    cfg = load_config(config)
    ids = [run.run_id for run in plan(cfg)]
    for run_id in ids[:2]:
        (runs / "kill" / run_id).mkdir(parents=True)
    (runs / "kill" / ids[1] / store.LOCK).write_text("pid 999999 on a-machine-that-rebooted\n")
    held = locks.try_lock(runs / "kill" / ids[0] / store.LOCK)
    waiting, owner = threading.Event(), locks.owner
    monkeypatch.setattr(locks, "owner", lambda path: waiting.set() or owner(path))  # asked when it waits

    def release_when_the_rest_are_done():
        waiting.wait(120)
        assert len(summaries(runs / "kill")) == KILL_RUNS - 1
        held.release()

    releaser = threading.Thread(target=release_when_the_rest_are_done, daemon=True)
    releaser.start()
    with pytest.warns(UserWarning, match=f"run {ids[0]} is being trained by pid {os.getpid()}"):
        result = run_sweep(cfg, runs, cache_dir)
    releaser.join()
    assert [s["run_id"] for s in result.trained][-1] == ids[0]
    assert snapshot(runs / "kill") == clean


# ------------------------------------------------------------------------------ divergence


def test_nan_loss_marks_the_run_diverged_and_the_retry_replaces_it(clean, tmp_path, cache_dir, monkeypatch):
    config = kill_config(tmp_path / "kill.yaml", train={**KILL["train"], "retries": 1, "retry_lr_factor": 0.5})
    cfg = load_config(config)
    victim = plan(cfg)[1]  # d16, 4096 tokens: 16 steps
    monkeypatch.setenv(faults.ENV, f"nan_at={victim.run_id}:5")
    result = run_sweep(cfg, tmp_path / "runs", cache_dir)

    sweep_dir = result.sweep_dir
    diverged = store.read_summary(sweep_dir / victim.run_id)
    assert diverged["status"] == "diverged" and diverged["steps"] == 8
    assert diverged["reason"] == "train loss is nan at step 8" and diverged["final_val_loss"] is None
    retry = [s for s in result.trained if s["retry_of"] == victim.run_id]
    assert len(retry) == 1 and retry[0]["status"] == "finished"
    assert retry[0]["lr"] == victim.spec.lr * 0.5
    assert yaml.safe_load((sweep_dir / retry[0]["run_id"] / store.CONFIG).read_text())["retry_of"] == victim.run_id
    assert len(result.table) == KILL_RUNS + 1

    data = readers.from_runs(sweep_dir)  # the diverged run is left out, and says why
    assert [(d.id, d.reason) for d in data.dropped] == [(victim.run_id, "diverged: train loss is nan at step 8")]
    assert retry[0]["run_id"] in data.ids and len(data) == KILL_RUNS
    others = {k: v for k, v in clean["runs"].items() if k != victim.run_id}
    assert {k: v for k, v in snapshot(sweep_dir)["runs"].items() if k in others} == others

    monkeypatch.delenv(faults.ENV)
    again = run_sweep(cfg, tmp_path / "runs", cache_dir)  # diverged and retried: nothing left to do
    assert again.trained == [] and len(again.skipped) == KILL_RUNS + 1


# ------------------------------------------------------------------------------ disk


@pytest.mark.parametrize("fault, message", [
    ("oserror_at=write:checkpoint.pt:9,errno=ENOSPC", "No space left on device"),
    ("oserror_at=append:metrics.jsonl:20,errno=ENOSPC", "No space left on device"),
    ("oserror_at=write:summary.json:2,errno=EACCES", "Permission denied"),
])
def test_a_full_or_unwritable_disk_fails_the_run_and_keeps_the_rest(fault, message, clean, tmp_path, cache_dir,
                                                                    monkeypatch, capsys):
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    monkeypatch.setenv(faults.ENV, fault)
    code = main(["sweep", str(config), "--runs-dir", str(runs), "--cache-dir", str(cache_dir)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    target = fault.split("=")[1].split(":")[1]
    assert f"{message}: {runs / 'kill'}/" in err and f"/{target}; finished runs are kept" in err
    assert f"resume with: scaling sweep {config}" in err
    failed = [s for s in map(store.read_summary, store.run_dirs(runs / "kill")) if s and s["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["reason"].startswith(message)
    finished = {k: v for k, v in summaries(runs / "kill").items() if k != failed[0]["run_id"]}

    monkeypatch.delenv(faults.ENV)
    restart(config, runs, cache_dir)  # the failed run resumes; the finished ones are left alone
    assert summaries(runs / "kill").items() >= finished.items()
    assert snapshot(runs / "kill") == clean


def test_a_file_size_limit_fails_a_real_write(clean, tmp_path, cache_dir):
    """RLIMIT_FSIZE makes the kernel refuse the larger model's checkpoint (EFBIG), as a full disk
    would. Its runs train first (longest first), so the first checkpoint of the sweep fails."""
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    limit = 250_000  # above a d16 checkpoint (120 kB), below a d32-l2 one (430 kB)
    done = scaling("sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir,
                   preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "File too large" in done.stderr and "checkpoint.pt; finished runs are kept" in done.stderr
    statuses = sorted(s["status"] for s in map(store.read_summary, store.run_dirs(runs / "kill")) if s)
    assert statuses == ["failed"]
    restart(config, runs, cache_dir)
    assert snapshot(runs / "kill") == clean


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_runs_directory(tmp_path, cache_dir, capsys):
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o500)
    try:
        code = main(["sweep", str(config), "--runs-dir", str(runs), "--cache-dir", str(cache_dir)])
    finally:
        runs.chmod(0o700)
    err = capsys.readouterr().err
    assert code == 2 and "Permission denied" in err and str(runs) in err


# ------------------------------------------------------------------------------ damaged files


def test_a_damaged_checkpoint_is_moved_aside_and_the_run_restarts(clean, tmp_path, cache_dir):
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    assert run_forked(["sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir], "kill_at=step:20",
                      tmp_path / "log") == -signal.SIGKILL
    checkpoint = next(p for p in runs.glob(f"kill/*/{store.CHECKPOINT}")
                      if not (p.parent / store.SUMMARY).exists())  # the interrupted run's
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])  # a disk that lost the end of the file
    with pytest.warns(UserWarning, match="unusable checkpoint .* training this run from step 0"):
        restart(config, runs, cache_dir)
    assert (checkpoint.parent / "checkpoint.pt.unusable").exists()
    assert snapshot(runs / "kill") == clean


@pytest.mark.parametrize("edit", ["drop_loss_sum", "negative_step"])
def test_a_checkpoint_that_loads_but_is_wrong_is_moved_aside_and_the_metrics_kept(edit, clean, tmp_path, cache_dir):
    """Issue 15, case 10: a key missing or a negative step failed the run on every rerun, and a
    negative step first emptied metrics.jsonl. Now it is refused before anything is loaded."""
    config, runs = kill_config(tmp_path / "kill.yaml"), tmp_path / "runs"
    assert run_forked(["sweep", config, "--runs-dir", runs, "--cache-dir", cache_dir], "kill_at=step:20",
                      tmp_path / "log") == -signal.SIGKILL
    checkpoint = next(p for p in runs.glob(f"kill/*/{store.CHECKPOINT}") if not (p.parent / store.SUMMARY).exists())
    state = torch.load(checkpoint, weights_only=True)
    if edit == "drop_loss_sum":
        del state["loss_sum"]
    else:
        state["step"] = -5
    torch.save(state, checkpoint)
    with pytest.warns(UserWarning, match="unusable checkpoint .* training this run from step 0"):
        restart(config, runs, cache_dir)
    assert (checkpoint.parent / "checkpoint.pt.unusable").exists()
    assert snapshot(runs / "kill") == clean


def test_hand_edited_metrics_lines_are_skipped_with_a_warning(tmp_path):
    path = tmp_path / store.METRICS
    path.write_text('{"step": 1, "train_loss": 5.0}\n'
                    '{"step": "two", "train_loss": 4.0}\n'    # a string step
                    '[3, 4.0]\n'                                # not an object
                    '{"step": 4, "val_loss": "low"}\n'          # a string loss
                    '{"step": 5, "train_loss": null}\n'         # a NaN loss, as logged
                    '{"step": 6, "train_lo'                     # torn
                    '\n' + '[' * 100_000 + ']' * 100_000)       # nested 100,000 deep
    with pytest.warns(UserWarning) as caught:
        records = store.read_jsonl(path)
    assert [r["step"] for r in records] == [1, 5]
    assert [str(w.message).split(": ")[0] for w in caught] == [f"{path}:{n}" for n in (2, 3, 4, 6, 7)]


def test_a_fault_fires_at_the_pass_it_names_and_without_the_variable_nothing_does(monkeypatch, tmp_path):
    monkeypatch.setenv(faults.ENV, "oserror_at=step:3,errno=EIO")
    faults.point("write:checkpoint.pt")  # another site: not counted
    faults.point("step")
    faults.point("step")
    with pytest.raises(OSError) as caught:
        faults.point("step", tmp_path / "x")
    assert caught.value.errno == errno.EIO and caught.value.filename == str(tmp_path / "x")
    faults.point("step")  # the fourth pass: a fault fires once

    monkeypatch.setenv(faults.ENV, "stall_at=write:a.bin:1,seconds=0.3")  # a write that hangs halfway
    start = time.monotonic()
    with open(tmp_path / "a.bin", "wb") as f:
        faults.write("write:a.bin", f, b"0123456789")
    assert time.monotonic() - start >= 0.3
    assert (tmp_path / "a.bin").read_bytes() == b"0123456789"  # half, the pause, then the other half

    monkeypatch.setenv(faults.ENV, "nan_at=victim:5")
    assert faults.loss("victim", 4, 1.5) == 1.5 and math.isnan(faults.loss("victim", 5, 1.5))
    assert faults.loss("other", 9, 1.5) == 1.5

    monkeypatch.delenv(faults.ENV)
    start = time.monotonic()
    for _ in range(5):  # at every site and count the faults above used: nothing happens
        faults.point("step")
        faults.point("write:checkpoint.pt", tmp_path / "x")
    with open(tmp_path / "b.bin", "wb") as f:
        faults.write("write:b.bin", f, b"0123456789")
    assert (tmp_path / "b.bin").read_bytes() == b"0123456789"
    assert faults.loss("victim", 9, 1.5) == 1.5
    assert time.monotonic() - start < 0.3
