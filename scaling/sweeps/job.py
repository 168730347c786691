"""What an executor is handed and hands back: a `Job` (a run and its folder), turned into the
run's summary by `execute`, with a `Reporter` told of its progress.

The sweep (the driver) owns the run store's bookkeeping: it writes config.yaml before a job
starts and summary.json after it returns. An executor only turns a `Job` into a summary, so a
distributed executor needs nothing but the job (picklable) and the token arrays.

Waiting. A lazy job source may yield `WAIT` instead of a job: nothing is ready now, but a run in
flight will make something ready (a WSD branch waits for its stable run's checkpoint). The
executor asks again when a run ends or within a second, and ends when the source is exhausted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from scaling.data.tokens import TokenCache
from scaling.train.batches import TokenData
from scaling.train.loop import ProgressFn, train_run
from scaling.train.spec import RunSpec

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


def execute(job: Job, progress: ProgressFn | None = None, threads: int | None = None,
            data: TokenData | None = None) -> dict:
    """Train one run from its job description (resuming from its checkpoint when there is one).
    The summary records the torch thread count the run trained with."""
    import torch

    summary = train_run(with_threads(job.spec, threads), data or token_data(job.cache), job.run_dir,
                        progress=progress)
    summary["threads"] = torch.get_num_threads()
    return summary


def first_job(source: Iterator[Job | _Wait]) -> Job | None:
    """The source's first job, waiting while it yields WAIT; None when it has no jobs."""
    first = next(source, None)
    while isinstance(first, _Wait):  # a source waits only on runs in flight: none are, at the start
        time.sleep(WAIT_POLL_S)
        first = next(source, None)
    return first
