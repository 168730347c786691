"""The hold-out check: how far can the law be trusted beyond the sweep?

    check = holdout(data, law, fraction=0.2)      # refit without the top 20% by C, predict them
    check.mean_abs_rel_error, [r.predicted for r in check.rows]
    print(format_holdout(check))

Pure: arrays in, numbers out. The points with the largest compute C = 6ND are held out
(`holdout_split`), the law is refitted on the rest with the same method and options, and each
held-out loss is predicted; the absolute relative error |L_pred - L_obs| / L_obs of each and their
mean say how well a fit extrapolates as far as the held-out points reach. The full fit's errors on
the same points (which it saw) are given for scale.

This is the one hold-out refit: `analysis.fit_data` makes it (from the full fit's end points),
the diagnostics judge its law (`stability.holdout_check`), fit.json keeps it ("holdout",
`Holdout.to_json`) and the report prints it, so the verdict and the report's table cannot disagree.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.formats import json_safe, plain_table
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting import fitdata, selection
from scaling.laws.fitting.objective import EPrior
from scaling.laws.forms.law import Law

DEFAULT_FRACTION = 0.2


@dataclass(frozen=True)
class HoldoutRow:
    id: str
    n: float
    d: float
    compute: float
    loss: float
    predicted: float            # by the law refitted without the held-out points
    abs_rel_error: float
    full_predicted: float       # by the full fit, which saw these points


_ROW_NUMBERS = ("n", "d", "compute", "loss", "predicted", "abs_rel_error", "full_predicted")


WITHIN = 1.1    # held-out runs at most this far above the refit's largest compute: at its budget


@dataclass(frozen=True)
class Holdout:
    fraction: float
    n_points: int
    n_train: int
    rows: tuple = ()
    mean_abs_rel_error: float | None = None
    full_mean_abs_rel_error: float | None = None
    train_max_compute: float | None = None
    law: Law | None = None      # the refit
    reason: str | None = None   # why there is no refit

    @property
    def within_fitted(self) -> bool:
        """Whether the held-out runs lie at the compute the refit reached (the top budget split
        between the two; within WITHIN of it): the check then tests the law among its own budgets,
        not beyond them (the backtest does that)."""
        top = self.train_max_compute
        return bool(self.rows) and top is not None and max(r.compute for r in self.rows) <= WITHIN * top

    def to_json(self) -> dict:
        """fit.json's "holdout" section: these fields, the refit's law as "params" (or null)."""
        fields = {k: v for k, v in asdict(self).items() if k not in ("law", "rows")}
        return json_safe({**fields, "rows": [asdict(r) for r in self.rows],
                          "params": None if self.law is None else self.law.to_dict()})

    @classmethod
    def from_json(cls, obj: dict) -> Holdout:
        """From fit.json's "holdout" section (KeyError, TypeError or ValueError when malformed)."""
        params = obj["params"]
        rows = tuple(HoldoutRow(str(row["id"]), *(float(row[k]) for k in _ROW_NUMBERS)) for row in obj["rows"])
        return cls(fraction=float(obj["fraction"]), n_points=int(obj["n_points"]), n_train=int(obj["n_train"]),
                   rows=rows, mean_abs_rel_error=obj.get("mean_abs_rel_error"),
                   full_mean_abs_rel_error=obj.get("full_mean_abs_rel_error"),
                   train_max_compute=obj.get("train_max_compute"), reason=obj.get("reason"),
                   law=None if params is None else Law.from_dict(params))


def holdout_split(compute: npt.ArrayLike, fraction: float = DEFAULT_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, held-out indices): the round(fraction * M) points (at least 1) with the
    largest compute are held out; ties go to the later point. Both in ascending index order."""
    c = np.asarray(compute, dtype=float)
    m = c.size
    k = max(1, int(round(fraction * m)))
    order = np.lexsort((-np.arange(m), -c))      # largest C first; among equal C, later index first
    return np.sort(order[k:]), np.sort(order[:k])


def holdout(data: fitdata.FitData, law: Law, *, fraction: float = DEFAULT_FRACTION,
            delta: float = fitting.DEFAULT_DELTA, fixed_E: float | None = None,
            starts: np.ndarray | None = None, E_prior: EPrior | None = None) -> Holdout:
    """Refit without the top-compute points; predict them; absolute relative error of each.

    The refit is the same Approach-3 fit (Huber `delta`, `fixed_E`) from `starts`: the full fit's
    distinct end points (`FitResult.end_points`, as `analysis.fit_data` does: the subset's optimum
    lies near the full one's), or None for Hoffmann's 4,500 starts. `law` is the full fit, whose
    (in-sample) errors on the same points are given beside. When too few points are left to
    refit, or they do not bound the constants, `reason` says so and there are no rows.
    """
    if not (isinstance(fraction, (int, float)) and 0 < fraction < 1):
        raise UsageError(f"the hold-out fraction must be between 0 and 1 (exclusive); got {fraction!r}")
    train, held = holdout_split(data.compute, fraction)
    holdout = partial(Holdout, float(fraction), len(data), int(train.size))
    sub = fitdata.FitData(n=data.n[train], d=data.d[train], loss=data.loss[train], source=data.source,
                          ids=tuple(data.ids[i] for i in train), param_convention=data.param_convention)
    try:
        selection.check_fittable(sub, fixed_E)
    except UsageError as exc:
        return holdout(reason=f"too few points are left to refit without the top {held.size}: {exc}")
    try:
        refit = fitting.fit_law(sub.n, sub.d, sub.loss, delta=delta, grid=starts, fixed_E=fixed_E,
                                E_prior=E_prior).law
    except UsageError as exc:
        return holdout(reason=f"the points below the top {held.size} do not bound the constants: {exc}")
    pred = refit.loss(data.n[held], data.d[held])
    full = law.loss(data.n[held], data.d[held])
    obs = data.loss[held]
    err = np.abs(pred - obs) / obs
    order = np.lexsort((held, data.compute[held]))
    rows = tuple(HoldoutRow(str(data.ids[held[j]]), float(data.n[held[j]]), float(data.d[held[j]]),
                            float(data.compute[held[j]]), float(obs[j]), float(pred[j]), float(err[j]),
                            float(full[j])) for j in order)
    return holdout(rows=rows, mean_abs_rel_error=float(err.mean()),
                   full_mean_abs_rel_error=float((np.abs(full - obs) / obs).mean()),
                   train_max_compute=float(data.compute[train].max()), law=refit)


def pct(x: float | None) -> str:
    """A fraction as a percentage with two decimals; '-' for None."""
    return "-" if x is None else f"{100 * x:.2f}%"


def format_holdout(check: Holdout | None) -> str:
    """The hold-out check as plain text: one line per held-out run, then the mean."""
    if check is None:
        return ("hold-out check: not possible, the fit records none or its points were not found (see the report's "
                "first section)")
    head = (f"hold-out check: refit on the {check.n_train} of {check.n_points} points with the smallest C, "
            f"predict the {check.n_points - check.n_train} with the largest (top {100 * check.fraction:g}%)")
    if check.reason:
        return head + "\n" + check.reason
    table = plain_table(["run", "N", "D", "C", "loss", "predicted", "abs rel error"],
                        [[r.id, f"{r.n:.4g}", f"{r.d:.4g}", f"{r.compute:.3g}", f"{r.loss:.4f}", f"{r.predicted:.4f}",
                          pct(r.abs_rel_error)] for r in check.rows])
    within = "; at the budget the refit reached: not a test beyond the data" if check.within_fitted else ""
    return (f"{head}\n{table}\nmean absolute relative error: {pct(check.mean_abs_rel_error)} (full fit, which saw "
            f"them: {pct(check.full_mean_abs_rel_error)}){within}")
