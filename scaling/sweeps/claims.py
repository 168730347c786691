"""Claims: the runs this sweep trains, each under its lock, and the start of each WSD branch.

Two sweeps may share a runs directory. A run is trained under its lock (scaling.runs.locks), held
by the driver from the moment the executor takes the job until its summary.json is written; a
run locked by another process is skipped and taken up again at the end, when this sweep waits
for it: the other process ends it, or dies and leaves it to be resumed here.

A WSD branch is issued once its stable run's checkpoint at its branch point exists (while the
stable run goes on towards later branch points, or trains other shapes' runs beside it), or
waits for it while the stable run is in training here. On its first start a branch gets that
checkpoint and the metrics records up to its branch point copied into its own folder, so its
metrics.jsonl is that of the WSD run it stands for, and it resumes from its own checkpoints after
that.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import yaml

from scaling.config import SweepConfig, TrainConfig
from scaling.data.tokens import TokenCache
from scaling.errors import UsageError
from scaling.reading import parse_json
from scaling.runs import locks, store
from scaling.sweeps.job import WAIT, Job, _Wait
from scaling.sweeps.plan import PlannedRun, run_config
from scaling.train.loop import STOP, Interrupted

LOCK_POLL_S = 0.5


class Claims:
    """The run locks this sweep holds: taken as the executor takes each job, released when the
    run's summary is written (or by the kernel, when this process dies)."""

    def __init__(self, cfg: SweepConfig, sweep_dir: Path, cache: TokenCache) -> None:
        self.cfg, self.sweep_dir, self.cache = cfg, sweep_dir, cache
        self.held: dict[str, locks.Lock] = {}
        self.busy: set[str] = set()  # runs found locked by another process

    def jobs(self, runs: list[PlannedRun]) -> Iterator[Job | _Wait]:
        """A job for each run this sweep gets the lock of and that has not ended meanwhile. A run
        that was busy before is waited for; one busy now is left for a later round.

        A WSD branch whose stable run is in training here and has not yet saved the branch's
        checkpoint waits: the runs after it go first, and when nothing else is left the executor
        is told to WAIT (ask again later) until the checkpoint is there or the stable run ends."""
        todo, waiting = list(runs), list[PlannedRun]()
        while todo or waiting:
            if STOP.is_set():
                raise Interrupted()
            for run in list(waiting):
                if self._must_wait(run):
                    continue
                waiting.remove(run)
                job = self._take(run)
                if job is not None:
                    yield job
            if todo:
                run = todo.pop(0)
                if self._must_wait(run):
                    waiting.append(run)
                    continue
                job = self._take(run)
                if job is not None:
                    yield job
            elif waiting:
                yield WAIT

    def _must_wait(self, run: PlannedRun) -> bool:
        """A branch whose checkpoint its stable run, in training here, has not saved yet."""
        branch = run.spec.branch
        if branch is None or branch[0] not in self.held:
            return False
        if (self.sweep_dir / run.run_id / store.CHECKPOINT).exists():
            return False  # it started before: it resumes from its own checkpoint
        stable_id, step = branch
        return not (self.sweep_dir / stable_id / store.branch_checkpoint(step)).exists()

    def _take(self, run: PlannedRun) -> Job | None:
        run_dir = self.sweep_dir / run.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = locks.try_lock(run_dir / store.LOCK)
        if lock is None and run.run_id in self.busy:
            lock = self._wait(run_dir)
        if lock is None:
            self.busy.add(run.run_id)
            return None
        summary = store.read_summary(run_dir)
        if summary is not None and summary["status"] in store.ENDED:  # another sweep ended it
            lock.release()
            return None
        store.remove_temps(run_dir)
        write_run_config(run_dir, run_config(self.cfg, run, self.cache.meta["key"]))
        branch = run.spec.branch
        if branch is not None and not self._start_branch(run, run_dir, *branch):
            lock.release()
            return None
        self.held[run.run_id] = lock
        return Job(run.spec, run_dir, self.cache)

    def _start_branch(self, run: PlannedRun, run_dir: Path, stable_id: str, step: int) -> bool:
        """Give a branch, on its first start, its stable run's (`stable_id`) checkpoint at the branch
        point `step` and the metrics records up to it. False when it cannot start: its stable run has
        not got there yet (it is left for a later round, or ended here when the stable run diverged
        before)."""
        spec = run.spec
        if (run_dir / store.CHECKPOINT).exists():
            return True  # it started before: it resumes from its own checkpoint (or the copy)
        stable_dir = self.sweep_dir / stable_id
        source = stable_dir / store.branch_checkpoint(step)
        if source.exists():
            records = stable_prefix(stable_dir / store.METRICS, step, spec.train)
            store.write_atomic(run_dir / store.METRICS, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
            store.write_atomic(run_dir / store.CHECKPOINT, source.read_bytes())  # last: it marks the start
            return True
        stable = store.read_summary(stable_dir)
        if stable is None or stable["status"] not in store.ENDED:
            return False  # the stable run is in training elsewhere, or failed: a later round
        if stable["status"] == "diverged":
            store.write_json(run_dir / store.SUMMARY, {
                "status": "diverged", "run_id": run.run_id, "branch_of": spec.branch_of,
                "branch_step": spec.branch_step, "tokens_budget": spec.tokens, "schedule": "wsd",
                "seed": spec.seed, "lr": spec.lr, "d_model": spec.model.d_model, "n_layers": spec.model.n_layers,
                "n_heads": spec.model.n_heads, "n_params_total": run.n_params_total,
                "n_params_non_embedding": run.n_params_non_embedding, "final_val_loss": None,
                "reason": f"its stable run {spec.branch_of} diverged before this branch's branch point "
                          f"(step {spec.branch_step}): {stable.get('reason')}"})
            return False
        warnings.warn(f"{source} is missing although stable run {spec.branch_of} ended; branch "
                      f"{run.run_id} trains from step 0 (the same run, at the full cost)", stacklevel=3)
        return True

    def _wait(self, run_dir: Path) -> locks.Lock:
        path = run_dir / store.LOCK
        warnings.warn(f"run {run_dir.name} is being trained by {locks.owner(path)}; waiting for it",
                      stacklevel=3)
        while (lock := locks.try_lock(path)) is None:
            if STOP.is_set():
                raise Interrupted()
            time.sleep(LOCK_POLL_S)
        return lock

    def release(self, run_id: str) -> None:
        self.held.pop(run_id).release()

    def release_all(self) -> None:
        for run_id in list(self.held):
            self.release(run_id)

    def fail(self, exc: OSError) -> None:
        """Record in its summary (when the disk still lets us) that a file error ended a run."""
        for run_id in self.held:
            run_dir = self.sweep_dir / run_id
            if exc.filename and Path(exc.filename).parent == run_dir:
                try:
                    store.write_json(run_dir / store.SUMMARY, {
                        "status": "failed", "run_id": run_id, "reason": f"{exc.strerror}: {exc.filename}"})
                except OSError:
                    pass


def stable_prefix(path: Path, step: int, train: TrainConfig) -> list[dict]:
    """A stable run's metrics records up to branch point `step`, as the WSD run from step 0 to the
    branch's budget logs them: without the record the stable run logs only because its last step
    is its last (off the log cadence), and without the evaluation made only for that reason.
    Records after `step` (the stable run may still be appending) are not read."""
    records: list[dict] = []
    if not path.exists():
        return records
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for lineno, line in enumerate(lines, start=1):
        try:
            record = parse_json(line, f"{path}:{lineno}")     # bounded: a deep line is damage too
        except UsageError:
            if lineno < len(lines):  # a torn last line is a write in progress, not damage
                warnings.warn(f"{path}:{lineno}: skipping a torn or corrupt line", stacklevel=2)
            continue
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            continue
        n = record["step"]
        if n > step:
            break
        if n != 1 and n % train.log_interval and n % train.eval_interval:
            continue
        if n % train.eval_interval:
            record = {k: v for k, v in record.items() if k not in ("val_loss", "val_bpb")}
        records.append(record)
    return records


def write_run_config(run_dir: Path, config: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    store.write_atomic(run_dir / store.CONFIG, yaml.safe_dump(config, sort_keys=False))
