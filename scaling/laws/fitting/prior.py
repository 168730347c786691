"""The unit of a prior on E in the Huber objective: what makes its SD mean what it says.

    scale = prior_scale(n, d, loss, fit)             # then EPrior(mean, sd, scale)

A Gaussian prior of standard deviation SD on E adds scale (E - mean)^2 / (2 SD^2) to the summed
Huber objective (`objective.EPrior`). For SD to weigh against the runs as a Bayesian's prior
would, the objective divided by `scale` must hold, in E, the precision the runs give E: then the
penalised E is the precision-weighted mean of the fit's E and the prior's, as a Gaussian
posterior's is. Near its optimum the objective's profile in E (the other four constants refitted
at each E) is a parabola of curvature c; the runs' precision on E is 1 / sd^2, sd the spread of
E over the bootstrap. So scale = c sd^2.

`objective.quasi_likelihood_scale` (delta b, exact for Laplace residuals, for which the Huber fit
at a small delta is the maximum-likelihood fit) is the fallback where this cannot be measured: it
counts the runs as more precise than their bootstrap spread (pi/2 times for Gaussian residuals,
about 3 times on the simulated sweeps of bench/bench_e_prior.py), so a prior given with it pulls
too little.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.objective import quasi_likelihood_scale

PILOT_RESAMPLES = 100      # the spread of E to about 7% (its sd's relative error is 1 / sqrt(2 R))


def prior_scale(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, fit: fitting.FitResult,
                seed: int = 0) -> float:
    """c sd^2 (the module's docstring) for the fit `fit` (made without a prior): sd over
    PILOT_RESAMPLES resamples, c by a central difference of the profile at E +- sd (inside (0,
    lowest loss)); `quasi_likelihood_scale` where the profile is not convex there or cannot be
    refitted."""
    n, d, loss = (np.asarray(v, dtype=float) for v in (n, d, loss))
    fallback = quasi_likelihood_scale(np.log(fit.law.loss(n, d) / loss), fit.delta)
    E = fit.law.E
    boot = resampling.bootstrap(n, d, loss, n_resamples=PILOT_RESAMPLES, seed=seed, delta=fit.delta, full_fit=fit)
    sd = float(np.std(boot.samples["E"]))
    h = min(sd, 0.5 * E, 0.5 * (float(loss.min()) - E))
    if not h > 0:
        return fallback
    try:
        ends = [fitting.fit_law(n, d, loss, delta=fit.delta, grid=fit.end_points, fixed_E=E + s, n_polish=1).objective
                for s in (-h, h)]
    except UsageError:
        return fallback
    curvature = (ends[0] + ends[1] - 2.0 * fit.objective) / h ** 2
    return curvature * sd ** 2 if curvature > 0 else fallback
