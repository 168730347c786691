"""The sweep: expand the N x D grid into runs, plan them, and run those not yet finished.

Run ids come from the run's content (shape, token budget, training settings, seed and the
token cache it reads), so the same run always lands in the same folder: a second invocation
finds its summary and trains nothing, and an interrupted run resumes from its checkpoint.

Two sweeps may share a runs directory. A run is trained under its lock (scaling.locks), held
by the driver from the moment the executor takes the job until its summary.json is written; a
run locked by another process is skipped and taken up again at the end, when this sweep waits
for it: the other process ends it, or dies and leaves it to be resumed here. A run that
diverges may be retried at a lower learning rate (train.retries): the retry is a run of its
own, with its own id, whose summary names the run it retries in `retry_of`.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import yaml

from scaling import locks, store
from scaling.config import Shape, SweepConfig, run_lr
from scaling.executor import Job, make_executor, token_data
from scaling.model import GPTConfig, flops_per_token, param_counts
from scaling.tokens import prepare_tokens
from scaling.train import STOP, Interrupted, RunSpec, check_data

# Settings that change how a run is logged or scheduled, or what happens after it diverges, not
# what it computes.
NOT_IN_RUN_ID = ("log_interval", "checkpoint_interval", "eval_interval", "threads", "device",
                 "divergence_factor", "retries", "retry_lr_factor")
ENDED = ("finished", "diverged")  # a run with one of these statuses is never trained again
LOCK_POLL_S = 0.5
# Achieved FLOP/s assumed for wall-time estimates before any run in the store has been timed.
DEFAULT_CPU_FLOPS = 15e9


@dataclass(frozen=True)
class PlannedRun:
    spec: RunSpec
    shape: Shape
    n_params_total: int
    n_params_non_embedding: int
    flops_6nd: float
    flops_exact: float
    attempt: int = 0  # which retry of a diverged run this is (0: the planned run itself)

    @property
    def run_id(self) -> str:
        return self.spec.run_id


def _compact(n: int) -> str:
    """250000 -> '250K', 2000000 -> '2M', for readable run ids."""
    for unit, size in (("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size and n % (size // 1000 or 1) == 0:
            return f"{n / size:g}{unit}"
    return str(n)


def run_id(cfg: SweepConfig, shape, tokens: int, lr: float) -> str:
    content = {
        "model": cfg.model.model_dump(), "shape": shape.model_dump(exclude={"lr"}), "lr": lr,
        "tokens": tokens, "seed": cfg.seed, "corpus": cfg.corpus.model_dump(),
        "tokenizer": cfg.tokenizer.model_dump(),
        "train": cfg.train.model_dump(exclude=set(NOT_IN_RUN_ID)),
    }
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:8]
    return f"d{shape.d_model}-l{shape.n_layers}-h{shape.n_heads}-D{_compact(tokens)}-{digest}"


def planned_run(cfg: SweepConfig, shape: Shape, tokens: int, lr: float) -> PlannedRun:
    model = GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size)
    n_total, n_non_embedding = param_counts(model)
    spec = RunSpec(run_id=run_id(cfg, shape, tokens, lr), model=model, train=cfg.train,
                   lr=lr, tokens=tokens, seed=cfg.seed)
    return PlannedRun(spec, shape, n_total, n_non_embedding, flops_6nd=6.0 * n_non_embedding * tokens,
                      flops_exact=float(flops_per_token(model)["exact"]) * tokens)


def plan(cfg: SweepConfig) -> list[PlannedRun]:
    """Every (shape, budget) pair of the grid, smallest model and budget first."""
    shapes = sorted(cfg.grid.models, key=lambda s: (s.d_model * s.d_model * s.n_layers, s.d_model))
    return [planned_run(cfg, shape, tokens, run_lr(cfg.train, shape))
            for shape in shapes for tokens in sorted(set(cfg.grid.tokens))]


def retry(cfg: SweepConfig, run: PlannedRun, summary: dict) -> PlannedRun | None:
    """The run that retries a diverged one at train.retry_lr_factor times its learning rate, if
    train.retries allows another."""
    if summary["status"] != "diverged" or run.attempt >= cfg.train.retries:
        return None
    again = planned_run(cfg, run.shape, run.spec.tokens, run.spec.lr * cfg.train.retry_lr_factor)
    return replace(again, spec=replace(again.spec, retry_of=run.run_id), attempt=run.attempt + 1)


def achieved_flops(sweep_dir: Path) -> float:
    """Median exact FLOP/s of this store's finished runs, else a conservative CPU default."""
    if not Path(sweep_dir).is_dir():
        return DEFAULT_CPU_FLOPS
    table = store.read_runs(sweep_dir)
    done = table[(table.status == "finished") & (table.wall_s > 0)]
    if done.empty:
        return DEFAULT_CPU_FLOPS
    return float((done.flops_exact / done.wall_s).median())


def run_config(cfg: SweepConfig, planned: PlannedRun, cache_key: str) -> dict:
    """The resolved settings of one run, as written to its config.yaml."""
    spec = planned.spec
    return {
        "run_id": spec.run_id, "sweep": cfg.name, "retry_of": spec.retry_of, "seed": spec.seed,
        "tokens": spec.tokens,
        "lr": spec.lr, "model": {**cfg.model.model_dump(), "d_model": spec.model.d_model,
                                 "n_layers": spec.model.n_layers, "n_heads": spec.model.n_heads,
                                 "vocab_size": spec.model.vocab_size},
        "train": cfg.train.model_dump(), "corpus": cfg.corpus.model_dump(),
        "tokenizer": cfg.tokenizer.model_dump(), "token_cache": cache_key,
        "n_params_total": planned.n_params_total,
        "n_params_non_embedding": planned.n_params_non_embedding,
    }


def pending(cfg: SweepConfig, planned: list[PlannedRun], sweep_dir: Path) -> tuple[list[PlannedRun], dict]:
    """Runs still to train (retries of diverged runs included), and the summaries of those that
    ended, by run id."""
    todo, ended = [], {}
    for run in planned:
        while run is not None:
            summary = store.read_summary(sweep_dir / run.run_id)
            if summary is None or summary["status"] not in ENDED:
                todo.append(run)
                break
            ended[run.run_id] = summary
            run = retry(cfg, run, summary)
    return todo, ended


def warn_repeated_data(planned: list[PlannedRun], train_tokens: int) -> None:
    largest = max(run.spec.tokens for run in planned)
    if largest > train_tokens:
        warnings.warn(f"token budget {largest:,} exceeds the {train_tokens:,} training tokens: "
                      f"runs above that repeat data (up to {largest / train_tokens:.2f} epochs, "
                      "recorded as 'epochs' in each summary)", stacklevel=2)


def write_run_config(run_dir: Path, config: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    store.write_atomic(run_dir / store.CONFIG, yaml.safe_dump(config, sort_keys=False))


@dataclass(frozen=True)
class SweepResult:
    sweep_dir: Path
    trained: list[dict]   # summaries of the runs trained (or resumed) by this call
    skipped: list[dict]   # summaries of runs that had already ended (or another sweep ended)
    table: pd.DataFrame   # runs.csv as written


class SilentReporter:
    def begin(self, jobs): pass

    def started(self, job): pass

    def progress(self, job, tokens_done, tokens_total, tokens_per_s): pass

    def finished(self, job, summary): pass


class Claims:
    """The run locks this sweep holds: taken as the executor takes each job, released when the
    run's summary is written (or by the kernel, when this process dies)."""

    def __init__(self, cfg: SweepConfig, sweep_dir: Path, cache):
        self.cfg, self.sweep_dir, self.cache = cfg, sweep_dir, cache
        self.held: dict[str, locks.Lock] = {}
        self.busy: set[str] = set()  # runs found locked by another process

    def jobs(self, runs: list[PlannedRun]):
        """A job for each run this sweep gets the lock of and that has not ended meanwhile. A run
        that was busy before is waited for; one busy now is left for a later round."""
        for run in runs:
            if STOP.is_set():
                raise Interrupted()
            run_dir = self.sweep_dir / run.run_id
            run_dir.mkdir(parents=True, exist_ok=True)
            lock = locks.try_lock(run_dir / store.LOCK)
            if lock is None and run.run_id in self.busy:
                lock = self._wait(run_dir)
            if lock is None:
                self.busy.add(run.run_id)
                continue
            summary = store.read_summary(run_dir)
            if summary is not None and summary["status"] in ENDED:  # another sweep ended it
                lock.release()
                continue
            self.held[run.run_id] = lock
            store.remove_temps(run_dir)
            write_run_config(run_dir, run_config(self.cfg, run, self.cache.meta["key"]))
            yield Job(run.spec, run_dir, self.cache)

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


def run_sweep(cfg: SweepConfig, runs_dir: Path | str = "runs", cache_dir: Path | None = None,
              reporter=None) -> SweepResult:
    """Train every run of the grid that has not ended yet, and write runs/<sweep>/runs.csv.

    Runs that fail are left for the next invocation; runs another sweep is training are waited for.
    """
    sweep_dir = Path(runs_dir) / cfg.name
    planned = plan(cfg)
    todo, ended = pending(cfg, planned, sweep_dir)
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
            todo = [run for run in todo if run.run_id not in trained]  # a run that failed waits for next time
    skipped = [summary for run_id, summary in ended.items() if run_id not in trained]
    return SweepResult(sweep_dir, list(trained.values()), skipped, store.write_table(sweep_dir))
