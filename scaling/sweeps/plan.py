"""The plan of a sweep: the N x D grid expanded into runs, each with its id, size and cost.

Run ids come from the run's content (shape, token budget, training settings, seed and the
corpus and tokenizer it reads), so the same run always lands in the same folder: a second
invocation finds its summary and trains nothing, and an interrupted run resumes from its
checkpoint. Settings that change only how a run is logged, checkpointed or executed are left out
(NOT_IN_RUN_ID). A run that diverges may be retried at a lower learning rate (train.retries): the
retry is a run of its own, with its own id, whose summary names the run it retries in `retry_of`.

WSD sweeps (train.schedule 'wsd', Hagele et al. 2024). For each shape the plan holds one stable
run (warmup, then constant lr up to the branch point of the largest budget, saving a checkpoint
at the branch point (1-f)*D_k of every budget D_k) and, for each budget, a branch: the run that
cools down from that checkpoint over the last f*D_k tokens. A branch is a run in the store like
any other (its id is that of a WSD run to D_k, since it computes exactly that run); the stable
run is stored with status 'stable' and is no fit point.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from scaling.config import Shape, SweepConfig, run_lr
from scaling.errors import UsageError
from scaling.train.compute import FlopsPerToken, expected_optimum, fit_flops_per_token
from scaling.train.counts import MEASURE_CONVENTION
from scaling.train.schedule import cooldown_steps, schedule_bounds, shape_warmup_steps
from scaling.train.shape import GPTConfig, flops_by_measure, param_counts
from scaling.train.spec import RunSpec

# Settings that change how a run is logged or scheduled, where and how fast it runs (the same
# computation, up to the last bits of floating point), or what happens after it diverges, not
# what it computes.
# lr_law: the rate it gives a run is in the id already.
NOT_IN_RUN_ID = ("log_interval", "checkpoint_interval", "eval_interval", "threads", "device", "compile",
                 "divergence_factor", "retries", "retry_lr_factor", "seeds", "log_to", "lr_law")
# Keys of the WSD schedule: in the run id only when train.schedule is wsd, so that cosine and
# linear runs keep the ids they had before WSD existed.
WSD_KEYS = ("cooldown_fraction", "cooldown_shape")


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
        return self.spec.tokens - self.spec.start_tokens

    @property
    def trained_flops_6nd(self) -> float:
        return self.flops_6nd * self.trained_tokens / self.spec.tokens

    @property
    def trained_flops_exact(self) -> float:
        return self.spec.trained_flops()

    def flops(self, measure: str) -> float:
        """The run's training compute (its whole budget D) counted by `measure`."""
        return float(flops_by_measure(self.spec.model)[measure]) * self.spec.tokens


def _compact(n: int) -> str:
    """250000 -> '250K', 2000000 -> '2M', for readable run ids."""
    for unit, size in (("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size and n % (size // 1000 or 1) == 0:
            return f"{n / size:g}{unit}"
    return str(n)


def train_settings(cfg: SweepConfig, exclude: Iterable[str] = ()) -> dict:
    """The train section as runs record it: the WSD keys only when the schedule is wsd, the
    training seeds only when set (so runs keep the settings they had before replicates)."""
    leave_out = set(exclude) | (set() if cfg.train.schedule == "wsd" else set(WSD_KEYS)) | \
        (set() if cfg.train.seeds else {"seeds"})
    return cfg.train.model_dump(exclude=leave_out)


def run_id(cfg: SweepConfig, shape: Shape, tokens: int, lr: float, extra: dict | None = None,
           label: str | None = None, train_seed: int | None = None) -> str:
    """The id of a run: its shape and budget (or `label`), and a digest of everything it computes
    (`extra`: what else decides it, such as a WSD run's shared warmup). A replicate, trained with a
    seed other than the data's (`train_seed`), ends in -s<seed>; the data seed's run keeps the id
    it had before replicates existed."""
    replicate = train_seed is not None and train_seed != cfg.seed
    extra = {**(extra or {}), **({"train_seed": train_seed} if replicate else {})}
    content = {
        "model": cfg.model.model_dump(), "shape": shape.model_dump(exclude={"lr"}), "lr": lr,
        "tokens": tokens, "seed": cfg.seed, "corpus": cfg.corpus.model_dump(),
        "tokenizer": cfg.tokenizer.model_dump(),
        "train": train_settings(cfg, NOT_IN_RUN_ID), **extra,
    }
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:8]
    suffix = f"-s{train_seed}" if replicate else ""
    return f"d{shape.d_model}-l{shape.n_layers}-h{shape.n_heads}-{label or 'D' + _compact(tokens)}-{digest}{suffix}"


def shape_lr(cfg: SweepConfig, shape: Shape, tokens: int) -> float:
    """The rate `shape` trains at for `tokens` tokens (scaling.config.run_lr)."""
    n_non_embedding = param_counts(GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size))[1]
    return run_lr(cfg.train, shape, n_non_embedding, tokens)


def planned_run(cfg: SweepConfig, shape: Shape, tokens: int, lr: float, *, warmup: int | None = None,
                branch_points: tuple[int, ...] = (), branch_of: str | None = None,
                branch_step: int | None = None, budget: float | None = None,
                budget_measure: str | None = None, role: str | None = None, seed: int | None = None) -> PlannedRun:
    """One run of the plan. WSD: `warmup` (steps) shared by a shape's budgets; a stable run has
    `branch_points`; a branch names its stable run and the step it starts from. `role`: what a run
    that is not a fit point is for (RunSpec.role). `seed`: the training seed (initialisation and
    batch order; default the config's seed), which leaves the tokens and evaluation windows alone."""
    seed = cfg.seed if seed is None else seed
    model = GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size)
    n_total, n_non_embedding = param_counts(model)
    if warmup is None:
        warmup = shape_warmup_steps(cfg.train, n_total, math.ceil(tokens / cfg.train.batch_tokens))
    extra: dict[str, int | list[int]] = {} if warmup is None else {"warmup_steps": warmup}
    label = None
    if branch_points:  # what a branch computes does not depend on its stable run: not in its id
        extra["branch_points"] = list(branch_points)
        label = f"stable-s{max(branch_points)}"
    spec = RunSpec(run_id=run_id(cfg, shape, tokens, lr, extra, label, seed), model=model, train=cfg.train,
                   lr=lr, tokens=tokens, seed=seed, warmup=warmup, branch_points=tuple(branch_points),
                   branch_of=branch_of, branch_step=branch_step, budget=budget,
                   budget_measure=budget_measure, role=role)
    return PlannedRun(spec, shape, n_total, n_non_embedding, flops_6nd=6.0 * n_non_embedding * tokens,
                      flops_exact=float(flops_by_measure(model)["exact"]) * tokens)


def training_seeds(cfg: SweepConfig) -> list[int]:
    """The seeds each planned run is trained with: train.seeds, else the config's one seed."""
    return list(cfg.train.seeds) if cfg.train.seeds else [cfg.seed]


def plan(cfg: SweepConfig) -> list[PlannedRun]:
    """Every (shape, budget) pair of the grid, smallest model and budget first, once per training
    seed (replicates: the same tokens, another initialisation and batch order). WSD: each shape's
    stable run comes before its branches, one per budget. An IsoFLOP design: `isoflop_runs`."""
    return [run for seed in training_seeds(cfg) for run in _plan_one_seed(cfg, seed)]


def _plan_one_seed(cfg: SweepConfig, seed: int) -> list[PlannedRun]:
    shapes = sorted(cfg.grid.models, key=lambda s: (s.d_model * s.d_model * s.n_layers, s.d_model))
    if cfg.grid.tokens is None:    # (the config has grid.tokens or grid.isoflop)
        return isoflop_runs(cfg, shapes, seed)
    budgets = sorted(set(cfg.grid.tokens))
    if cfg.train.schedule != "wsd":
        return [planned_run(cfg, shape, tokens, shape_lr(cfg, shape, tokens), seed=seed)
                for shape in shapes for tokens in budgets]
    return [run for shape in shapes for run in wsd_runs(cfg, shape, budgets, seed)]


def budget_tokens(compute: float, flops_per_token: float, batch: int) -> int:
    """D = C / (FLOPs per token) rounded to whole batches (at least one): the tokens of a run
    planned for C (C / 6N where a token is counted as 6 N FLOPs)."""
    return max(batch, round(compute / flops_per_token / batch) * batch)


def family_flops(cfg: SweepConfig, shapes: list[Shape], measure: str) -> tuple[list[tuple], FlopsPerToken]:
    """Each shape with its N (total, or non-embedding for 6n_non_embedding) and its FLOPs per
    token in `measure`; and c(N) = 6 kappa N^gamma fitted across them (where the optimum is
    expected)."""
    convention = MEASURE_CONVENTION[measure]
    sized = []
    for shape in shapes:
        model = GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size)
        total, non_embedding = param_counts(model)
        sized.append((shape, total if convention == "total" else non_embedding, flops_by_measure(model)[measure]))
    return sized, fit_flops_per_token([n for _, n, _ in sized], [c for *_, c in sized], measure)


def isoflop_runs(cfg: SweepConfig, shapes: list[Shape], seed: int | None = None) -> list[PlannedRun]:
    """For each compute budget C (counted by `grid.isoflop.measure`): the shapes whose N is within
    a factor `span` of the expected optimum (where D / N = k under the family's FLOPs per token), at
    most `per_budget` nearest to it in log N, each on D = C / (its FLOPs per token) rounded to whole
    batches, so that the runs of a budget spend the same compute in that measure. UsageError when a
    budget gets fewer than 3 shapes (a parabola needs 3): the family does not reach its optimum."""
    design, batch = cfg.grid.isoflop, cfg.train.batch_tokens
    if design is None:
        raise UsageError(f"config {cfg.name} has no grid.isoflop: no compute budgets to plan")
    sized, family = family_flops(cfg, shapes, design.measure)
    runs = []
    for c in sorted(design.budgets):
        n_opt = expected_optimum(family, c, design.tokens_per_param)
        near = sorted((abs(math.log(n / n_opt)), n, per_token, shape) for shape, n, per_token in sized
                      if abs(math.log(n / n_opt)) <= math.log(design.span))
        if len(near) < 3:
            raise UsageError(f"grid.isoflop: budget {c:.3g} FLOPs has {len(near)} model(s) within a factor "
                             f"{design.span:g} of its expected optimum N = {n_opt:.3g}; a parabola needs 3: add "
                             "shapes near that size, or widen span")
        for _, _n, per_token, shape in sorted(near[:design.per_budget], key=lambda t: t[1]):
            tokens = budget_tokens(c, per_token, batch)
            runs.append(planned_run(cfg, shape, tokens, shape_lr(cfg, shape, tokens),
                                    budget=float(c), budget_measure=design.measure, seed=seed))
    return runs


def wsd_runs(cfg: SweepConfig, shape: Shape, budgets: list[int], seed: int | None = None) -> list[PlannedRun]:
    """A shape's stable run and its branches. Budget D_k trains ceil(D_k / batch) steps and cools
    down over the last round(f * steps) of them, from branch point s_k; the warmup is that of
    the smallest budget (warmup_fraction of its steps), shared so that every budget's run follows
    the same lr up to its branch point. The stable run trains to the largest branch point."""
    # one rate for every budget (their runs share the stable phase): the lr law's at the largest
    train, lr = cfg.train, shape_lr(cfg, shape, max(budgets))
    steps = [math.ceil(d / train.batch_tokens) for d in budgets]
    points = [n - cooldown_steps(n, train) for n in steps]
    n_total = param_counts(GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size))[0]
    warmup = shape_warmup_steps(train, n_total, steps[0])
    if warmup is None:
        warmup, _ = schedule_bounds(steps[0], train)
    kept = tuple(sorted({p for p in points if p > 0}))  # a cooldown from step 0 needs no checkpoint
    runs = []
    if kept:
        runs.append(planned_run(cfg, shape, kept[-1] * train.batch_tokens, lr, warmup=warmup, branch_points=kept,
                                seed=seed))
    for tokens, point in zip(budgets, points):
        start: dict[str, Any] = {"branch_of": runs[0].run_id, "branch_step": point} if point > 0 else {}
        runs.append(planned_run(cfg, shape, tokens, lr, warmup=warmup, seed=seed, **start))
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
    again = planned_run(cfg, run.shape, run.spec.tokens, run.spec.lr * cfg.train.retry_lr_factor, seed=run.spec.seed)
    return replace(again, spec=replace(again.spec, retry_of=run.run_id), attempt=run.attempt + 1)


def run_config(cfg: SweepConfig, planned: PlannedRun, cache_key: str) -> dict:
    """The resolved settings of one run, as written to its config.yaml."""
    spec = planned.spec
    config = {
        "run_id": spec.run_id, "sweep": cfg.name, "retry_of": spec.retry_of, "seed": spec.seed,
        **({"data_seed": cfg.seed} if spec.seed != cfg.seed else {}), "tokens": spec.tokens,
        "lr": spec.lr, "model": {**cfg.model.model_dump(), "d_model": spec.model.d_model,
                                 "n_layers": spec.model.n_layers, "n_heads": spec.model.n_heads,
                                 "vocab_size": spec.model.vocab_size},
        "train": train_settings(cfg), "corpus": cfg.corpus.model_dump(),
        "tokenizer": cfg.tokenizer.model_dump(), "token_cache": cache_key,
        "n_params_total": planned.n_params_total,
        "n_params_non_embedding": planned.n_params_non_embedding,
    }
    if spec.budget is not None:
        config["budget"] = spec.budget
        config["budget_measure"] = spec.budget_measure
    if spec.role is not None:
        config["role"] = spec.role
    if cfg.train.schedule == "wsd":
        warmup, decay_start = spec.schedule()
        config["wsd"] = {"role": planned.kind, "warmup_steps": warmup, "decay_start_step": decay_start,
                         "branch_points": list(spec.branch_points) or None, "branch_of": spec.branch_of,
                         "branch_step": spec.branch_step}
    return config


def job_order(runs: list[PlannedRun]) -> list[PlannedRun]:
    """Longest first, by the FLOPs each run trains itself, with WSD stable runs before everything
    (their branches wait for their checkpoints). Packed onto the cores, a long run started last
    leaves the other cores idle at the end: the tiny grid's measured run times take 390 s on 2
    cores in plan order (smallest first) and 355 s longest first."""
    return sorted(runs, key=lambda r: (r.kind != "stable", -r.trained_flops_exact))
