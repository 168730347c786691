"""Judge a curve-based design before training it: the same planned runs fitted from every logged
evaluation (`scaling fit --curves`) and from their final losses only, at equal training FLOPs.

    outlook = curve_outlook(prior, planned, anneal=0.04, decay=0.999, noise=0.007, run_noise=0.005)
    outlook.tpp_ratio["curves"], outlook.tpp_ratio["final"]      # median hi/lo of tokens per parameter

Each simulation draws the planned runs' curves from `prior` and a known schedule effect
(`scaling.laws.curves.simulate.simulate_schedules`: per-evaluation scatter `noise`, per-run
`run_noise`) and fits them twice: `curve_fit.fit_curves` (intervals from resampling whole runs)
and the final-loss fit of the same runs (`fit.fit_law` and the bootstrap of points, as `scaling fit`
does). Both see the same runs, so the same compute: a WSD plan's stable run and branches are fitted
from their curves on one side and from the branches' final losses on the other. Pure: no I/O.

Measured (`scaling design configs/tiny.yaml configs/tiny_wsd.yaml --fit <the demo's fit --curves>
--curves --sims 20 --bootstrap 100`): median tokens-per-parameter hi/lo 1.30 from the curves
against 2.01 from the final losses for the cosine sweep; 7.06 against 3.01 for the WSD one, whose
branches log too few cooldown evaluations to measure the annealing weight C.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.laws.curves.fit import CurveRuns, fit_curves
from scaling.laws.curves.simulate import PlannedCurve, simulate_schedules
from scaling.laws.design.simulate import check_outlook
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting.fit import fit_law
from scaling.laws.forms.law import Law

FITS = ("curves", "final")


def both_fits(runs: CurveRuns, truth: Law, *, resamples: int, seed: int,
              grid: dict | npt.ArrayLike | None = None) -> dict:
    """One sweep's curves fitted both ways, as `scaling fit` does (the curves' annealing momentum
    fitted too, not handed the simulation's): fit -> {"a", "a_ci", "covers" (a's interval holds the
    truth's), "tpp_ci", "tpp_ratio" (hi / lo at the largest run's 6 N D, under the truth's FLOPs per
    token)}, "loo": the curve laws' leave-one-run-out mean absolute error, and "decay": the fitted lambda."""
    points = runs.final_points()
    reference = float((6.0 * points.n * points.d).max())
    curves = fit_curves(runs, resamples=resamples, seed=seed, reference_compute=reference, flops=truth.flops,
                        grid=grid)
    final = fit_law(points.n, points.d, points.loss, grid=grid)
    boot = resampling.bootstrap(points.n, points.d, points.loss, n_resamples=resamples, seed=seed,
                                reference_compute=reference, full_fit=final, flops=truth.flops)
    out = {"loo": curves.leave_one_out["mean_abs_error"], "decay": curves.decay}
    for name, a, a_ci, tpp_ci in (("curves", curves.law.a, curves.ci["a"], curves.ci["tokens_per_param"]),
                                  ("final", final.law.a, boot.intervals["a"], boot.intervals["tokens_per_param"])):
        out[name] = {"a": a, "a_ci": a_ci, "covers": bool(a_ci[0] <= truth.a <= a_ci[1]), "tpp_ci": tpp_ci,
                     "tpp_ratio": tpp_ci[1] / tpp_ci[0] if tpp_ci[0] > 0 else np.inf}
    return out


@dataclass(frozen=True)
class CurveOutlook:
    """Medians over `n_sims` simulated sweeps of each fit's tokens-per-parameter interval (hi / lo),
    and how often its interval of a held the truth's; FITS are the keys. (Not tokens per parameter's
    coverage: the simulated final losses follow the truth's alpha and beta, so its a, but not its B,
    which the schedule's mean rate and the annealing bonus rescale; see curve_simulate.)"""

    compute: float               # training FLOPs of the runs, 6 N D each (a branch: its steps after its stable run's)
    n_runs: int                  # runs simulated (a WSD stable run and its branches count each)
    n_points: int                # final losses the final-loss fit sees
    n_sims: int
    tpp_ratio: dict
    a_coverage: dict
    loo_error: float             # median of the curve laws' leave-one-run-out mean absolute error
    not_identified: int = 0      # simulations left out: a fit ran off past what fit.json holds

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def curve_outlook(prior: Law, planned: Sequence[PlannedCurve], *, anneal: float, decay: float, noise: float,
                  run_noise: float, eval_interval: int = 100, n_sims: int = 20, resamples: int = 100, seed: int = 0,
                  grid: dict | npt.ArrayLike | None = None) -> CurveOutlook:
    """Simulate the `planned` runs (`curve_simulate.PlannedCurve`s) `n_sims` times under `prior`
    and compare the two fits (see module doc)."""
    check_outlook(n_sims, resamples, noise + run_noise)
    sims, not_identified = [], 0
    for k in range(n_sims):
        runs = simulate_schedules(prior, planned, anneal=anneal, decay=decay, noise=noise, run_noise=run_noise,
                                  eval_interval=eval_interval, seed=seed + k)
        if len(runs.final) < 6:
            raise UsageError(f"a design needs at least 6 runs with a final loss; got {len(runs.final)}")
        try:
            sims.append(both_fits(runs, prior, resamples=resamples, seed=seed + k, grid=grid))
        except UsageError:      # a fit that runs off is not identified, as the final-loss design counts it
            not_identified += 1
    if not sims:
        raise UsageError(f"none of the {n_sims} simulated sweeps identifies the law: every fit ran off "
                         "(the planned runs do not bound its constants); spread N and D wider")
    compute = sum(6.0 * p.n * (p.schedule.steps - p.start) * p.schedule.train.batch_tokens for p in planned)
    return CurveOutlook(compute=compute, n_runs=len(planned), n_points=len(runs.final), n_sims=n_sims,
                        tpp_ratio={f: float(np.median([s[f]["tpp_ratio"] for s in sims])) for f in FITS},
                        a_coverage={f: float(np.mean([s[f]["covers"] for s in sims])) for f in FITS},
                        loo_error=float(np.median([s["loo"] for s in sims])), not_identified=not_identified)
