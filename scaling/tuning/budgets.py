"""Learning rates tuned where the sweep trains: the plan's own cells, and lr = c N^p D^q across them.

    tuning = tune_budgets(cfg, runs_dir="runs")     # 3 corner cells, 0.71x / 1x / 1.41x their rates
    tuning.law                                      # lr_opt = c N^p D^q (None when not fitted)
    tuned = budget_tuned_config(raw_yaml_dict, tuning.law, tuning.beta2)

Why at the budgets: a rate measured on one short run does not carry to the sweep's. Measured on the
demo's 15 cells at 0.5-2x their configured rates (bench/bench_scatter.py), the optimum moves with D
as well as N: at 5e11 FLOPs d48/L2 (646K tokens) is best at 0.6x its rate and stalls near the
unigram plateau at 1x (+7.7%), while at 2e12 the large shapes are still improving at 2x.

A cell is one planned run (shape, D), trained at its configured rate times each multiplier. Which
cells: "corners", the three cheapest that span the plan's N and D (the smallest D-group's smallest
and largest model, the largest D-group's smallest model: for an IsoFLOP design the smallest
budget's ends and the largest budget's most tokens), or "all". The rates are multiples of the
cell's configured rate on a ladder sqrt(2) apart (LADDER), starting at 0.71x, 1x and 1.41x. Pruning,
the rule: a rate beyond one that lost to its inner neighbour is never trained (the loss is taken as
unimodal in ln lr), so a cell whose best rate is inside its first three costs those three; a best
rate at an edge extends the grid one rung that way, at most `max_extensions` times. A cell's 1x
run is the sweep's own run (the same id: a sweep's name is not in a run id), read from the
sweep's store when it has finished there. The law is fitted by least squares in ln lr over the
cells whose optimum lies inside their grid. With several AdamW beta2 values (Porian et al. 2024:
0.95 costs loss at small batches), the cells are tuned at each, and the beta2 whose cells reach
the lowest mean loss wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scaling.config import SweepConfig, derived_name, parse_config
from scaling.errors import UsageError
from scaling.formats import plain_table, sci
from scaling.runs import store
from scaling.sweeps.plan import PlannedRun, plan
from scaling.tuning.shapes import TUNED, Choice, choose

# Multipliers sqrt(2) apart, to 2 decimals (the rates bench/bench_scatter.py trained, so its runs are
# tuning runs too); tuning starts on the middle three.
LADDER = (0.25, 0.35, 0.5, 0.71, 1.0, 1.41, 2.0, 2.83, 4.0)
START = (3, 6)      # LADDER[3:6]: 0.71, 1, 1.41
CELLS = ("corners", "all")


@dataclass(frozen=True)
class CellTuning:
    """One cell's rates, their final losses (None unless finished) and the choice among them."""

    run: PlannedRun                     # the sweep's run at its configured rate
    lrs: tuple[float, ...]
    losses: tuple[float | None, ...]
    choice: Choice

    @property
    def name(self) -> str:
        s = self.run.shape
        return f"d{s.d_model}/L{s.n_layers}/H{s.n_heads} D {self.run.spec.tokens:,}"


@dataclass(frozen=True)
class LRFit:
    """ln lr_opt = ln c + p ln N + q ln D over `n_cells` cells (N non-embedding)."""

    coefficient: float
    n_exponent: float
    d_exponent: float
    n_cells: int
    residual_sd: float | None           # in ln lr; None with no degree of freedom left

    def describe(self) -> str:
        sd = "no residual degree of freedom" if self.residual_sd is None else \
            f"residual sd {self.residual_sd:.3f} in ln lr"
        return (f"lr_opt = {self.coefficient:.4g} N^{self.n_exponent:.3f} D^{self.d_exponent:.3f} "
                f"(N non-embedding) from {self.n_cells} cells; {sd}")


@dataclass(frozen=True)
class BudgetTuning:
    beta2: float                        # AdamW's beta2 of every tuning run
    cells: list[CellTuning]
    law: LRFit | None
    why: str | None                     # why no law, when law is None
    tuning_flops: float                 # exact FLOPs the tuning trained (the sweep's own runs not counted)
    sweep_flops: float                  # exact FLOPs of the sweep it tunes


def sweep_cells(cfg: SweepConfig) -> list[PlannedRun]:
    """The fit points of one training seed (replicates share their cell's rate)."""
    return [r for r in plan(cfg) if r.kind != "stable" and r.spec.seed == cfg.seed]


def select_cells(runs: list[PlannedRun], which: str) -> list[PlannedRun]:
    if which == "all":
        return runs
    if which != "corners":
        raise UsageError(f"cells must be one of {', '.join(CELLS)}; got {which!r}")
    group: dict[float, list] = {}
    for r in runs:     # an IsoFLOP design groups by budget, a cross grid by D
        group.setdefault(r.spec.budget or r.spec.tokens, []).append(r)
    low, high = group[min(group)], group[max(group)]
    corners = [min(low, key=lambda r: r.n_params_total), max(low, key=lambda r: r.n_params_total),
               max(high, key=lambda r: r.spec.tokens)]
    return list({r.run_id: r for r in corners}.values())


def budget_sweep_name(cfg: SweepConfig) -> str:
    """`<name>-tune-budgets`, checked with the tuned config's `<name>-tuned` before any training."""
    derived_name(cfg.name, TUNED, "the tuned config tune writes")
    return derived_name(cfg.name, "-tune-budgets", "the budget tuning sweep")


def cell_config(cfg: SweepConfig, run: PlannedRun, lrs: Sequence[float], seeds: Sequence[int] | None = None,
                beta2: float | None = None) -> SweepConfig:
    """The sweep `<name>-tune-budgets` of one cell: its shape at each rate, on its D, once per
    training seed (None: the config's seed alone), at AdamW beta2 `beta2` (None: the config's)."""
    data = cfg.model_dump()
    train = {**data["train"], "retries": 0, "seeds": list(seeds) if seeds else None}
    data.update(name=budget_sweep_name(cfg), train={**train, "beta2": train["beta2"] if beta2 is None else beta2},
                grid={"models": [{**run.shape.model_dump(), "lr": lr} for lr in lrs], "tokens": [run.spec.tokens]})
    return parse_config(data, f"the budget tuning of {cfg.name}")


def finished_losses(sweep_dir: Path) -> dict[str, float]:
    if not Path(sweep_dir).is_dir():
        return {}
    table = store.read_runs(sweep_dir)
    if table.empty:
        return {}
    done = table[table.status == "finished"]
    return dict(zip(done.run_id, done.final_val_loss.astype(float)))


def cell_rates(run: PlannedRun, rungs: tuple[int, int]) -> list[float]:
    """The cell's rates on LADDER[lo:hi], as the configs write them (4 significant digits)."""
    return [float(f"{run.spec.lr * m:.4g}") for m in LADDER[rungs[0]:rungs[1]]]


def extend(rungs: tuple[int, int], losses: list[float | None]) -> tuple[int, int]:
    """One rung beyond a best rate at the grid's edge (the pruning rule: never beyond a rate that
    lost to its inner neighbour); the same rungs when the best is inside or the ladder ends."""
    choice = choose(range(1, len(losses) + 1), losses)
    if choice.method != "edge":
        return rungs
    lo, hi = rungs
    return (max(lo - 1, 0), hi) if choice.edge == "lowest" else (lo, min(hi + 1, len(LADDER)))


def rate_losses(config: SweepConfig, known: dict[str, float]) -> list[float | None]:
    """Each rate's final loss, the mean over its seeds (one seed's lucky escape from the plateau does
    not choose a rate the others stall at); None unless every seed finished."""
    by_rate: dict[float, list[float | None]] = {}
    for p in plan(config):
        by_rate.setdefault(p.spec.lr, []).append(known.get(p.run_id))
    return [mean_of_all(losses) for losses in by_rate.values()]


def mean_of_all(values: list[float | None]) -> float | None:
    """The mean of `values`; None when any of them is missing."""
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if len(present) == len(values) else None


def tune_budgets(cfg: SweepConfig, runs_dir: Path | str = "runs", cache_dir: Path | None = None, cells: str = "corners",
                 seeds: Sequence[int] | None = None, beta2: float | None = None, max_extensions: int = 2,
                 train: Callable[[SweepConfig], object] | None = None) -> BudgetTuning:
    """Train each chosen cell's rates (in rounds: the grid, then extensions past an edge) once per
    seed in `seeds` (None: the config's seed) at `beta2` (None: the config's), reusing the sweep's
    finished runs, and fit the law. `train(config)` trains a sweep config (default: the sweep driver)."""
    if train is None:
        from scaling.sweeps.driver import run_sweep  # training loads torch; planning does not

        def train(config: SweepConfig) -> None:
            run_sweep(config, runs_dir, cache_dir)
    chosen = select_cells(sweep_cells(cfg), cells)
    rungs = {r.run_id: START for r in chosen}
    own, tune_dir = finished_losses(Path(runs_dir) / cfg.name), Path(runs_dir) / budget_sweep_name(cfg)

    def config_of(r: PlannedRun, lrs: Sequence[float] | None = None) -> SweepConfig:
        return cell_config(cfg, r, cell_rates(r, rungs[r.run_id]) if lrs is None else lrs, seeds, beta2)

    trained_flops, tried = 0.0, set()
    for round_ in range(1 + max_extensions):
        known = {**own, **finished_losses(tune_dir)}
        for r in chosen:   # only what no store holds yet, one seed at a time
            missing = [p for p in plan(config_of(r)) if p.run_id not in known and p.run_id not in tried]
            tried |= {p.run_id for p in missing}
            for seed in sorted({p.spec.seed for p in missing}):
                train(cell_config(cfg, r, [p.spec.lr for p in missing if p.spec.seed == seed], [seed], beta2))
            trained_flops += sum(p.flops("exact") for p in missing)
        known = {**own, **finished_losses(tune_dir)}
        wider = {r.run_id: extend(rungs[r.run_id], rate_losses(config_of(r), known)) for r in chosen}
        if round_ == max_extensions or wider == rungs:
            break
        rungs = wider
    results = []
    for r in chosen:
        lrs, losses = cell_rates(r, rungs[r.run_id]), rate_losses(config_of(r), known)
        results.append(CellTuning(r, tuple(lrs), tuple(losses), choose(lrs, losses)))
    law, why = fit_lr_law(results)
    return BudgetTuning(cfg.train.beta2 if beta2 is None else beta2, results, law, why, trained_flops,
                        sum(r.flops("exact") for r in plan(cfg)))


@dataclass(frozen=True)
class Beta2Tunings:
    """The cells tuned at each AdamW beta2 tried, the tuning chosen (its cells reach the lowest mean
    loss at their chosen rates), and what it all cost against the sweep it tunes."""

    tunings: list[BudgetTuning]
    chosen: BudgetTuning

    @property
    def tuning_flops(self) -> float:
        return sum(t.tuning_flops for t in self.tunings)

    @property
    def cost_share(self) -> float:
        return self.tuning_flops / self.chosen.sweep_flops

    def describe_cost(self) -> str:
        return (f"cost: {sci(self.tuning_flops)} FLOPs trained, {100 * self.cost_share:.0f}% of the sweep's "
                f"{sci(self.chosen.sweep_flops)} (the sweep's own finished runs reused)")


def tune_each_beta2(cfg: SweepConfig, runs_dir: Path | str = "runs", cache_dir: Path | None = None,
                    which: str = "corners", seeds: Sequence[int] | None = None,
                    betas: Sequence[float | None] = (None,)) -> Beta2Tunings:
    """`tune_budgets` at each beta2 in `betas` (None: the config's), and the best of them."""
    tunings = [tune_budgets(cfg, runs_dir, cache_dir, which, seeds, beta2) for beta2 in betas]
    return Beta2Tunings(tunings, best_beta2(tunings))


def best_beta2(tunings: list[BudgetTuning]) -> BudgetTuning:
    """The tuning whose cells reach the lowest mean loss at their chosen rates (the same cells in
    each); one without a loss in every cell loses."""
    def mean_loss(t: BudgetTuning) -> float:
        mean = mean_of_all([c.choice.loss for c in t.cells])
        return float("inf") if mean is None else mean
    return min(tunings, key=mean_loss)


def fit_lr_law(cells: list[CellTuning]) -> tuple[LRFit | None, str | None]:
    """ln lr_opt = ln c + p ln N + q ln D by least squares over the cells with an inside optimum."""
    # (cell, its chosen rate): an optimum inside the grid has a rate
    inside = [(c, c.choice.lr) for c in cells if c.choice.method in ("parabola", "grid point")
              and c.choice.lr is not None]
    if len(inside) < 3:
        return None, (f"{len(inside)} cell(s) with an optimum inside their grid; a law in N and D needs 3: "
                      "tune --cells all")
    x = np.column_stack([np.ones(len(inside)), [np.log(c.run.n_params_non_embedding) for c, _ in inside],
                         [np.log(c.run.spec.tokens) for c, _ in inside]])
    y = np.log([lr for _, lr in inside])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    if np.linalg.matrix_rank(x) < 3:
        return None, "the cells do not separate N from D (their N and D are collinear): tune --cells all"
    dof = len(inside) - 3
    sd = float(np.sqrt(np.sum((y - x @ coef) ** 2) / dof)) if dof else None
    return LRFit(float(np.exp(coef[0])), float(coef[1]), float(coef[2]), len(inside), sd), None


def budget_tuned_config(data: dict, law: LRFit, beta2: float) -> dict:
    """The config as read from its YAML, named `<name>-tuned`, its shapes' own rates removed, the
    law in train.lr_law (every run takes the law's rate at its N and D) and train.beta2 set."""
    models = [{k: v for k, v in entry.items() if k != "lr"} for entry in data["grid"]["models"]]
    lr_law = {"coefficient": float(f"{law.coefficient:.4g}"), "n_exponent": round(law.n_exponent, 4),
              "d_exponent": round(law.d_exponent, 4)}
    train = {**data.get("train", {}), "lr_law": lr_law, "beta2": beta2}
    return {**data, "name": derived_name(data["name"], TUNED, "the tuned config"), "train": train,
            "grid": {**data["grid"], "models": models}}


def format_cells(tuning: BudgetTuning) -> str:
    """One row per tuned cell (scaling.tuning.budgets): its rates, their losses and the choice."""
    title = f"the cells tuned at their own D, beta2 {tuning.beta2:g}:\n"
    rows = []
    for c in tuning.cells:
        tried = ", ".join(f"{sci(lr)}: {'-' if loss is None else f'{loss:.3f}'}" for lr, loss in zip(c.lrs, c.losses))
        rows.append([c.name, sci(c.run.n_params_non_embedding), sci(c.run.spec.lr), tried,
                     "-" if c.choice.lr is None else sci(c.choice.lr), c.choice.method])
    header = ["cell", "N non-emb", "config lr", "final loss at each rate", "chosen", "how"]
    return title + plain_table(header, rows)
