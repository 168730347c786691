"""Executors run a sweep's jobs and hand back each run's summary.

The sweep (the driver) owns the run store's bookkeeping: it writes config.yaml before a job
starts and summary.json after it returns. An executor only turns a `Job` into a summary, so a
distributed executor needs nothing but the job (picklable) and the token cache path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from scaling.tokens import TokenCache
from scaling.train import RunSpec, TokenData, train_run

@dataclass(frozen=True)
class Job:
    spec: RunSpec
    run_dir: Path
    cache: TokenCache


class Reporter(Protocol):
    """What a sweep tells its user while it works (a progress display, a log). The driver calls
    begin and finished; the executor calls started and progress, from wherever the run is."""

    def begin(self, jobs: list[Job]) -> None: ...

    def started(self, job: Job) -> None: ...

    def finished(self, job: Job, summary: dict) -> None: ...

    def progress(self, job: Job, tokens_done: int, tokens_total: int, tokens_per_s: float) -> None: ...


def execute(job: Job, progress=None) -> dict:
    """Train one run from its job description (resuming from its checkpoint when there is one)."""
    data = TokenData(train=job.cache.train_tokens(), val=job.cache.val_tokens(),
                     val_token_bytes=job.cache.val_token_bytes())
    return train_run(job.spec, data, job.run_dir, progress=progress)


class LocalExecutor:
    """Runs jobs one after another in this process."""

    def run(self, jobs: Iterable[Job], reporter: Reporter) -> Iterator[tuple[Job, dict]]:
        for job in jobs:
            reporter.started(job)
            yield job, execute(job, lambda done, total, rate, job=job: reporter.progress(job, done, total, rate))


def make_executor(kind: str) -> LocalExecutor:
    if kind == "local":
        return LocalExecutor()
    raise ValueError(f"unknown executor {kind!r}")  # config validation already restricts this
