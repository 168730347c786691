"""The sweep: plan the grid, and train the runs not yet ended, each into the run store.

`run_sweep` plans (scaling.sweeps.plan), finds the runs still to train (those whose summary says
they ended are skipped: a second invocation trains nothing), orders them longest first, and
hands them to the executor (scaling.sweeps.executor, or Ray) through its claims
(scaling.sweeps.claims), which lock each run as the executor takes it and hold WSD branches back
until their checkpoints exist. Each summary the executor returns is written to the run's folder,
and runs.csv after it. A diverged run is followed by its retry, if train.retries allows.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from scaling.config import SweepConfig, load_config
from scaling.data.tokens import prepare_tokens
from scaling.runs import store
from scaling.sweeps.claims import Claims
from scaling.sweeps.executors import make_executor
from scaling.sweeps.job import Job, Reporter, token_data
from scaling.sweeps.plan import PlannedRun, job_order, plan
from scaling.sweeps.state import pending
from scaling.train.batches import check_data
from scaling.train.loop import STOP, Interrupted


def warn_repeated_data(planned: list[PlannedRun], train_tokens: int) -> None:
    largest = max(run.spec.tokens for run in planned)
    if largest > train_tokens:
        warnings.warn(f"token budget {largest:,} exceeds the {train_tokens:,} training tokens: "
                      f"runs above that repeat data (up to {largest / train_tokens:.2f} epochs, "
                      "recorded as 'epochs' in each summary)", stacklevel=2)


@dataclass(frozen=True)
class SweepResult:
    sweep_dir: Path
    trained: list[dict]   # summaries of the runs trained (or resumed) by this call
    skipped: list[dict]   # summaries of runs that had already ended (or another sweep ended)
    table: pd.DataFrame   # runs.csv as written


class SilentReporter:
    def begin(self, jobs: list[Job]) -> None: pass

    def started(self, job: Job) -> None: pass

    def progress(self, job: Job, tokens_done: int, tokens_total: int, tokens_per_s: float) -> None: pass

    def finished(self, job: Job, summary: dict) -> None: pass


def sweep(config: SweepConfig | str | Path, runs_dir: Path | str = "runs", *, cache_dir: Path | None = None,
          reporter: Reporter | None = None) -> SweepResult:
    """Train every run of the sweep `config` (a SweepConfig or a YAML path) not yet ended into
    runs_dir/<name>, as `scaling sweep` does (`scaling.sweep(...)` is this function). Loads torch."""
    cfg = config if isinstance(config, SweepConfig) else load_config(config)
    return run_sweep(cfg, runs_dir, cache_dir, reporter)


def run_sweep(cfg: SweepConfig, runs_dir: Path | str = "runs", cache_dir: Path | None = None,
              reporter: Reporter | None = None, planned: list[PlannedRun] | None = None) -> SweepResult:
    """Train every run of the grid that has not ended yet, and write runs/<sweep>/runs.csv.

    Runs that fail are left for the next invocation; runs another sweep is training are waited for.
    `planned`: other runs than the grid's, planned with this config's recipe (a validation's).
    """
    sweep_dir = Path(runs_dir) / cfg.name
    store.check_output(sweep_dir, [store.TABLE])   # a folder where runs.csv goes: refused before any training
    planned = plan(cfg) if planned is None else planned
    branches: dict[str, list[str]] = {}  # stable run id -> its branches' ids
    for run in planned:
        if run.spec.branch_of is not None:
            branches.setdefault(run.spec.branch_of, []).append(run.run_id)
    todo, ended = pending(cfg, planned, sweep_dir)
    todo = job_order(todo)
    trained = {}
    if todo:
        executor = make_executor(cfg.executor, todo)  # before any file is written: kind ray may lack ray
        cache = prepare_tokens(cfg, cache_dir)
        check_data(cfg.model.context_length, cfg.train.eval_tokens, token_data(cache))
        warn_repeated_data(planned, cache.meta["train_tokens"])
        claims = Claims(cfg, sweep_dir, cache)
        reporter = reporter or SilentReporter()
        reporter.begin([Job(run.spec, sweep_dir / run.run_id, cache) for run in todo])
        while todo:
            try:
                for job, summary in executor.run(claims.jobs(todo), reporter):
                    if job.spec.stable:
                        summary["branches"] = branches.get(job.spec.run_id, [])
                    store.write_json(job.run_dir / store.SUMMARY, summary)
                    claims.release(job.spec.run_id)
                    store.write_table(sweep_dir)
                    reporter.finished(job, summary)
                    trained[job.spec.run_id] = summary
                    if STOP.is_set():
                        raise Interrupted()
            except OSError as exc:
                claims.fail(exc)
                raise
            finally:
                claims.release_all()
            todo, ended = pending(cfg, planned, sweep_dir)
            # A run that failed waits for next time, and so do the branches of a stable run that failed.
            todo = job_order([run for run in todo if run.run_id not in trained
                              and (run.spec.branch_of is None
                                   or trained.get(run.spec.branch_of, {}).get("status", "finished") in store.ENDED)])
    skipped = [summary for run_id, summary in ended.items() if run_id not in trained]
    return SweepResult(sweep_dir, list(trained.values()), skipped, store.write_table(sweep_dir))
