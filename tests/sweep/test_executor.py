"""Executors: packing runs into worker processes changes no result; Ray runs the sweep with the same
losses and survives a worker killed mid-run."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from scaling.errors import UsageError
from scaling.runs import store
from scaling.sweeps.driver import run_sweep
from scaling.sweeps.executor import LocalExecutor
from scaling.sweeps.executors import make_executor
from scaling.sweeps.packing import default_workers
from tests.conftest import MICRO, MICRO_RUNS, micro_config
from tests.extras import needs_extra

TIMING = {"elapsed_s", "tokens_per_s"}  # metrics fields that measure the machine, not the run


class Recorder:
    """A reporter that keeps every call, to check the protocol from the driver's side."""

    def __init__(self):
        self.calls = []

    def begin(self, jobs):
        self.calls.append(("begin", len(jobs)))

    def started(self, job):
        self.calls.append(("started", job.spec.run_id))

    def progress(self, job, tokens_done, tokens_total, tokens_per_s):
        self.calls.append(("progress", job.spec.run_id, tokens_done, tokens_total))

    def finished(self, job, summary):
        self.calls.append(("finished", job.spec.run_id))


def metrics(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in store.read_jsonl(run_dir / store.METRICS)]


def assert_same_runs(sweep_dir: Path, reference_dir: Path) -> None:
    """Bitwise the same final losses and the same logged curve, run by run."""
    got, want = store.read_runs(sweep_dir).set_index("run_id"), store.read_runs(reference_dir).set_index("run_id")
    assert (got.status == "finished").all()
    assert got.final_val_loss.to_dict() == want.final_val_loss.to_dict()
    assert got.final_val_bpb.to_dict() == want.final_val_bpb.to_dict()
    for run_id in want.index:
        assert metrics(sweep_dir / run_id) == metrics(reference_dir / run_id), run_id


def test_default_workers_rule():
    assert default_workers("cpu", 1, 4, cores=2) == 2
    assert default_workers("cpu", 2, 4, cores=2) == 1
    assert default_workers("cpu", 3, 4, cores=2) == 1
    assert default_workers("cuda", 1, 4, cores=16, gpus=1) == 4
    assert default_workers("cuda", 1, 4, cores=16, gpus=8) == 16   # a core per run feeding its GPU
    assert default_workers("cuda", 1, 4, cores=2, gpus=1) == 2
    assert default_workers("mps", 1, 3, cores=8) == 3


def test_executor_plan():
    from scaling.sweeps.job import Job
    from scaling.sweeps.plan import plan

    jobs = [Job(run.spec, Path("unused"), None) for run in plan(micro_config())]
    assert LocalExecutor().plan(jobs) == (1, 1)  # too small to pay for starting workers
    assert LocalExecutor(workers=2).plan(jobs) == (2, 1)
    assert LocalExecutor(workers=64, threads_per_run=2).plan(jobs) == (MICRO_RUNS, 2)  # no more than runs
    train_threads = micro_config(train={**MICRO["train"], "threads": 3})
    jobs = [Job(run.spec, Path("unused"), None) for run in plan(train_threads)]
    assert LocalExecutor(workers=1).plan(jobs) == (1, 3)  # train.threads when the executor sets none


def test_executor_config_keys():
    cfg = micro_config(executor={"workers": 2, "threads_per_run": 1})
    assert isinstance(make_executor(cfg.executor), LocalExecutor)
    with pytest.raises(UsageError, match="executor.address applies to kind 'ray' only"):
        micro_config(executor={"address": "auto"})
    with pytest.raises(UsageError, match="executor.workers"):
        micro_config(executor={"workers": 0})


def test_packing_changes_no_result(micro_sweep, tmp_path, cache_dir):
    """Two runs at a time in worker processes: the same losses, bit for bit, as one run at a time in
    this process, with the same threads per run (1); the reporter hears every run start and end."""
    _, reference = micro_sweep
    recorder = Recorder()
    cfg = micro_config(executor={"workers": 2, "threads_per_run": 1})
    result = run_sweep(cfg, tmp_path, cache_dir, reporter=recorder)
    assert len(result.trained) == MICRO_RUNS
    assert_same_runs(result.sweep_dir, reference.sweep_dir)
    assert {s["threads"] for s in result.trained} == {1}
    assert {json.loads((d / store.SUMMARY).read_text())["threads"] for d in store.run_dirs(reference.sweep_dir)} == {1}

    run_ids = {s["run_id"] for s in result.trained}
    for run_id in run_ids:
        mine = [c for c in recorder.calls if c[0] != "begin" and c[1] == run_id]
        assert mine[0][0] == "started" and mine[-1][0] == "finished"
        progress = [c for c in mine if c[0] == "progress"]
        assert progress and progress[-1][2] == progress[-1][3]  # the last event reports the whole run


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU time process `pid` has used so far (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the worker processes from /proc")
def test_packed_runs_train_in_worker_processes(tmp_path, cache_dir):
    """With two workers the runs train in two child processes of this one (the driver): at each
    progress report, read here, they are there, and between the first report and the last they,
    not this process, spent the CPU time of the training."""
    samples = []  # (this process's CPU seconds, {worker pid: its CPU seconds}) at each progress report

    class Sampler(Recorder):
        def progress(self, job, tokens_done, tokens_total, tokens_per_s):
            super().progress(job, tokens_done, tokens_total, tokens_per_s)
            workers = {pid: cpu_seconds(pid) for pid in children(os.getpid())}
            samples.append((time.process_time(), {pid: t for pid, t in workers.items() if t is not None}))

    cfg = micro_config(grid={**MICRO["grid"], "tokens": [8192, 16384]}, executor={"workers": 2, "threads_per_run": 1})
    result = run_sweep(cfg, tmp_path, cache_dir, reporter=Sampler())
    assert len(result.trained) == 4 and len(samples) >= 8
    assert max(len(workers) for _, workers in samples) == 2 and all(workers for _, workers in samples)
    assert os.getpid() not in samples[0][1]
    driver = samples[-1][0] - samples[0][0]
    first_seen = {}
    for _, workers in samples:
        for pid, t in workers.items():
            first_seen.setdefault(pid, t)
    last_seen = {pid: t for _, workers in samples for pid, t in workers.items()}
    in_workers = sum(last_seen[pid] - first_seen[pid] for pid in first_seen)
    assert in_workers > 0.3 and in_workers > 5 * driver


NO_DEVICE = {**MICRO["train"], "device": "mps"}  # a UsageError raised inside the run, on a machine without MPS


def no_mps() -> bool:
    import torch

    return not torch.backends.mps.is_available()


@pytest.mark.skipif(not no_mps(), reason="needs a machine without MPS, where train.device mps is refused")
def test_worker_error_is_raised_in_the_driver(tmp_path, cache_dir):
    """A run that fails in a worker with bad input fails the sweep with its own exception type, as
    it would in-process."""
    cfg = micro_config(executor={"workers": 2}, train=NO_DEVICE)
    with pytest.raises(UsageError, match="train.device is 'mps'"):
        run_sweep(cfg, tmp_path, cache_dir)


# Two runs of 512 steps (seconds each, a checkpoint every 20 steps), so that a signal lands
# while both workers train (at 256, the d16 run once finished before the d32 run had its first
# checkpoint, under load).
LONG = {
    "grid": {"models": MICRO["grid"]["models"], "tokens": [131072]},
    "train": {**MICRO["train"], "checkpoint_interval": 20, "eval_interval": 64},
}


@pytest.fixture(scope="module")
def long_reference(tmp_path_factory, cache_dir):
    """The LONG sweep trained in this process, one run at a time."""
    return run_sweep(micro_config(**LONG, executor={"workers": 1}), tmp_path_factory.mktemp("long"), cache_dir)


def start_packed_sweep(tmp_path, cache_dir):
    """`scaling sweep` of LONG with 2 workers, returned once both workers train; with their pids."""
    config = tmp_path / "long.yaml"
    config.write_text(yaml.safe_dump({**MICRO, **LONG, "executor": {"workers": 2}}))
    runs = tmp_path / "runs"
    sweep = subprocess.Popen([sys.executable, "-m", "scaling", "sweep", config, "--runs-dir", runs,
                              "--cache-dir", cache_dir], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers, deadline = [], time.time() + 120
    while time.time() < deadline and sweep.poll() is None:
        workers = children(sweep.pid)
        dirs = store.run_dirs(runs / "micro") if (runs / "micro").exists() else []
        if len(workers) == 2 and sum((d / store.CHECKPOINT).exists() for d in dirs) == 2:
            break
        time.sleep(0.02)
    assert sweep.poll() is None, "the sweep ended before both runs were under way"
    return sweep, workers, runs


def wait_gone(pids: list[int], seconds: float = 15) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads parent pids from /proc")
def test_killed_driver_takes_its_workers_along(long_reference, tmp_path, cache_dir):
    """SIGKILL the driver of a packed sweep mid-run: its workers die with it (no orphan keeps
    training into the store), and the next sweep resumes both runs and matches."""
    sweep, workers, runs = start_packed_sweep(tmp_path, cache_dir)
    sweep.send_signal(signal.SIGKILL)
    sweep.communicate()
    assert not wait_gone(workers), "a worker outlived its driver"
    assert not list((runs / "micro").glob(f"*/{store.SUMMARY}"))  # killed mid-run indeed

    again = run_sweep(micro_config(**LONG, executor={"workers": 1}), runs, cache_dir)  # resumed in-process
    assert_same_runs(again.sweep_dir, long_reference.sweep_dir)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads parent pids from /proc")
def test_sigterm_stops_packed_runs_with_a_checkpoint(long_reference, tmp_path, cache_dir):
    """SIGTERM to the driver of a packed sweep: every run in training stops after its step with a
    checkpoint there (in its worker), the command says how to resume, and resuming matches."""
    sweep, workers, runs = start_packed_sweep(tmp_path, cache_dir)
    sweep.send_signal(signal.SIGTERM)
    out, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM" in out and "Resume with: scaling sweep" in out
    assert re.search(r"run \S+ stopped at step \d+ of 512, with a checkpoint there", out), out
    assert not wait_gone(workers), "a worker outlived its driver"
    steps = {d.name: store.read_jsonl(d / store.METRICS)[-1]["step"] for d in store.run_dirs(runs / "micro")}
    assert all(step < 512 for step in steps.values())  # both stopped mid-run

    again = run_sweep(micro_config(**LONG, executor={"workers": 1}), runs, cache_dir)  # resumed in-process
    assert_same_runs(again.sweep_dir, long_reference.sweep_dir)


def children(pid: int) -> list[int]:
    """The worker processes (spawned by multiprocessing) whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in cmdline:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --- Ray ---------------------------------------------------------------------------------------

def test_kind_ray_without_ray_is_a_usage_error(monkeypatch, tmp_path, cache_dir):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    monkeypatch.delitem(sys.modules, "scaling.sweeps.ray_executor", raising=False)
    cfg = micro_config(executor={"kind": "ray"})
    with pytest.raises(UsageError, match=r"pip install 'scaling\[ray\]'"):
        run_sweep(cfg, tmp_path / "runs", cache_dir)
    assert not (tmp_path / "runs").exists()  # nothing written


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance with 2 CPUs for this module's tests (the executor joins it)."""
    ray = needs_extra("ray", "ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray would report usage stats by default
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def test_ray_sweep_matches_local(ray_cluster, micro_sweep, tmp_path, cache_dir):
    _, reference = micro_sweep
    recorder = Recorder()
    result = run_sweep(micro_config(executor={"kind": "ray"}), tmp_path, cache_dir, reporter=recorder)
    assert len(result.trained) == MICRO_RUNS
    assert_same_runs(result.sweep_dir, reference.sweep_dir)  # metrics.jsonl came back too
    assert {s["threads"] for s in result.trained} == {1}
    assert sum(c[0] == "started" for c in recorder.calls) == MICRO_RUNS
    assert sum(c[0] == "progress" for c in recorder.calls) >= MICRO_RUNS


def test_ray_wsd_sweep_matches_local(ray_cluster, tmp_path, cache_dir):
    """WSD on Ray: the stable runs' branch-point checkpoints come back to the driver, the branches
    start from them, and every result is bitwise the in-process one."""
    from tests.train.test_wsd import wsd_config

    reference = run_sweep(wsd_config(), tmp_path / "local", cache_dir)
    result = run_sweep(wsd_config(executor={"kind": "ray"}), tmp_path / "ray", cache_dir)
    assert len(result.trained) == 8 and sorted(result.table.status) == 6 * ["finished"] + 2 * ["stable"]
    got = store.read_runs(result.sweep_dir).set_index("run_id")
    want = store.read_runs(reference.sweep_dir).set_index("run_id")
    assert got.final_val_loss.fillna(0).to_dict() == want.final_val_loss.fillna(0).to_dict()
    for run_id in want.index:
        assert metrics(result.sweep_dir / run_id) == metrics(reference.sweep_dir / run_id), run_id
    assert len(list(result.sweep_dir.glob(f"*/{store.BRANCH_CHECKPOINTS}"))) == 6


@pytest.mark.skipif(not no_mps(), reason="needs a machine without MPS, where train.device mps is refused")
def test_ray_run_error_is_raised_not_retried(ray_cluster, tmp_path, cache_dir):
    cfg = micro_config(executor={"kind": "ray"}, train=NO_DEVICE)
    with _no_warning():
        with pytest.raises(UsageError, match="train.device is 'mps'"):
            run_sweep(cfg, tmp_path, cache_dir)


class _no_warning:
    """A context that fails if a 'rescheduled' warning is issued inside it."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self.caught = self._catch.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        assert not [w for w in self.caught if "rescheduled" in str(w.message)]
        return False


KILL = {  # one run of 512 steps (a few seconds), a checkpoint every 20 steps
    "grid": {"models": [{"d_model": 32, "n_layers": 2, "n_heads": 2}], "tokens": [131072]},
    "train": {**MICRO["train"], "checkpoint_interval": 20, "eval_interval": 64},
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the Ray worker in /proc")
def test_ray_worker_killed_mid_run_resumes(ray_cluster, tmp_path, cache_dir):
    """SIGKILL the Ray worker process training a run once its first checkpoint has reached the
    driver: the driver reschedules the run from that checkpoint, and it lands in the store with
    the final loss of an uninterrupted local run."""
    local = run_sweep(micro_config(**KILL), tmp_path / "local", cache_dir)
    killed = []

    class Killer(Recorder):
        def progress(self, job, tokens_done, tokens_total, tokens_per_s):
            super().progress(job, tokens_done, tokens_total, tokens_per_s)
            if not killed and (job.run_dir / store.CHECKPOINT).exists() and tokens_done < tokens_total:
                pid = ray_worker(f"train {job.spec.run_id}")
                assert pid is not None, "no Ray worker is training the run"
                os.kill(pid, signal.SIGKILL)
                killed.append((pid, tokens_done))

    with pytest.warns(RuntimeWarning, match=r"Ray worker died .*rescheduled from its checkpoint at step \d+"):
        result = run_sweep(micro_config(**KILL, executor={"kind": "ray"}), tmp_path / "ray", cache_dir,
                           reporter=Killer())
    assert killed and killed[0][1] < 131072
    assert [s["status"] for s in result.trained] == ["finished"]
    assert_same_runs(result.sweep_dir, local.sweep_dir)  # final loss and the whole logged curve


def ray_worker(title: str) -> int | None:
    """The pid of the Ray worker whose process title is `ray::<title>` (Ray names it after the task)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip()
            except OSError:
                continue
            if cmdline == f"ray::{title}".encode():
                return int(entry.name)
    return None
