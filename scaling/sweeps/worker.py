"""A worker process of the local executor, and what crosses from it to the driver.

A worker (multiprocessing, 'spawn' context: safe with CUDA, and nothing of the driver's state is
inherited) trains the jobs the driver sends it, one at a time, and sends back events: started,
progress (at most every PROGRESS_EVERY_S), warnings, the summary, or the run's exception with its
traceback, raised again in the driver with its own type.

Stopping. Workers ignore SIGINT (Ctrl-C reaches the whole process group: the driver decides) and
take SIGTERM, which the driver sends on a stop request, as their own stop request: the run stops
after the current step with a checkpoint. They die with the driver, even one killed by SIGKILL.
"""

from __future__ import annotations

import builtins
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import warnings
from multiprocessing.queues import Queue
from pathlib import Path
from typing import TextIO

from scaling.errors import UsageError
from scaling.sweeps.job import Job, execute, token_data
from scaling.train.batches import TokenData
from scaling.train.loop import request_stop

PROGRESS_EVERY_S = 0.1  # a worker forwards a run's progress at most this often


def warning_category(name: str) -> type[Warning]:
    """The warning class a worker's warning named, to issue it again in the driver."""
    category = getattr(builtins, name, None)
    return category if isinstance(category, type) and issubclass(category, Warning) else UserWarning


def pickle_error(exc: BaseException) -> bytes | None:
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
        return data
    except Exception:
        return None


def unpickle_error(data: bytes | None, trace: str, job: Job) -> BaseException:
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

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def worker_main(index: int, threads: int, gpu: str | None, inbox: Queue, events: Queue, parent_pid: int) -> None:
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

    def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                     file: TextIO | None = None, line: str | None = None) -> None:
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

        def progress(done: int, total: int, rate: float, i: int = i,
                     last: list[float] = last) -> None:   # this job's i and clock, bound now
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or done >= total:
                last[0] = now
                events.put(("progress", index, i, done, total, rate))

        try:
            if job.cache.path not in cached:
                cached[job.cache.path] = token_data(job.cache)
            summary = execute(job, progress, threads=threads, data=cached[job.cache.path])
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the driver
            events.put(("error", index, i, pickle_error(exc), traceback.format_exc()))
            break
        events.put(("done", index, i, summary))
    events.close()
    events.join_thread()
