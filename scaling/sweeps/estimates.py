"""What a plan will take before it runs: each run's wall time, from the speed runs of its shape
achieved in this store, and the whole sweep's, packed onto the workers the executor would use.
Runs that ended in the store cost nothing more, and a run that resumes only what its checkpoint
left (scaling.sweeps.state).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from scaling.config import SweepConfig
from scaling.runs import store
from scaling.sweeps.packing import ASSUMED_FLOPS, workers_and_threads
from scaling.sweeps.plan import PlannedRun
from scaling.sweeps.state import SweepState, sweep_state


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
    return workers_and_threads(planned, ex.workers, ex.threads_per_run, ex.runs_per_gpu) if planned else (1, 1)


def walls_left(planned: list[PlannedRun], state: SweepState, sweep_dir: Path) -> tuple[dict[str, float], str]:
    """Seconds of training each run of `planned` has left (0 for one that ended, the share after
    its checkpoint for one that resumes), and what the estimate rests on (`estimate_walls`)."""
    walls, basis = estimate_walls(planned, sweep_dir)
    return {run.run_id: wall * state.share_left(run) for run, wall in zip(planned, walls)}, basis


@dataclass(frozen=True)
class DryRun:
    """What `scaling sweep --dry-run` shows: the planned runs, how far the store has got with them
    (`state`: ended runs are reused, others resume or train), each run's estimated wall time left
    (and what the estimate rests on), the tokens of the training split (None until tokenized), the
    totals, and the runs at once and threads each the local executor would use for the runs left."""

    planned: list[PlannedRun]     # the grid, and the retries of its diverged runs so far
    state: SweepState
    walls: dict[str, float]       # run id -> estimated seconds left
    basis: str
    unique_tokens: int | None
    cost: dict[str, float]        # plan_cost's FLOP totals, of the whole plan
    workers: int
    threads: int
    total_wall: float             # of the runs left only

    @property
    def flops_left(self) -> float:
        """Exact FLOPs of the training left (the share after each checkpoint)."""
        return sum(run.trained_flops_exact * self.state.share_left(run) for run in self.state.todo)

    def to_json(self) -> dict:
        runs = [{"run_id": r.run_id, "kind": r.kind, "status": self.state.status(r.run_id),
                 "d_model": r.spec.model.d_model, "n_layers": r.spec.model.n_layers, "n_heads": r.spec.model.n_heads,
                 "n_params_total": r.n_params_total, "n_params_non_embedding": r.n_params_non_embedding,
                 "tokens": r.spec.tokens, "trained_tokens": r.trained_tokens, "budget": r.spec.budget,
                 "epochs": None if self.unique_tokens is None else r.spec.tokens / self.unique_tokens,
                 "flops_exact": r.flops_exact, "flops_6nd": r.flops_6nd,
                 "resume_step": self.state.resumes.get(r.run_id), "est_wall_s": self.walls[r.run_id]}
                for r in self.planned]
        return {"runs": runs, "wall_basis": self.basis, "unique_tokens": self.unique_tokens, **self.cost,
                **self.state.counts(), "train_flops_exact_left": self.flops_left,
                "workers": self.workers, "threads_per_run": self.threads, "est_wall_s": self.total_wall}


def dry_run(cfg: SweepConfig, runs_dir: Path, cache_dir: Path | None = None) -> DryRun:
    from scaling.data.tokens import known_train_tokens
    from scaling.sweeps.plan import job_order, plan, plan_cost

    grid = plan(cfg)
    sweep_dir = runs_dir / cfg.name
    state = sweep_state(cfg, grid, sweep_dir)
    planned = state.runs        # the grid, and the retries of its diverged runs so far
    wall_of, basis = walls_left(planned, state, sweep_dir)
    workers, threads = sweep_workers(cfg, state.todo)
    total_wall = makespan([wall_of[r.run_id] for r in job_order(state.todo)], workers)
    return DryRun(planned, state, wall_of, basis, known_train_tokens(cfg, cache_dir), plan_cost(grid), workers,
                  threads, total_wall)
