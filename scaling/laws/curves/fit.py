"""L(N, D) fitted from every point of every training curve, not only each run's last one.

    fit = fit_curves(runs, resamples=200, seed=0, reference_compute=fit.reference_compute, flops=data.flops)
    fit.law, fit.ci["a"], fit.ci["tokens_per_param"], fit.leave_one_out["mean_abs_error"]

Each model size's evaluations (all its runs, past their warmup) fix that size's curve law
(`scaling.laws.curves.law`); the law gives the size's final loss at any D under the sweep's own
schedule re-scaled to D (the schedule of the size's longest run). The Chinchilla law is then
fitted (`fit.fit_law`) to those final losses at the D's of interest: the sweep's D values and
PER_SIZE D's evenly spaced in log D, from the size's longest curve down to 1/SPAN of it.

The curve law sees a warmup only through S1: it assumes a size's runs share their early training.
Runs that warm up over a fraction of their own steps do not (the demo's short runs reach their
peak in 32-63 steps, its long ones in 101-321, and pay for it: bench/bench_curve_warmup.py), so
each size records the range of its runs' warmups, and the summary warns where they differ.

The annealing momentum lambda of S2 is fitted: the one of curve_law.DECAYS that leaves the sizes'
curve laws the least squared error (a simulation with a known lambda may fix it). It is chosen
once, on all runs: the intervals do not carry its uncertainty.

The intervals resample whole runs (with replacement, across the sweep), never points within a
curve: a curve's points share its run's seed and data order, so they are not independent, and
a resample of points would make the intervals too narrow. A resampled run counts as many times
as it was drawn in its size's curve law; a size none of whose runs was drawn drops out. Drawn
counts, not the Bayesian bootstrap's weights that the fit of points uses (`scaling.laws.fitting.bootstrap`):
tried on bench/bench_curve_fit.py's 50 sweeps (2026-12-05), weighting whole runs left a's
interval holding the truth in 62% of them (98% with counts; hi/lo 1.14 against 1.47). A curve law
fitted to 3 runs barely moves when their weights change; it moves when one is missing.

Pure: a `CurveRuns` (from `scaling.laws.curves.runs` or a simulation) in, a `CurvesFit` out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from scaling.errors import UsageError
from scaling.formats import json_safe
from scaling.laws.curves.law import DECAY, DECAYS, CurveLaw, fit_curve_law
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting.fit import FitResult, fit_law
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.forms.law import PARAM_NAMES, Law
from scaling.train.compute import FlopsPerToken

SPAN = 8.0          # a size's D's of interest reach down to 1/SPAN of its longest curve
PER_SIZE = 5        # D's per size evenly spaced in log D over that range (besides the sweep's D's)
RESAMPLES = 200     # at most this many resamples of whole runs: each refits every size's curve law
LEVEL = 0.95


@dataclass(frozen=True)
class CurveRuns:
    """Every evaluation of a sweep's runs (columns run_id, n, tokens, loss, step), each run's
    `curve_law.RunSchedule`, and `final`: run_id -> (N, D, final loss) of the runs that are fit
    points (a WSD stable run has a curve but no final loss)."""

    evaluations: pd.DataFrame
    schedules: dict
    final: dict
    source: str = ""

    def final_points(self) -> FitData:
        """The runs' last evaluations: what the final-loss fit sees of the same runs."""
        ids = list(self.final)
        n, d, loss = (np.array([self.final[r][k] for r in ids]) for k in range(3))
        return FitData(n=n, d=d, loss=loss, source=self.source, ids=tuple(ids))

    def only(self, run_ids: Iterable[str]) -> CurveRuns:
        """These runs' curves and schedules (the fit points a selection kept, say)."""
        keep = set(run_ids)
        return replace(self, evaluations=self.evaluations[self.evaluations.run_id.isin(keep)].reset_index(drop=True),
                       schedules={r: s for r, s in self.schedules.items() if r in keep},
                       final={r: f for r, f in self.final.items() if r in keep})


@dataclass(frozen=True)
class CurvesFit:
    """The law fitted to the curve laws' final losses, with intervals from resampling whole runs."""

    law: Law
    optimum: FitResult
    reference_compute: float
    sizes: dict                      # N -> {"law": CurveLaw, "runs": [run_id], "warmup_steps": [lo, hi], "d", "loss"}
    leave_one_out: dict
    ci: dict = field(default_factory=dict)    # name -> (lo, hi) for bootstrap.CI_NAMES
    n_resamples: int = 0
    n_failed: int = 0
    decay: float = DECAY
    decay_profile: dict = field(default_factory=dict)   # lambda -> the curve laws' residual rms (loss)
    samples: np.ndarray | None = field(default=None, repr=False)   # (R, 5): E, A, B, alpha, beta

    @property
    def tokens_per_param(self) -> float | None:
        return float(self.law.tokens_per_param(self.reference_compute)) if self.law.has_optimum else None

    def to_json(self) -> dict:
        """fit.json's "curves" section (see scaling.laws.results.lawfit)."""
        law = self.law
        return json_safe({
            "method": "Tissue et al. 2024 curve law per size, L(N, D) fitted to its final losses",
            "decay": self.decay, "decay_profile": [[k, v] for k, v in self.decay_profile.items()],
            "span": SPAN, "per_size": PER_SIZE,
            "params": law.to_dict(),
            "allocation": {k: getattr(law, k) if self.law.has_optimum else None for k in ("a", "b", "G")},
            "reference_compute": self.reference_compute, "tokens_per_param_at_reference": self.tokens_per_param,
            "residual_rms": self.optimum.residual_rms,
            "ci": None if not self.n_resamples else {
                "level": LEVEL, "resampled": "whole runs", "n_resamples": self.n_resamples,
                "n_failed": self.n_failed, **{k: list(v) for k, v in self.ci.items()}},
            "sizes": [{"n": n, "runs": s["runs"], "warmup_steps": s["warmup_steps"], "law": s["law"].to_dict(),
                       "points": [[d, loss] for d, loss in zip(s["d"], s["loss"])]}
                      for n, s in sorted(self.sizes.items())],
            "leave_one_run_out": self.leave_one_out,
        })


@dataclass(frozen=True)
class _Prepared:
    """The areas S1, S2 of every evaluation past its run's warmup and of every run's last step,
    and each size's D's of interest with the areas of its schedule re-scaled to each."""

    evals: pd.DataFrame          # run_id, n, tokens, loss, s1, s2
    ends: dict                   # run_id -> (s1, s2) at its last step
    grids: dict                  # N -> (d, s1, s2) arrays at the D's of interest


def _prepare(runs: CurveRuns, decay: float) -> _Prepared:
    per_run = {run_id: s.areas(decay) for run_id, s in runs.schedules.items()}
    ev = runs.evaluations
    past = np.array([step > runs.schedules[r].first_decay_step() for r, step in zip(ev.run_id, ev.step)], bool)
    ev = ev[past].copy()
    # An evaluation's step is its tokens over the batch; min() keeps a rounded last one in the run.
    ev["s1"] = [per_run[r][0][min(s, len(per_run[r][0])) - 1] for r, s in zip(ev.run_id, ev.step)]
    ev["s2"] = [per_run[r][1][min(s, len(per_run[r][1])) - 1] for r, s in zip(ev.run_id, ev.step)]
    sweep_d = np.unique([d for _, d, _ in runs.final.values()])
    grids = {}
    for n, group in ev.groupby("n"):
        fitted = [r for r in group.run_id.unique() if r in runs.final]
        if not fitted:
            continue
        template = runs.schedules[max(fitted, key=lambda r: runs.schedules[r].steps)]
        hi = float(group.tokens.max())
        d = np.unique(np.concatenate([np.geomspace(hi / SPAN, hi, PER_SIZE),
                                      sweep_d[(sweep_d >= hi / SPAN) & (sweep_d <= hi)]]))
        last_areas = np.array([[a[-1] for a in template.rescaled(x).areas(decay)] for x in d])
        # Not below the summed rate of the size's first fitted evaluation: a law fitted past a long
        # warmup knows nothing of shorter runs (one run's law once gave 194 nats at D/8).
        within = last_areas[:, 0] >= group.s1.min()
        grids[float(n)] = (d[within], last_areas[within, 0], last_areas[within, 1])
    ends = {r: (a[0][-1], a[1][-1]) for r, a in per_run.items()}
    return _Prepared(evals=ev.loc[:, ["run_id", "n", "tokens", "loss", "s1", "s2"]].reset_index(drop=True),
                     ends=ends, grids=grids)


def _size_laws(prep: _Prepared, weights: np.ndarray | None, decay: float) -> dict:
    """N -> CurveLaw of each size with evaluations of weight > 0 (`weights`: one per evaluation,
    None for all once)."""
    weights = np.ones(len(prep.evals)) if weights is None else weights
    laws = {}
    for key, idx in prep.evals.groupby("n").indices.items():
        n = float(cast(float, key))   # a group's key: a value of the float column N
        if n in prep.grids and weights[idx].sum() > 0:
            e = prep.evals.iloc[idx]
            try:
                laws[n] = fit_curve_law(e.s1, e.s2, e.loss, weights[idx], decay)
            except UsageError:
                continue          # too few evaluations drawn for this size: it drops out
    return laws


def _points(prep: _Prepared, laws: dict[float, CurveLaw], weights: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, D, loss) arrays: each size's curve law at its D's of interest that the curves it was
    fitted to reach (a resample without a size's longest run does not extrapolate beyond the
    others); positive losses only."""
    reach = prep.evals[weights > 0].groupby("n").tokens.max()
    n, d, loss = [], [], []
    for size, law in laws.items():
        grid_d, s1, s2 = prep.grids[size]
        predicted = law.loss(s1, s2)
        ok = np.isfinite(predicted) & (predicted > 0) & (grid_d <= reach[size])
        n += [size] * int(ok.sum())
        d += list(grid_d[ok])
        loss += list(predicted[ok])
    return np.array(n), np.array(d), np.array(loss)


def fitted_decay(runs: CurveRuns) -> tuple[float, dict]:
    """The lambda of DECAYS whose curve laws leave the least squared error over every size's
    evaluations past the warmup (the same evaluations at every lambda), and lambda -> that
    residual rms (loss) for each."""
    profile = {}
    for decay in DECAYS:
        laws = _size_laws(_prepare(runs, decay), None, decay).values()
        if laws:
            profile[decay] = math.sqrt(sum(law.rms ** 2 * law.n_points for law in laws)
                                       / sum(law.n_points for law in laws))
    if not profile:
        raise UsageError(f"{runs.source}: no size has a curve law to fit (at least 5 evaluations past the warmup)")
    return min(profile, key=profile.__getitem__), profile


def leave_one_run_out(runs: CurveRuns, decay: float | None = None, prep: _Prepared | None = None) -> dict:
    """Each fit run's final loss predicted by its size's curve law fitted without it: the relative
    errors (predicted / observed - 1) of the runs whose size has another run to fit on. A run longer
    than the other runs' curves reach ("beyond_reach") is an extrapolation of them: its error is
    summarised apart ("by_reach"), as it answers another question than a run within their reach.
    decay: the annealing momentum (None: fitted); prep: the runs prepared at that decay."""
    decay = fitted_decay(runs)[0] if decay is None else decay
    prep = _prepare(runs, decay) if prep is None else prep
    rows = []
    for run_id, (n, d, observed) in runs.final.items():
        others = prep.evals[(prep.evals.n == n) & (prep.evals.run_id != run_id)]
        if others.empty:
            continue
        try:
            law = fit_curve_law(others.s1, others.s2, others.loss, decay=decay)
        except UsageError:
            continue
        predicted = float(law.loss(*prep.ends[run_id]))
        rows.append({"run_id": run_id, "n": n, "d": d, "loss": observed, "predicted": predicted,
                     "error": predicted / observed - 1.0, "beyond_reach": bool(d > others.tokens.max())})
    errors = np.array([r["error"] for r in rows])
    summary: dict[str, Any] = {"n_runs": len(rows), "mean_error": None, "mean_abs_error": None,
                               "median_abs_error": None, "max_abs_error": None}
    if rows:
        beyond = np.array([r["beyond_reach"] for r in rows])
        summary.update(mean_error=float(errors.mean()), mean_abs_error=float(np.abs(errors).mean()),
                       median_abs_error=float(np.median(np.abs(errors))),
                       max_abs_error=float(np.abs(errors).max()),
                       quantiles={q: float(v) for q, v in zip(("5%", "50%", "95%"),
                                                              np.percentile(errors, [5, 50, 95]))},
                       by_reach={name: {"n_runs": int(m.sum()),
                                        "mean_abs_error": float(np.abs(errors[m]).mean()) if m.any() else None}
                                 for name, m in (("within", ~beyond), ("beyond", beyond))})
    return json_safe({**summary, "runs": rows})


def fit_curves(runs: CurveRuns, *, resamples: int = RESAMPLES, seed: int = 0, reference_compute: float | None = None,
               flops: FlopsPerToken | None = None, decay: float | None = None,
               grid: dict | npt.ArrayLike | None = None) -> CurvesFit:
    """The law fitted to every size's curve-law final losses (see module doc), its percentile
    intervals from `resamples` resamples of whole runs (0: none), and the leave-one-run-out check.
    reference_compute: where tokens per parameter is given (default: the largest c(N) D of the
    runs); flops: the allocation's compute count, as the final-loss fit's; decay: the annealing
    momentum lambda (None: fitted, see fitted_decay); grid: fit.fit_law's."""
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 0:
        raise UsageError(f"the number of resamples must be a whole number >= 0; got {resamples!r}")
    flops = FlopsPerToken() if flops is None else flops
    decay, profile = fitted_decay(runs) if decay is None else (decay, {})
    prep = _prepare(runs, decay)
    ones = np.ones(len(prep.evals))
    laws = _size_laws(prep, ones, decay)
    n, d, loss = _points(prep, laws, ones)
    full = fit_law(n, d, loss, grid=grid)
    law = replace(full.law, flops=flops)
    if reference_compute is None:
        reference_compute = float(max(flops.per_token(fn) * fd for fn, fd, _ in runs.final.values()))
    sizes = {}
    for size in laws:
        ids = sorted(set(prep.evals.run_id[prep.evals.n == size]))
        warmups = [runs.schedules[r].first_decay_step() for r in ids]
        sizes[size] = {"law": laws[size], "runs": ids, "warmup_steps": [min(warmups), max(warmups)],
                       "d": list(prep.grids[size][0]), "loss": list(laws[size].loss(*prep.grids[size][1:]))}
    fit = CurvesFit(law=law, optimum=full, reference_compute=reference_compute, sizes=sizes,
                    leave_one_out=leave_one_run_out(runs, decay, prep), decay=decay, decay_profile=profile)
    if not resamples:
        return fit
    return _resampled(fit, prep, runs, int(resamples), int(seed), flops, decay)


def _resampled(fit: CurvesFit, prep: _Prepared, runs: CurveRuns, resamples: int, seed: int,
               flops: FlopsPerToken, decay: float) -> CurvesFit:
    """The fit with percentile intervals from refitting resamples of whole runs."""
    run_ids = list(runs.schedules)
    position = {r: i for i, r in enumerate(run_ids)}
    of_eval = prep.evals.run_id.map(position).to_numpy()
    starts = np.array(fit.optimum.local_optima[:8], dtype=float)
    rng = np.random.default_rng(seed)
    thetas = []
    for _ in range(resamples):
        counts = np.bincount(rng.integers(0, len(run_ids), len(run_ids)), minlength=len(run_ids))
        weights = counts[of_eval].astype(float)
        try:
            thetas.append(fit_law(*_points(prep, _size_laws(prep, weights, decay), weights), grid=starts).theta)
        except UsageError:
            continue              # too few sizes or D's drawn to determine the law
    if not thetas:
        raise UsageError(f"{runs.source}: no resample of whole runs could be fitted; too few runs for intervals")
    samples = resampling.derived_quantities(np.array(thetas), fit.reference_compute, flops)
    intervals, _ = resampling.percentile_intervals(samples, LEVEL)
    return replace(fit, ci=intervals, n_resamples=len(thetas), n_failed=resamples - len(thetas),
                   samples=np.column_stack([samples[k] for k in PARAM_NAMES]))
