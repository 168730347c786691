"""The sweep: expand the N x D grid into runs, plan them, and run those not yet finished.

Run ids come from the run's content (shape, token budget, training settings, seed and the
token cache it reads), so the same run always lands in the same folder: a second invocation
finds its summary and trains nothing, and an interrupted run resumes from its checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from scaling import store
from scaling.config import SweepConfig, run_lr
from scaling.executor import Job, make_executor
from scaling.model import GPTConfig, flops_per_token, param_counts
from scaling.tokens import prepare_tokens
from scaling.train import RunSpec

# Settings that change how a run is logged or scheduled, not what it computes.
NOT_IN_RUN_ID = ("log_interval", "checkpoint_interval", "eval_interval", "threads", "device")
# Achieved FLOP/s assumed for wall-time estimates before any run in the store has been timed.
DEFAULT_CPU_FLOPS = 15e9


@dataclass(frozen=True)
class PlannedRun:
    spec: RunSpec
    n_params_total: int
    n_params_non_embedding: int
    flops_6nd: float
    flops_exact: float

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


def plan(cfg: SweepConfig) -> list[PlannedRun]:
    """Every (shape, budget) pair of the grid, smallest model and budget first."""
    runs = []
    for shape in sorted(cfg.grid.models, key=lambda s: (s.d_model * s.d_model * s.n_layers, s.d_model)):
        model = GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size)
        n_total, n_non_embedding = param_counts(model)
        flops = flops_per_token(model)
        lr = run_lr(cfg.train, shape)
        for tokens in sorted(set(cfg.grid.tokens)):
            spec = RunSpec(run_id=run_id(cfg, shape, tokens, lr), model=model, train=cfg.train,
                           lr=lr, tokens=tokens, seed=cfg.seed)
            runs.append(PlannedRun(spec, n_total, n_non_embedding,
                                   flops_6nd=6.0 * n_non_embedding * tokens,
                                   flops_exact=float(flops["exact"]) * tokens))
    return runs


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
        "run_id": spec.run_id, "sweep": cfg.name, "seed": spec.seed, "tokens": spec.tokens,
        "lr": spec.lr, "model": {**cfg.model.model_dump(), "d_model": spec.model.d_model,
                                 "n_layers": spec.model.n_layers, "n_heads": spec.model.n_heads,
                                 "vocab_size": spec.model.vocab_size},
        "train": cfg.train.model_dump(), "corpus": cfg.corpus.model_dump(),
        "tokenizer": cfg.tokenizer.model_dump(), "token_cache": cache_key,
        "n_params_total": planned.n_params_total,
        "n_params_non_embedding": planned.n_params_non_embedding,
    }


def pending(planned: list[PlannedRun], sweep_dir: Path) -> tuple[list[PlannedRun], list[dict]]:
    """Runs still to train, and the summaries of those that already ended."""
    todo, ended = [], []
    for run in planned:
        summary = store.read_summary(sweep_dir / run.run_id)
        if summary is not None and summary.get("status") in ("finished", "diverged"):
            ended.append(summary)
        else:
            todo.append(run)
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
    skipped: list[dict]   # summaries of runs that had already ended
    table: pd.DataFrame   # runs.csv as written


class SilentReporter:
    def begin(self, jobs): pass

    def started(self, job): pass

    def progress(self, job, tokens_done, tokens_total, tokens_per_s): pass

    def finished(self, job, summary): pass


def run_sweep(cfg: SweepConfig, runs_dir: Path | str = "runs", cache_dir: Path | None = None,
              reporter=None) -> SweepResult:
    """Train every run of the grid that has not ended yet, and write runs/<sweep>/runs.csv."""
    sweep_dir = Path(runs_dir) / cfg.name
    planned = plan(cfg)
    todo, ended = pending(planned, sweep_dir)
    trained = []
    if todo:
        executor = make_executor(cfg.executor, todo)  # before any file is written: kind ray may lack ray
        cache = prepare_tokens(cfg, cache_dir)
        warn_repeated_data(planned, cache.meta["train_tokens"])
        jobs = []
        for run in todo:
            write_run_config(sweep_dir / run.run_id, run_config(cfg, run, cache.meta["key"]))
            jobs.append(Job(run.spec, sweep_dir / run.run_id, cache))
        reporter = reporter or SilentReporter()
        reporter.begin(jobs)
        for job, summary in executor.run(jobs, reporter):
            store.write_json(job.run_dir / store.SUMMARY, summary)
            store.write_table(sweep_dir)
            reporter.finished(job, summary)
            trained.append(summary)
    return SweepResult(sweep_dir, trained, ended, store.write_table(sweep_dir))
