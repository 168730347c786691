"""The local executor: a sweep's jobs trained on this machine, in worker processes or in this one.

It keeps `workers` runs in flight, each in its own worker process (scaling.sweeps.worker) with
`threads_per_run` torch threads, by the rule of scaling.sweeps.packing; with one worker the runs
train in this process, one after another. What a job is and what comes back: scaling.sweeps.job.

Scheduling. Runs are handed out in the order given; a sweep gives them longest first
(scaling.sweeps.plan.job_order), which keeps the cores busy until the end instead of leaving one
core on the biggest run. Progress and warnings of a worker are forwarded to the driver, which
calls the reporter. A source that yields WAIT is asked again when a run ends or within a second.

Stopping. A stop request (scaling.train.loop.STOP, which the command line sets on SIGINT or
SIGTERM) reaches each worker as SIGTERM: its run stops after the current step with a checkpoint,
as in-process, and no further run starts.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import os
import queue
import time
import warnings
from collections.abc import Iterable, Iterator
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue

from scaling.sweeps.job import WAIT, WAIT_POLL_S, Job, Reporter, _Wait, execute, first_job
from scaling.sweeps.packing import run_device, visible_gpus, workers_and_threads
from scaling.sweeps.worker import unpickle_error, warning_category, worker_main
from scaling.train.loop import STOP

STOP_GRACE_S = 10.0  # how long a stopped worker has to checkpoint and leave before it is killed


class LocalExecutor:
    """Runs jobs on this machine: `workers` at a time in worker processes, or one after another
    in this process when there is one worker.

    `run` takes the jobs as a list or as any iterable, which it reads lazily, one job each time a
    worker is free, in the order given: a driver that locks each run as the executor takes it
    holds only the locks of runs in training. `expected` (the runs the
    sweep means to train, anything with a `.spec`) informs the defaults when jobs come lazily.
    """

    def __init__(self, workers: int | None = None, threads_per_run: int | None = None, runs_per_gpu: int = 4,
                 expected: list | None = None) -> None:
        self.workers = workers
        self.threads_per_run = threads_per_run
        self.runs_per_gpu = runs_per_gpu
        self.expected = expected

    def plan(self, runs: list, bounded: bool = True) -> tuple[int, int]:
        """(workers, threads per run) for these runs (Jobs or anything with a `.spec`): the rule of
        scaling.sweeps.packing. Unless `bounded` is False (more runs may come), a sweep too small
        for workers gets one."""
        return workers_and_threads(runs, self.workers, self.threads_per_run, self.runs_per_gpu, bounded)

    def run(self, jobs: Iterable[Job | _Wait], reporter: Reporter) -> Iterator[tuple[Job, dict]]:
        known: list | None
        if isinstance(jobs, (list, tuple)):
            known, source = list(jobs), iter(jobs)
        else:
            known, source = self.expected, iter(jobs)
        first = first_job(source)
        if first is None:
            return
        source = itertools.chain([first], source)
        workers, threads = self.plan(known or [first], bounded=bool(known))
        if workers == 1:
            yield from self._run_here(source, reporter, threads)
        else:
            yield from _Pool(source, first.spec.train.device, workers, threads).run(reporter)

    @staticmethod
    def _run_here(jobs: Iterator[Job | _Wait], reporter: Reporter, threads: int) -> Iterator[tuple[Job, dict]]:
        import torch

        before = torch.get_num_threads()
        try:
            for job in jobs:
                if isinstance(job, _Wait):  # runs one at a time: the run waited for ended before this call
                    time.sleep(WAIT_POLL_S)
                    continue
                reporter.started(job)
                yield job, execute(job, functools.partial(reporter.progress, job), threads=threads)
        finally:
            torch.set_num_threads(before)


class _Pool:
    """`workers` worker processes fed from a job source, each started when it gets its first job."""

    def __init__(self, source: Iterator[Job | _Wait], device: str, workers: int, threads: int) -> None:
        self.source, self.workers, self.threads = source, workers, threads
        self.gpus = visible_gpus() if run_device(device) == "cuda" else []
        self.context = multiprocessing.get_context("spawn")
        self.events = self.context.Queue()
        self.pool: list[tuple[BaseProcess, Queue]] = []    # (process, inbox) by worker index
        self.jobs: list[Job] = []       # the jobs taken so far, by the index the events carry
        self.busy: dict[int, int] = {}  # worker index -> job index
        self.idle: list[int] = []       # worker indices (started or not) whose source said WAIT
        self.exhausted = False

    def give(self, index: int) -> bool | _Wait:
        """Hand worker `index` the next job (starting the worker the first time); False if none
        is left, or a stop was requested; WAIT if none is ready yet."""
        job = None if STOP.is_set() or self.exhausted else next(self.source, None)
        if job is None:
            self.exhausted = True
            return False
        if isinstance(job, _Wait):
            return WAIT
        self.jobs.append(job)
        if index == len(self.pool):
            inbox = self.context.Queue()
            gpu = self.gpus[index % len(self.gpus)] if self.gpus else None
            process = self.context.Process(target=worker_main, name=f"scaling-worker-{index}", daemon=True,
                                           args=(index, self.threads, gpu, inbox, self.events, os.getpid()))
            process.start()
            self.pool.append((process, inbox))
        self.busy[index] = len(self.jobs) - 1
        self.pool[index][1].put((self.busy[index], job))
        return True

    def give_or_park(self, index: int) -> None:
        """After worker `index` finished a run: its next job, or a wait, or leave."""
        given = self.give(index)
        if given is WAIT:
            self.idle.append(index)
            self.idle.sort()
        elif not given:
            self.pool[index][1].put(None)

    def retry_idle(self) -> None:
        """Ask the source again for the idle workers, lowest index first (so that workers start
        in order), until it waits again or is exhausted."""
        while self.idle:
            given = self.give(self.idle[0])
            if given is WAIT:
                return
            index = self.idle.pop(0)
            if not given and index < len(self.pool):
                self.pool[index][1].put(None)

    def start(self) -> None:
        """A job for each worker, as far as the source has them ready."""
        for index in range(self.workers):
            given = self.give(index)
            if given is WAIT:
                self.idle.extend(range(index, self.workers))
                break
            if not given:
                break

    def run(self, reporter: Reporter) -> Iterator[tuple[Job, dict]]:
        try:
            self.start()
            dead_since: dict[int, float] = {}
            stopping = False
            while self.busy or self.idle:
                try:
                    event = self.events.get(timeout=WAIT_POLL_S if self.idle else 0.5)
                except queue.Empty:
                    event = None
                if self.idle and not STOP.is_set():
                    self.retry_idle()
                elif self.idle:
                    self.idle.clear()
                if STOP.is_set() and not stopping:  # each run in training stops after its step, with a checkpoint
                    stopping = True
                    for index in self.busy:
                        self.pool[index][0].terminate()
                _check_alive(self.pool, self.busy, self.jobs, dead_since)
                if event is not None:
                    done = self.handle(event, reporter)
                    if done is not None:
                        yield done
        finally:
            _stop(self.pool, self.busy)
            self.events.close()
            self.events.cancel_join_thread()

    def handle(self, event: tuple, reporter: Reporter) -> tuple[Job, dict] | None:
        """Act on a worker's event; a finished run's job and summary, once its worker has its next job."""
        kind, index, i, *rest = event
        if kind == "warning":       # the only event that may come between jobs (i None)
            warnings.warn(rest[0], warning_category(rest[1]), stacklevel=1)
            return None
        job = self.jobs[i]
        if kind == "started":
            reporter.started(job)
        elif kind == "progress":
            reporter.progress(job, *rest)
        elif kind == "error":
            raise unpickle_error(rest[0], rest[1], job)
        elif kind == "done":
            del self.busy[index]
            self.give_or_park(index)  # keep the worker busy before the driver writes the summary
            return job, rest[0]
        return None


def _check_alive(pool: list[tuple[BaseProcess, Queue]], busy: dict[int, int], jobs: list[Job], dead_since: dict[int,
                 float]) -> None:
    """Raise if a worker died holding a run. A worker flushes its events before it exits, so one
    found dead is given a moment for the driver to read what it sent (its error, say) first."""
    now = time.monotonic()
    for index, i in busy.items():
        process = pool[index][0]
        if process.is_alive():
            continue
        if now - dead_since.setdefault(index, now) > 2.0:
            raise RuntimeError(f"the worker process training {jobs[i].spec.run_id} (pid {process.pid}) died "
                               f"with exit code {process.exitcode}; the run resumes from its last "
                               "checkpoint when the sweep is started again")


def _stop(pool: list[tuple[BaseProcess, Queue]], busy: dict[int, int]) -> None:
    """End the pool: an idle worker is asked to leave; a worker still training gets SIGTERM, on
    which its run stops after the current step with a checkpoint (it resumes in the next sweep);
    one that has not left after STOP_GRACE_S is killed."""
    for index, (process, inbox) in enumerate(pool):
        if not process.is_alive():
            continue
        if index in busy:
            process.terminate()
        try:
            inbox.put(None)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + STOP_GRACE_S
    for process, inbox in pool:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
        inbox.close()
        inbox.cancel_join_thread()
