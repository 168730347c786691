"""Executors run a sweep's jobs and hand back each run's summary.

The sweep (the driver) owns the run store's bookkeeping: it writes config.yaml before a job
starts and summary.json after it returns. An executor only turns a `Job` into a summary, so a
distributed executor needs nothing but the job (picklable) and the token arrays.

Packing. A tiny model cannot use a whole machine: on 2 CPU cores two single-threaded runs side
by side train more tokens per second than one run on two threads, and on a GPU several tiny runs
fit at once. The local executor therefore keeps `workers` runs in flight, each in its own worker
process (multiprocessing, 'spawn' context: safe with CUDA, and nothing of the driver's state is
inherited) with `threads_per_run` torch threads. The rule for the defaults (`default_workers`):

- threads_per_run: `executor.threads_per_run`, else `train.threads`, else 1;
- workers on CPU: the cores this process may use // threads_per_run;
- workers on CUDA: GPUs x `executor.runs_per_gpu`, at most the cores // threads_per_run (each
  run needs a core to feed its GPU); on MPS: runs_per_gpu, likewise capped;
- never more workers than runs; with one worker the runs train in this process, one after another,
  and so does a sweep too small to pay for starting workers (under POOL_MIN_SECONDS of estimated
  single-core time: the test suite's micro sweeps).

Determinism. torch's CPU kernels split reductions by thread count, so a run's losses differ in
the last bits between 1 and 2 threads. The thread count is therefore fixed for all the runs of a
sweep (default 1), every run sets it before training, and summary.json records it as `threads`.
How many runs share the machine changes no run's result: each run is alone in its process with
the same thread count, the same seed and the same batches.

Scheduling. Runs are handed out in the order given; a sweep gives them longest first
(scaling.sweep.driver.job_order), which keeps the cores busy until the end instead of leaving one core
on the biggest run. Progress and warnings of a worker are forwarded to the driver, which calls
the reporter.

Waiting. A lazy job source may yield `WAIT` instead of a job: nothing is ready now, but a run in
flight will make something ready (a WSD branch waits for its stable run's checkpoint). The
executor asks again when a run ends or within a second, and ends when the source is exhausted.

Stopping. A stop request (scaling.train.loop.STOP, which the command line sets on SIGINT or
SIGTERM) reaches each worker as SIGTERM: its run stops after the current step with a checkpoint,
as in-process, and no further run starts. Workers ignore SIGINT (the driver decides) and die
with the driver.
"""

from __future__ import annotations

import builtins
import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from scaling.data.tokens import TokenCache
from scaling.errors import UsageError
from scaling.train.loop import STOP, RunSpec, TokenData, request_stop, train_run

PROGRESS_EVERY_S = 0.1  # a worker forwards a run's progress at most this often
STOP_GRACE_S = 10.0     # how long a stopped worker has to checkpoint and leave before it is killed
# Starting a worker costs seconds (it imports torch), so with `workers` left to the rule a sweep
# estimated (at ASSUMED_FLOPS, one core) to take less than POOL_MIN_SECONDS trains in this process.
ASSUMED_FLOPS = 15e9
POOL_MIN_SECONDS = 20.0
WAIT_POLL_S = 0.5  # how often an idle worker asks a waiting job source again


class _Wait:
    """What a lazy job source yields when no job is ready yet but a run in flight will make one
    ready; the executor asks again later (see the module docstring)."""

    def __repr__(self) -> str:
        return "WAIT"


WAIT = _Wait()


@dataclass(frozen=True)
class Job:
    spec: RunSpec
    run_dir: Path
    cache: TokenCache


class Reporter(Protocol):
    """What a sweep tells its user while it works (a progress display, a log). The driver calls
    begin and finished; the executor calls started and progress. With several runs in flight,
    calls for different jobs interleave (between a job's started and its finished)."""

    def begin(self, jobs: list[Job]) -> None: ...

    def started(self, job: Job) -> None: ...

    def finished(self, job: Job, summary: dict) -> None: ...

    def progress(self, job: Job, tokens_done: int, tokens_total: int, tokens_per_s: float) -> None: ...


def with_threads(spec: RunSpec, threads: int | None) -> RunSpec:
    """The run with its torch thread count set (threads are not part of the run id)."""
    if threads is None or spec.train.threads == threads:
        return spec
    return replace(spec, train=spec.train.model_copy(update={"threads": threads}))


def token_data(cache: TokenCache) -> TokenData:
    return TokenData(train=cache.train_tokens(), val=cache.val_tokens(), val_token_bytes=cache.val_token_bytes())


def execute(job: Job, progress=None, threads: int | None = None, data: TokenData | None = None) -> dict:
    """Train one run from its job description (resuming from its checkpoint when there is one).
    The summary records the torch thread count the run trained with."""
    import torch

    summary = train_run(with_threads(job.spec, threads), data or token_data(job.cache), job.run_dir,
                        progress=progress)
    summary["threads"] = torch.get_num_threads()
    return summary


def job_flops(job: Job) -> float:
    from scaling.train.model import flops_per_token

    start = (job.spec.branch_step or 0) * job.spec.train.batch_tokens  # a WSD branch trains its cooldown
    return float(flops_per_token(job.spec.model)["exact"]) * (job.spec.tokens - start)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def visible_gpus() -> list[str]:
    """CUDA devices this process may use, as CUDA_VISIBLE_DEVICES entries."""
    import torch

    if not torch.cuda.is_available():
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed:
        return [d.strip() for d in listed.split(",") if d.strip()][:torch.cuda.device_count()]
    return [str(i) for i in range(torch.cuda.device_count())]


def run_device(device: str) -> str:
    """The device kind `train.device` resolves to in this process (auto: cuda, else mps, else cpu)."""
    import torch

    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def default_workers(device: str, threads_per_run: int, runs_per_gpu: int, cores: int | None = None,
                    gpus: int | None = None) -> int:
    """How many runs to keep in flight: the rule in the module docstring."""
    cpu_slots = max(1, (cores or usable_cores()) // threads_per_run)
    if device == "cuda":
        return max(1, min((len(visible_gpus()) if gpus is None else gpus) * runs_per_gpu, cpu_slots))
    if device == "mps":
        return max(1, min(runs_per_gpu, cpu_slots))
    return cpu_slots


def first_job(source: Iterator):
    """The source's first job, waiting while it yields WAIT; None when it has no jobs."""
    first = next(source, None)
    while first is WAIT:  # a source waits only on runs in flight: none are, at the start
        time.sleep(WAIT_POLL_S)
        first = next(source, None)
    return first


class LocalExecutor:
    """Runs jobs on this machine: `workers` at a time in worker processes, or one after another
    in this process when there is one worker.

    `run` takes the jobs as a list or as any iterable, which it reads lazily, one job each time a
    worker is free, in the order given: a driver that locks each run as the executor takes it
    holds only the locks of runs in training. `expected` (the runs the
    sweep means to train, anything with a `.spec`) informs the defaults when jobs come lazily.
    """

    def __init__(self, workers: int | None = None, threads_per_run: int | None = None, runs_per_gpu: int = 4,
                 expected: list | None = None):
        self.workers = workers
        self.threads_per_run = threads_per_run
        self.runs_per_gpu = runs_per_gpu
        self.expected = expected

    def plan(self, runs: list, bounded: bool = True) -> tuple[int, int]:
        """(workers, threads per run) for these runs (Jobs or anything with a `.spec`). Unless
        `bounded` is False (more runs may come), a sweep too small for workers gets one."""
        train = runs[0].spec.train
        threads = self.threads_per_run or train.threads or 1
        workers = self.workers
        if workers is None:
            small = bounded and sum(job_flops(run) for run in runs) / ASSUMED_FLOPS < POOL_MIN_SECONDS
            workers = 1 if small else default_workers(run_device(train.device), threads, self.runs_per_gpu)
        return max(1, min(workers, len(runs)) if bounded else workers), threads

    def run(self, jobs: Iterable[Job], reporter: Reporter) -> Iterator[tuple[Job, dict]]:
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
            yield from self._run_pool(source, first.spec.train.device, reporter, workers, threads)

    @staticmethod
    def _run_here(jobs: Iterator[Job], reporter: Reporter, threads: int) -> Iterator[tuple[Job, dict]]:
        import torch

        before = torch.get_num_threads()
        try:
            for job in jobs:
                if job is WAIT:  # runs one at a time: the run waited for ended before this call
                    time.sleep(WAIT_POLL_S)
                    continue
                reporter.started(job)
                yield job, execute(job, lambda done, total, rate, job=job: reporter.progress(job, done, total, rate),
                                   threads=threads)
        finally:
            torch.set_num_threads(before)

    @staticmethod
    def _run_pool(source: Iterator[Job], device: str, reporter: Reporter, workers: int, threads: int):
        gpus = visible_gpus() if run_device(device) == "cuda" else []
        context = multiprocessing.get_context("spawn")
        events = context.Queue()
        pool: list = []            # (process, inbox) by worker index
        jobs: list[Job] = []       # the jobs taken so far, by the index the events carry
        busy: dict[int, int] = {}  # worker index -> job index

        idle: list[int] = []       # worker indices (started or not) whose source said WAIT
        exhausted = [False]

        def give(index: int) -> bool | _Wait:
            """Hand worker `index` the next job (starting the worker the first time); False if none
            is left, or a stop was requested; WAIT if none is ready yet."""
            job = None if STOP.is_set() or exhausted[0] else next(source, None)
            if job is None:
                exhausted[0] = True
                return False
            if job is WAIT:
                return WAIT
            jobs.append(job)
            if index == len(pool):
                inbox = context.Queue()
                gpu = gpus[index % len(gpus)] if gpus else None
                process = context.Process(target=_worker_main, name=f"scaling-worker-{index}", daemon=True,
                                          args=(index, threads, gpu, inbox, events, os.getpid()))
                process.start()
                pool.append((process, inbox))
            busy[index] = len(jobs) - 1
            pool[index][1].put((busy[index], job))
            return True

        def retry_idle() -> None:
            """Ask the source again for the idle workers, lowest index first (so that workers start
            in order), until it waits again or is exhausted."""
            while idle:
                given = give(idle[0])
                if given is WAIT:
                    return
                index = idle.pop(0)
                if not given and index < len(pool):
                    pool[index][1].put(None)

        try:
            for index in range(workers):
                given = give(index)
                if given is WAIT:
                    idle.extend(range(index, workers))
                    break
                if not given:
                    break
            dead_since: dict[int, float] = {}
            stopping = False
            while busy or idle:
                try:
                    event = events.get(timeout=WAIT_POLL_S if idle else 0.5)
                except queue.Empty:
                    event = None
                if idle and not STOP.is_set():
                    retry_idle()
                elif idle:
                    idle.clear()
                if STOP.is_set() and not stopping:  # each run in training stops after its step, with a checkpoint
                    stopping = True
                    for index in busy:
                        pool[index][0].terminate()
                _check_alive(pool, busy, jobs, dead_since)
                if event is None:
                    continue
                kind, index, i, *rest = event
                job = jobs[i] if i is not None else None
                if kind == "started":
                    reporter.started(job)
                elif kind == "progress":
                    reporter.progress(job, *rest)
                elif kind == "warning":
                    warnings.warn(rest[0], _warning_category(rest[1]), stacklevel=1)
                elif kind == "error":
                    raise _unpickle_error(rest[0], rest[1], job)
                elif kind == "done":
                    del busy[index]
                    given = give(index)  # keep the worker busy before the driver writes the summary
                    if given is WAIT:
                        idle.append(index)
                        idle.sort()
                    elif not given:
                        pool[index][1].put(None)
                    yield job, rest[0]
        finally:
            _stop(pool, busy)
            events.close()
            events.cancel_join_thread()


def _check_alive(pool, busy: dict[int, int], jobs: list[Job], dead_since: dict[int, float]) -> None:
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


def _stop(pool, busy: dict[int, int]) -> None:
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


def _warning_category(name: str) -> type[Warning]:
    category = getattr(builtins, name, None)
    return category if isinstance(category, type) and issubclass(category, Warning) else UserWarning


def _pickle_error(exc: BaseException) -> bytes | None:
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
        return data
    except Exception:
        return None


def _unpickle_error(data: bytes | None, trace: str, job: Job) -> BaseException:
    """The worker's exception, raised again in the driver with the worker's traceback as a note."""
    exc = pickle.loads(data) if data is not None else None
    if exc is None or not isinstance(exc, BaseException):
        return RuntimeError(f"run {job.spec.run_id} failed in its worker process:\n{trace}")
    if not isinstance(exc, UsageError) and hasattr(exc, "add_note"):
        exc.add_note(f"in the worker process training {job.spec.run_id}:\n{trace}")
    return exc


def die_with_parent(parent_pid: int) -> None:
    """End this worker if the driver dies (SIGKILL gives it no chance to stop us): on Linux the
    kernel does it (PR_SET_PDEATHSIG); elsewhere a thread watches the parent's pid."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            PR_SET_PDEATHSIG = 1
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _worker_main(index: int, threads: int, gpu: str | None, inbox, events, parent_pid: int) -> None:
    """A worker process: train the jobs the driver sends, one at a time, until it sends None."""
    die_with_parent(parent_pid)
    # Ctrl-C reaches the whole process group: the driver decides, and forwards a stop as SIGTERM,
    # on which the run stops after its current step with a checkpoint (train.Interrupted).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: request_stop())
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    import torch

    torch.set_num_threads(threads)
    current = [None]

    def show_warning(message, category, filename, lineno, file=None, line=None):
        events.put(("warning", index, current[0], str(message), category.__name__))

    warnings.showwarning = show_warning
    cached: dict[Path, TokenData] = {}  # the token arrays of the cache, opened once per worker
    while True:
        item = inbox.get()
        if item is None:
            break
        i, job = item
        current[0] = i
        events.put(("started", index, i))
        last = [0.0]

        def progress(done, total, rate, i=i):
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or done >= total:
                last[0] = now
                events.put(("progress", index, i, done, total, rate))

        try:
            if job.cache.path not in cached:
                cached[job.cache.path] = token_data(job.cache)
            summary = execute(job, progress, threads=threads, data=cached[job.cache.path])
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the driver
            events.put(("error", index, i, _pickle_error(exc), traceback.format_exc()))
            break
        events.put(("done", index, i, summary))
    events.close()
    events.join_thread()
