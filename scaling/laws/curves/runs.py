"""A run store's training curves with each run's learning-rate schedule: the curve law's input.

    runs = read_curve_runs("runs/tiny", param_convention="total")
    runs.evaluations        # run_id, n, tokens, loss, step: every evaluation of the fitted runs
    runs.schedules          # run_id -> curve_law.RunSchedule, rebuilt from its config.yaml

I/O at the edge, like `scaling.laws.curves.store`; `scaling.laws.curves.fit` takes the result. The runs
are the finished ones and WSD stable runs (their curves are the stable phase every branch shares);
runs with a role (validation runs) are left out, as the final-loss fit leaves them out.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from scaling.config import TrainConfig
from scaling.errors import UsageError
from scaling.laws.curves.fit import CurveRuns
from scaling.laws.curves.law import RunSchedule
from scaling.laws.curves.store import read_curves
from scaling.runs import store
from scaling.train.schedule import shape_warmup_steps

FITTED_STATUSES = ("finished", "stable")


def _schedule(run_dir: Path) -> tuple[RunSchedule, str | None]:
    """A run's schedule from its config.yaml, and its role (None for a fit point)."""
    path = run_dir / store.CONFIG
    try:
        config = store.read_config(run_dir)
        train = TrainConfig.model_validate(config["train"])
        wsd = config.get("wsd") or {}
        steps = -(-int(config["tokens"]) // train.batch_tokens)
        warmup = wsd.get("warmup_steps")
        if warmup is None:   # a cosine run's warmup: a fraction of its steps, or the shape's one
            warmup = shape_warmup_steps(train, int(config["n_params_total"]), steps)
        return (RunSchedule(steps=steps, lr=float(config["lr"]), train=train,
                            warmup=warmup, constant=bool(wsd.get("branch_points"))),
                config.get("role"))
    except (OSError, UsageError, KeyError, TypeError, ValueError, OverflowError, ValidationError) as exc:
        raise UsageError(f"{path}: cannot rebuild the run's learning-rate schedule ({exc.__class__.__name__}: "
                         f"{str(exc).splitlines()[0]})") from None


def read_curve_runs(sweep_dir: str | Path, param_convention: str = "total") -> CurveRuns:
    """The curves and schedules of a sweep's finished runs and WSD stable runs (see module doc)."""
    found = read_curves(sweep_dir, param_convention=param_convention).curves
    found = found[found.status.isin(FITTED_STATUSES)]
    schedules, final, keep = {}, {}, []
    for run_dir in store.run_dirs(Path(sweep_dir)):
        run_id = (store.read_summary(run_dir) or {}).get("run_id", run_dir.name)
        rows = found[found.run_id == run_id]
        if rows.empty:
            continue
        schedule, role = _schedule(run_dir)
        if role is not None:
            continue
        schedules[run_id] = schedule
        keep.append(run_id)
        if not schedule.constant:
            last = rows.loc[rows.tokens.idxmax()]
            final[run_id] = (float(last.n), float(last.tokens), float(last.loss))
    evaluations = found[found.run_id.isin(keep)].drop(columns="status").reset_index(drop=True)
    batch = evaluations.run_id.map(lambda r: schedules[r].train.batch_tokens)
    evaluations["step"] = (evaluations.tokens / batch).round().astype(int)
    if not final:
        raise UsageError(f"{sweep_dir}: no finished run with a training curve to fit")
    return CurveRuns(evaluations=evaluations, schedules=schedules, final=final, source=str(sweep_dir))
