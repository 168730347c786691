"""The sweep: expand the N x D grid into runs, plan them, and run those not yet finished.

Run ids come from the run's content (shape, token budget, training settings, seed and the
token cache it reads), so the same run always lands in the same folder: a second invocation
finds its summary and trains nothing, and an interrupted run resumes from its checkpoint.

Two sweeps may share a runs directory. A run is trained under its lock (scaling.runs.locks), held
by the driver from the moment the executor takes the job until its summary.json is written; a
run locked by another process is skipped and taken up again at the end, when this sweep waits
for it: the other process ends it, or dies and leaves it to be resumed here. A run that
diverges may be retried at a lower learning rate (train.retries): the retry is a run of its
own, with its own id, whose summary names the run it retries in `retry_of`.

WSD sweeps (train.schedule 'wsd', Hagele et al. 2024). For each shape the plan holds one stable
run (warmup, then constant lr up to the branch point of the largest budget, saving a checkpoint
at the branch point (1-f)*D_k of every budget D_k) and, for each budget, a branch: the run that
cools down from that checkpoint over the last f*D_k tokens. A branch is a run in the store like
any other (its id is that of a WSD run to D_k, since it computes exactly that run); the stable
run is stored with status 'stable' and is no fit point. The stable runs are issued first; a
branch is issued once its checkpoint exists (while the stable run goes on towards later branch
points, or trains other shapes' runs beside it), or waits for it while the stable run is in
training here. On its first start a branch gets the stable run's checkpoint and the metrics
records up to its branch point copied into its own folder, so its metrics.jsonl is that of the
WSD run it stands for, and it resumes from its own checkpoints after that.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import yaml

from scaling.config import Shape, SweepConfig, run_lr
from scaling.data.tokens import prepare_tokens
from scaling.runs import locks, store
from scaling.sweep.executor import ASSUMED_FLOPS, WAIT, Job, LocalExecutor, token_data
from scaling.sweep.executors import make_executor
from scaling.train.loop import STOP, Interrupted, RunSpec, check_data, cooldown_steps, schedule_bounds
from scaling.train.model import GPTConfig, flops_per_token, param_counts

# Settings that change how a run is logged or scheduled, where and how fast it runs (the same
# computation, up to the last bits of floating point), or what happens after it diverges, not
# what it computes.
NOT_IN_RUN_ID = ("log_interval", "checkpoint_interval", "eval_interval", "threads", "device", "compile",
                 "divergence_factor", "retries", "retry_lr_factor")
# Keys of the WSD schedule: in the run id only when train.schedule is wsd, so that cosine and
# linear runs keep the ids they had before WSD existed.
WSD_KEYS = ("cooldown_fraction", "cooldown_shape")
ENDED = ("finished", "diverged", "stable")  # a run with one of these statuses is never trained again
LOCK_POLL_S = 0.5


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

    @property
    def kind(self) -> str:
        """'stable' (a WSD stable run), 'branch' (a WSD cooldown branch) or 'run'."""
        return "stable" if self.spec.stable else "branch" if self.spec.branch_of else "run"

    @property
    def trained_tokens(self) -> int:
        """Tokens this run trains itself: a branch starts at its branch point."""
        if self.spec.branch_of is None:
            return self.spec.tokens
        return self.spec.tokens - self.spec.branch_step * self.spec.train.batch_tokens

    @property
    def trained_flops_6nd(self) -> float:
        return self.flops_6nd * self.trained_tokens / self.spec.tokens

    @property
    def trained_flops_exact(self) -> float:
        return self.flops_exact * self.trained_tokens / self.spec.tokens


def _compact(n: int) -> str:
    """250000 -> '250K', 2000000 -> '2M', for readable run ids."""
    for unit, size in (("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size and n % (size // 1000 or 1) == 0:
            return f"{n / size:g}{unit}"
    return str(n)


def train_settings(cfg: SweepConfig, exclude=()) -> dict:
    """The train section as runs record it: the WSD keys only when the schedule is wsd."""
    leave_out = set(exclude) | (set() if cfg.train.schedule == "wsd" else set(WSD_KEYS))
    return cfg.train.model_dump(exclude=leave_out)


def run_id(cfg: SweepConfig, shape, tokens: int, lr: float, extra: dict | None = None,
           label: str | None = None) -> str:
    """The id of a run: its shape and budget (or `label`), and a digest of everything it computes
    (`extra`: what else decides it, such as a WSD run's shared warmup)."""
    content = {
        "model": cfg.model.model_dump(), "shape": shape.model_dump(exclude={"lr"}), "lr": lr,
        "tokens": tokens, "seed": cfg.seed, "corpus": cfg.corpus.model_dump(),
        "tokenizer": cfg.tokenizer.model_dump(),
        "train": train_settings(cfg, NOT_IN_RUN_ID), **(extra or {}),
    }
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:8]
    return f"d{shape.d_model}-l{shape.n_layers}-h{shape.n_heads}-{label or 'D' + _compact(tokens)}-{digest}"


def planned_run(cfg: SweepConfig, shape: Shape, tokens: int, lr: float, *, warmup: int | None = None,
                branch_points: tuple[int, ...] = (), branch_of: str | None = None,
                branch_step: int | None = None) -> PlannedRun:
    """One run of the plan. WSD: `warmup` (steps) shared by a shape's budgets; a stable run has
    `branch_points`; a branch names its stable run and the step it starts from."""
    model = GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size)
    n_total, n_non_embedding = param_counts(model)
    extra, label = ({} if warmup is None else {"warmup_steps": warmup}), None
    if branch_points:  # what a branch computes does not depend on its stable run: not in its id
        extra["branch_points"] = list(branch_points)
        label = f"stable-s{max(branch_points)}"
    spec = RunSpec(run_id=run_id(cfg, shape, tokens, lr, extra, label), model=model, train=cfg.train,
                   lr=lr, tokens=tokens, seed=cfg.seed, warmup=warmup, branch_points=tuple(branch_points),
                   branch_of=branch_of, branch_step=branch_step)
    return PlannedRun(spec, shape, n_total, n_non_embedding, flops_6nd=6.0 * n_non_embedding * tokens,
                      flops_exact=float(flops_per_token(model)["exact"]) * tokens)


def plan(cfg: SweepConfig) -> list[PlannedRun]:
    """Every (shape, budget) pair of the grid, smallest model and budget first. WSD: each shape's
    stable run comes before its branches, one per budget."""
    shapes = sorted(cfg.grid.models, key=lambda s: (s.d_model * s.d_model * s.n_layers, s.d_model))
    budgets = sorted(set(cfg.grid.tokens))
    if cfg.train.schedule != "wsd":
        return [planned_run(cfg, shape, tokens, run_lr(cfg.train, shape)) for shape in shapes for tokens in budgets]
    return [run for shape in shapes for run in wsd_runs(cfg, shape, budgets)]


def wsd_runs(cfg: SweepConfig, shape: Shape, budgets: list[int]) -> list[PlannedRun]:
    """A shape's stable run and its branches. Budget D_k trains ceil(D_k / batch) steps and cools
    down over the last round(f * steps) of them, from branch point s_k; the warmup is that of
    the smallest budget (warmup_fraction of its steps), shared so that every budget's run follows
    the same lr up to its branch point. The stable run trains to the largest branch point."""
    train, lr = cfg.train, run_lr(cfg.train, shape)
    steps = [math.ceil(d / train.batch_tokens) for d in budgets]
    points = [n - cooldown_steps(n, train) for n in steps]
    warmup, _ = schedule_bounds(steps[0], train)
    kept = tuple(sorted({p for p in points if p > 0}))  # a cooldown from step 0 needs no checkpoint
    runs = []
    if kept:
        runs.append(planned_run(cfg, shape, kept[-1] * train.batch_tokens, lr, warmup=warmup, branch_points=kept))
    for tokens, point in zip(budgets, points):
        start = {"branch_of": runs[0].run_id, "branch_step": point} if point > 0 else {}
        runs.append(planned_run(cfg, shape, tokens, lr, warmup=warmup, **start))
    return runs


def plan_cost(planned: list[PlannedRun]) -> dict:
    """Training FLOPs of the plan (what its runs train themselves), and for WSD those of separate
    runs of the same grid (one per fit point, each from step 0, as cosine runs), and the saving."""
    cost = {"train_flops_6nd": sum(r.trained_flops_6nd for r in planned),
            "train_flops_exact": sum(r.trained_flops_exact for r in planned)}
    points = [r for r in planned if r.kind != "stable"]
    cost["separate_flops_6nd"] = sum(r.flops_6nd for r in points)
    cost["separate_flops_exact"] = sum(r.flops_exact for r in points)
    cost["saved_flops_6nd"] = cost["separate_flops_6nd"] - cost["train_flops_6nd"]
    cost["fraction_of_separate"] = cost["train_flops_6nd"] / cost["separate_flops_6nd"]
    return cost


def retry(cfg: SweepConfig, run: PlannedRun, summary: dict) -> PlannedRun | None:
    """The run that retries a diverged one at train.retry_lr_factor times its learning rate, if
    train.retries allows another."""
    if summary["status"] != "diverged" or run.attempt >= cfg.train.retries:
        return None
    again = planned_run(cfg, run.shape, run.spec.tokens, run.spec.lr * cfg.train.retry_lr_factor)
    return replace(again, spec=replace(again.spec, retry_of=run.run_id), attempt=run.attempt + 1)


def achieved_flops(sweep_dir: Path) -> pd.DataFrame:
    """The exact FLOP/s each finished (or stable) run of this store trained at, with its shape."""
    columns = ["d_model", "n_layers", "n_heads", "flops_per_s"]
    if not Path(sweep_dir).is_dir():
        return pd.DataFrame(columns=columns)
    table = store.read_runs(sweep_dir)
    wall = pd.to_numeric(table.wall_s, errors="coerce")
    done = table[table.status.isin(["finished", "stable"]) & (wall > 0)].copy()
    # A WSD branch trained only branch_tokens of its tokens in its wall time.
    share = (pd.to_numeric(done.branch_tokens, errors="coerce") / pd.to_numeric(done.tokens, errors="coerce"))
    done["flops_per_s"] = pd.to_numeric(done.flops_exact, errors="coerce") * share.fillna(1.0) / wall[done.index]
    return done[columns]


def estimate_walls(planned: list[PlannedRun], sweep_dir: Path) -> tuple[list[float], str]:
    """Seconds each planned run should take to train, and what the estimate rests on: the FLOP/s
    its shape achieved in this store, else the median over the store's runs, else ASSUMED_FLOPS."""
    rates = achieved_flops(sweep_dir)
    by_shape = rates.groupby(["d_model", "n_layers", "n_heads"]).flops_per_s.median().to_dict()
    fallback = float(rates.flops_per_s.median()) if len(rates) else ASSUMED_FLOPS
    walls = []
    for run in planned:
        m = run.spec.model
        walls.append(run.trained_flops_exact / by_shape.get((m.d_model, m.n_layers, m.n_heads), fallback))
    basis = (f"the FLOP/s each shape achieved in {len(rates)} finished runs of this store (median "
             f"{fallback:.3g} for shapes not trained yet)" if len(rates) else
             f"{ASSUMED_FLOPS:.3g} FLOP/s a run, assumed: no run of this store has been timed yet")
    return walls, basis


def makespan(walls: list[float], workers: int) -> float:
    """Wall time of handing runs out in this order to `workers` workers, each taking the next run
    as soon as it is free (how the local executor schedules)."""
    free = [0.0] * workers
    for wall in walls:
        heapq.heappush(free, heapq.heappop(free) + wall)
    return max(free)


def sweep_workers(cfg: SweepConfig, planned: list[PlannedRun]) -> tuple[int, int]:
    """(runs at once, threads per run) the local executor would use for these runs on this machine."""
    ex = cfg.executor
    return LocalExecutor(ex.workers, ex.threads_per_run, ex.runs_per_gpu).plan(planned) if planned else (1, 1)


def run_config(cfg: SweepConfig, planned: PlannedRun, cache_key: str) -> dict:
    """The resolved settings of one run, as written to its config.yaml."""
    spec = planned.spec
    config = {
        "run_id": spec.run_id, "sweep": cfg.name, "retry_of": spec.retry_of, "seed": spec.seed,
        "tokens": spec.tokens,
        "lr": spec.lr, "model": {**cfg.model.model_dump(), "d_model": spec.model.d_model,
                                 "n_layers": spec.model.n_layers, "n_heads": spec.model.n_heads,
                                 "vocab_size": spec.model.vocab_size},
        "train": train_settings(cfg), "corpus": cfg.corpus.model_dump(),
        "tokenizer": cfg.tokenizer.model_dump(), "token_cache": cache_key,
        "n_params_total": planned.n_params_total,
        "n_params_non_embedding": planned.n_params_non_embedding,
    }
    if cfg.train.schedule == "wsd":
        warmup, decay_start = spec.schedule()
        config["wsd"] = {"role": planned.kind, "warmup_steps": warmup, "decay_start_step": decay_start,
                         "branch_points": list(spec.branch_points) or None, "branch_of": spec.branch_of,
                         "branch_step": spec.branch_step}
    return config


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
        that was busy before is waited for; one busy now is left for a later round.

        A WSD branch whose stable run is in training here and has not yet saved the branch's
        checkpoint waits: the runs after it go first, and when nothing else is left the executor
        is told to WAIT (ask again later) until the checkpoint is there or the stable run ends."""
        todo, waiting = list(runs), []
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
        spec = run.spec
        if spec.branch_of is None or spec.branch_of not in self.held:
            return False
        if (self.sweep_dir / run.run_id / store.CHECKPOINT).exists():
            return False  # it started before: it resumes from its own checkpoint
        return not (self.sweep_dir / spec.branch_of / store.branch_checkpoint(spec.branch_step)).exists()

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
        if summary is not None and summary["status"] in ENDED:  # another sweep ended it
            lock.release()
            return None
        store.remove_temps(run_dir)
        write_run_config(run_dir, run_config(self.cfg, run, self.cache.meta["key"]))
        if run.spec.branch_of is not None and not self._start_branch(run, run_dir):
            lock.release()
            return None
        self.held[run.run_id] = lock
        return Job(run.spec, run_dir, self.cache)

    def _start_branch(self, run: PlannedRun, run_dir: Path) -> bool:
        """Give a branch, on its first start, its stable run's checkpoint at the branch point and
        the metrics records up to it. False when it cannot start: its stable run has not got there
        yet (it is left for a later round, or ended here when the stable run diverged before)."""
        spec = run.spec
        if (run_dir / store.CHECKPOINT).exists():
            return True  # it started before: it resumes from its own checkpoint (or the copy)
        stable_dir = self.sweep_dir / spec.branch_of
        source = stable_dir / store.branch_checkpoint(spec.branch_step)
        if source.exists():
            records = stable_prefix(stable_dir / store.METRICS, spec.branch_step, spec.train)
            store.write_atomic(run_dir / store.METRICS, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
            store.write_atomic(run_dir / store.CHECKPOINT, source.read_bytes())  # last: it marks the start
            return True
        stable = store.read_summary(stable_dir)
        if stable is None or stable["status"] not in ENDED:
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


def stable_prefix(path: Path, step: int, train) -> list[dict]:
    """A stable run's metrics records up to branch point `step`, as the WSD run from step 0 to the
    branch's budget logs them: without the record the stable run logs only because its last step
    is its last (off the log cadence), and without the evaluation made only for that reason.
    Records after `step` (the stable run may still be appending) are not read."""
    records = []
    if not path.exists():
        return records
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for lineno, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
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


def job_order(runs: list[PlannedRun]) -> list[PlannedRun]:
    """Longest first, by the FLOPs each run trains itself, with WSD stable runs before everything
    (their branches wait for their checkpoints). Packed onto the cores, a long run started last
    leaves the other cores idle at the end: the tiny grid's measured run times take 390 s on 2
    cores in plan order (smallest first) and 355 s longest first."""
    return sorted(runs, key=lambda r: (r.kind != "stable", -r.trained_flops_exact))


def run_sweep(cfg: SweepConfig, runs_dir: Path | str = "runs", cache_dir: Path | None = None,
              reporter=None) -> SweepResult:
    """Train every run of the grid that has not ended yet, and write runs/<sweep>/runs.csv.

    Runs that fail are left for the next invocation; runs another sweep is training are waited for.
    """
    sweep_dir = Path(runs_dir) / cfg.name
    planned = plan(cfg)
    branches = {}  # stable run id -> its branches' ids
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
                              and trained.get(run.spec.branch_of, {}).get("status", "finished") in ENDED])
    skipped = [summary for run_id, summary in ended.items() if run_id not in trained]
    return SweepResult(sweep_dir, list(trained.values()), skipped, store.write_table(sweep_dir))
