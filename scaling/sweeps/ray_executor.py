"""Run a sweep's runs as Ray tasks, on a local Ray instance or an existing cluster.

    executor: {kind: ray}                              # a local Ray instance, started and stopped here
    executor: {kind: ray, address: auto}               # the cluster this machine belongs to (`ray start`)
    executor: {kind: ray, address: "ray://head:10001"} # a remote cluster through Ray Client

The design, in which nothing but Ray connects the driver and its workers (no shared filesystem):

- Data. The driver prepares the corpus and tokenizer once, as for the local executor, and puts
  the three token arrays of the cache (train, val, and the bytes of each val token) into Ray's
  object store once; every task receives them as read-only numpy arrays.
- Tasks. Each run is one task declaring num_cpus = threads_per_run and, when the run is on a GPU
  (train.device cuda, or auto on a cluster that has GPUs), num_gpus = 1 / runs_per_gpu. The task
  trains in a scratch folder on its node with the same `train_run` as the local executor, and
  returns the summary and the run's metrics.jsonl; the driver writes both into the run store.
- Checkpoints. Whenever the run writes a checkpoint, the task sends its bytes (and the metrics so
  far) to a mailbox actor, synchronously, and the driver, which drains the mailbox a few times a
  second, writes them into the run's folder. Progress events and warnings travel the same way,
  and so do the checkpoints a WSD stable run keeps at its branch points, each with the metrics so
  far (the driver writes the metrics, then the checkpoint, into the stable run's folder: a branch
  starts once its checkpoint is there and copies the stable run's records up to it).
- Worker death. A task runs with max_retries=0: when its worker process (or node) dies, the
  driver reschedules the run itself, up to executor.max_retries times, sending the checkpoint it
  holds, so the new task resumes from the last checkpoint that reached the driver and ends with
  the same final loss as an uninterrupted run. An exception raised by the run itself (bad input,
  a bug) is not retried: it is raised in the driver.
- Stopping. On a stop request (SIGINT/SIGTERM to the command line) the runs in flight are
  cancelled; each resumes from the last checkpoint that reached the driver.

Every node needs this package and torch installed, in the same versions as the driver.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import socket
import tempfile
import time
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import ray

from scaling.errors import UsageError
from scaling.runs import store
from scaling.sweeps.executor import LocalExecutor
from scaling.sweeps.job import Job, Reporter, _Wait, execute, first_job
from scaling.sweeps.worker import PROGRESS_EVERY_S, warning_category
from scaling.train.batches import TokenData
from scaling.train.loop import STOP, Interrupted

if TYPE_CHECKING:
    from ray.actor import ActorHandle

DRAIN_EVERY_S = 0.2  # how often the driver reads the mailbox


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class Mailbox:
    """Events from the tasks to the driver: (kind, job index, attempt, ...) tuples, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def put(self, event: tuple) -> None:
        self.events.append(event)

    def drain(self) -> list[tuple]:
        events, self.events = self.events, []
        return events


class _Courier:
    """A task's progress callback: forwards progress (at most every PROGRESS_EVERY_S) and, when the
    run has written a new checkpoint, its bytes with the metrics so far."""

    def __init__(self, mailbox: ActorHandle, key: tuple[int, int], scratch: Path) -> None:
        self.mailbox, self.key, self.scratch = mailbox, key, scratch
        self.last_progress = 0.0
        self.checkpoint_seen = self._stamp()
        self.branch_points_sent: set[str] = set()

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            stat = (self.scratch / store.CHECKPOINT).stat()
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_size, stat.st_ino

    def send(self, *event: object, wait: bool = False) -> None:
        ref = self.mailbox.put.remote((event[0], *self.key, *event[1:]))
        if wait:
            ray.get(ref)

    def send_branch_points(self) -> None:
        """A WSD stable run's branch-point checkpoints not sent yet (each is written once, atomically)."""
        for path in sorted(self.scratch.glob(store.BRANCH_CHECKPOINTS)):
            if path.name not in self.branch_points_sent:
                self.send("file", path.name, path.read_bytes(), _read(self.scratch / store.METRICS), wait=True)
                self.branch_points_sent.add(path.name)

    def __call__(self, done: int, total: int, rate: float) -> None:
        self.send_branch_points()
        stamp = self._stamp()
        if stamp is not None and stamp != self.checkpoint_seen:
            self.checkpoint_seen = stamp
            checkpoint = (self.scratch / store.CHECKPOINT).read_bytes()  # replaced atomically: whole
            self.send("checkpoint", checkpoint, _read(self.scratch / store.METRICS), wait=True)
        now = time.monotonic()
        if now - self.last_progress >= PROGRESS_EVERY_S or done >= total:
            self.last_progress = now
            self.send("progress", done, total, rate)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


@ray.remote(max_retries=0)
def train_task(job: Job, train: np.ndarray, val: np.ndarray, val_token_bytes: np.ndarray,
               checkpoint: bytes | None, metrics: bytes, threads: int, mailbox: ActorHandle,
               key: tuple[int, int]) -> tuple[dict, bytes]:
    """One run on a Ray worker, resumed from `checkpoint` when given; returns (summary, metrics.jsonl)."""
    scratch = Path(tempfile.mkdtemp(prefix=f"scaling-{job.spec.run_id}-"))
    courier = _Courier(mailbox, key, scratch)
    saved_showwarning = warnings.showwarning
    warnings.showwarning = lambda message, category, *a, **k: courier.send("warning", str(message),
                                                                            category.__name__)
    try:
        if checkpoint is not None:
            (scratch / store.CHECKPOINT).write_bytes(checkpoint)
            courier.checkpoint_seen = courier._stamp()
        (scratch / store.METRICS).write_bytes(metrics)
        courier.send("started", socket.gethostname(), os.getpid())
        data = TokenData(train=train, val=val, val_token_bytes=val_token_bytes)
        summary = execute(Job(job.spec, scratch, job.cache), courier, threads=threads, data=data)
        summary["node"] = socket.gethostname()
        courier.send_branch_points()  # the last one is saved after the last progress call
        courier.send("flush", wait=True)  # every event of this run is in the mailbox before the result
        return summary, _read(scratch / store.METRICS)
    finally:
        warnings.showwarning = saved_showwarning
        shutil.rmtree(scratch, ignore_errors=True)


class RayExecutor(LocalExecutor):
    """Runs each job as a Ray task; see the module docstring."""

    def __init__(self, workers: int | None = None, threads_per_run: int | None = None, runs_per_gpu: int = 4,
                 expected: list | None = None, address: str | None = None, max_retries: int = 3) -> None:
        super().__init__(workers, threads_per_run, runs_per_gpu, expected)
        self.address = address
        self.max_retries = max_retries

    def run(self, jobs: Iterable[Job | _Wait], reporter: Reporter) -> Iterator[tuple[Job, dict]]:
        source = iter(jobs)
        first = first_job(source)
        if first is None:
            return
        started_here = not ray.is_initialized()
        if started_here:
            if self.address is None:  # a local instance of our own: it reports no usage stats, unless asked
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            ray.init(address=self.address, logging_level=logging.WARNING, log_to_driver=False,
                     include_dashboard=False)
        try:
            yield from self._run(first, source, reporter)
        finally:
            if started_here:
                ray.shutdown()

    def _resources(self, first: Job) -> tuple[int, float, int]:
        """(threads per run, GPUs per run, runs in flight), checked against what the cluster has.
        Runs in flight: executor.workers, else as many as the cluster's CPUs (and GPUs) hold."""
        train = first.spec.train
        threads = self.threads_per_run or train.threads or 1
        cluster = ray.cluster_resources()
        cpus = cluster.get("CPU", 0)
        device = train.device
        gpus = 0.0
        if device == "cuda" or (device == "auto" and cluster.get("GPU", 0) > 0):
            gpus = 1.0 / self.runs_per_gpu
        if cpus < threads:
            raise UsageError(f"executor.threads_per_run is {threads} but the Ray cluster has {cpus:g} CPUs")
        if gpus and cluster.get("GPU", 0) <= 0:
            raise UsageError("train.device is 'cuda' but the Ray cluster has no GPUs")
        slots = int(cpus // threads)
        if gpus:
            slots = min(slots, int(round(cluster["GPU"] * self.runs_per_gpu)))
        return threads, gpus, self.workers or max(1, slots)

    def _run(self, first: Job, source: Iterator[Job | _Wait], reporter: Reporter) -> Iterator[tuple[Job, dict]]:
        threads, gpus, cap = self._resources(first)
        cache = first.cache
        train, val = ray.put(np.ascontiguousarray(cache.train_tokens())), ray.put(cache.val_tokens())
        val_bytes = ray.put(cache.val_token_bytes())
        # mypy types a decorated class as the class itself (a class decorator's type is not applied),
        # so it does not see the actor's .remote(), with ray's types or without them (ray not installed)
        mailbox = Mailbox.remote()  # type: ignore[attr-defined]
        options = {"num_cpus": threads, "num_gpus": gpus}
        source = itertools.chain([first], source)
        tasks = _Tasks(reporter)
        in_flight: dict = {}     # ObjectRef -> job index
        exhausted = False

        def submit(i: int) -> None:
            job = tasks.jobs[i]
            checkpoint_path = job.run_dir / store.CHECKPOINT
            checkpoint = checkpoint_path.read_bytes() if checkpoint_path.exists() else None
            ref = train_task.options(**options, name=f"train {job.spec.run_id}").remote(
                job, train, val, val_bytes, checkpoint, _read(job.run_dir / store.METRICS), threads, mailbox,
                (i, tasks.attempt[i]))
            in_flight[ref] = i

        try:
            while not exhausted or in_flight:
                while not exhausted and len(in_flight) < cap:
                    job = next(source, None)
                    if job is None:
                        exhausted = True
                        break
                    if isinstance(job, _Wait):  # nothing ready until a run in flight gets further
                        break
                    submit(tasks.add(job))
                if STOP.is_set():  # runs in flight are cancelled; each resumes from its last checkpoint here
                    raise Interrupted()
                if not in_flight:  # the source waits on a run whose summary the driver is writing
                    time.sleep(DRAIN_EVERY_S)
                    continue
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=DRAIN_EVERY_S)
                tasks.deliver(ray.get(mailbox.drain.remote()))
                for ref in ready:
                    i = in_flight.pop(ref)
                    job = tasks.jobs[i]
                    try:
                        summary, metrics = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # the run raised: not a worker failure
                        raise _cause(exc, job) from None
                    except ray.exceptions.RayError as exc:  # the worker or its node died
                        tasks.reschedule(i, exc, self.max_retries)
                        submit(i)
                        continue
                    store.write_atomic(job.run_dir / store.METRICS, metrics)
                    yield job, summary
        finally:
            for ref in in_flight:
                ray.cancel(ref, force=True)
            ray.kill(mailbox)


class _Tasks:
    """The jobs a Ray run has taken, each with its attempt (reschedules so far); what their tasks
    send through the mailbox goes into the run store and to the reporter."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.jobs: list[Job] = []     # by the index the events carry
        self.attempt: list[int] = []
        self.started: list[bool] = []

    def add(self, job: Job) -> int:
        self.jobs.append(job)
        self.attempt.append(0)
        self.started.append(False)
        return len(self.jobs) - 1

    def deliver(self, events: list) -> None:
        for kind, i, n, *rest in events:
            if n != self.attempt[i]:
                continue  # from a task that has since died and been rescheduled
            job = self.jobs[i]
            if kind == "started" and not self.started[i]:
                self.started[i] = True
                self.reporter.started(job)
            elif kind == "progress":
                self.reporter.progress(job, *rest)
            elif kind == "checkpoint":
                store.write_atomic(job.run_dir / store.CHECKPOINT, rest[0])
                store.write_atomic(job.run_dir / store.METRICS, rest[1])
            elif kind == "file":  # a branch-point checkpoint of a WSD stable run, and its records
                store.write_atomic(job.run_dir / store.METRICS, rest[2])  # first: the branch copies them
                store.write_atomic(job.run_dir / rest[0], rest[1])
            elif kind == "warning":
                warnings.warn(rest[0], warning_category(rest[1]), stacklevel=1)

    def reschedule(self, i: int, exc: Exception, max_retries: int) -> None:
        """Count another attempt of job `i`, whose worker died, with a warning; raise when it
        has had max_retries already."""
        job = self.jobs[i]
        if self.attempt[i] >= max_retries:
            raise RuntimeError(f"run {job.spec.run_id}: its Ray worker failed "
                               f"{self.attempt[i] + 1} times, the last with {exc}") from exc
        self.attempt[i] += 1
        warnings.warn(f"run {job.spec.run_id}: its Ray worker died ({type(exc).__name__}); "
                      f"rescheduled {_resume_point(job)} (retry {self.attempt[i]} of "
                      f"{max_retries})", RuntimeWarning, stacklevel=1)


def _resume_point(job: Job) -> str:
    path = job.run_dir / store.CHECKPOINT
    if not path.exists():
        return "from the start (no checkpoint had reached the driver)"
    import torch

    step = torch.load(path, map_location="cpu", weights_only=True)["step"]
    return f"from its checkpoint at step {step}"


def _cause(exc: BaseException, job: Job) -> BaseException:
    """The run's own exception out of a RayTaskError, with the worker's traceback as a note."""
    cause = getattr(exc, "cause", None)
    if not isinstance(cause, BaseException):
        return RuntimeError(f"run {job.spec.run_id} failed on its Ray worker:\n{exc}")
    if not isinstance(cause, UsageError) and hasattr(cause, "add_note"):
        cause.add_note(f"on the Ray worker training {job.spec.run_id}:\n{exc}")
    return cause
