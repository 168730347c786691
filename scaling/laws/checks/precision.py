"""A fit's estimation error: how far its prediction of a run could be off because its constants
were estimated from a handful of runs, to first order (Gauss-Newton).

    cov = law_covariance(result, n, d, fixed_E=None)        # (5, 5), None where not separable
    sd = prediction_sd(result.law, cov, n_far, d_far)       # sd of each log L(n_far, d_far)
    sd = estimation_sd(result.law, cov, n_far, d_far)       # the same, broadcast; 0 where cov is None
    dof = dof_left(len(n), cov)                             # the runs less the free constants

A law refitted on few runs at few sizes predicts far beyond them with an error of its own. The
backtest measures it for each cut (`backtest.with_precision`: how precisely the cut measured its
bias) and for the law that predicts beyond the data (the floor of its interval,
`extrapolation.at_least`). Pure: arrays in, arrays out.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.objective import log_loss_jacobian
from scaling.laws.forms.law import Law


def law_covariance(result: fitting.FitResult, n: np.ndarray, d: np.ndarray, *,
                   fixed_E: float | None) -> np.ndarray | None:
    """The Gauss-Newton covariance scatter^2 (J^T J)^-1 of a fit's free constants (log E, log A, log
    B, alpha, beta; E left out where pinned) on its runs (n, d): J the derivatives of log L at
    them, scatter their residual RMS over the degrees of freedom left, a prior on E adding its
    precision. None where the runs cannot separate the constants."""
    free = slice(0 if fixed_E is None else 1, None)
    jac = log_loss_jacobian(result.law, n, d)[:, free]
    scatter = result.residual_rms * math.sqrt(len(n) / max(len(n) - jac.shape[1], 1))
    info = jac.T @ jac / max(scatter, 1e-6) ** 2
    if result.E_prior is not None and fixed_E is None:     # the prior's precision on log E
        info[0, 0] += (result.law.E / result.E_prior.sd) ** 2
    # A law run off to constants past a float (a one-budget sweep's, say) has no finite information:
    # numpy's SVD then raises rather than giving a condition number.
    if not np.all(np.isfinite(info)) or np.linalg.cond(info) > 1e14:
        return None
    return np.linalg.inv(info)


def floor_covariance(result: fitting.FitResult, n: np.ndarray, d: np.ndarray, *,
                     fixed_E: float | None) -> np.ndarray | None:
    """The covariance the floor beyond the data is measured by (`extrapolation.at_least`):
    `law_covariance`, or where the runs cannot separate E from the other constants (E run to its
    bound) that of the other four with E held where the fit put it: a lower bound on the law's
    estimation error, as a floor should be. On the public tables this is Gemstones' 30x split (31
    runs, no cut; its intervals held 19 of 23 without it, 23 with) and Porian et al.'s long-warmup
    configurations, already wider (docs/backtests.md, "Cuts of the minimum size")."""
    cov = law_covariance(result, n, d, fixed_E=fixed_E)
    return law_covariance(result, n, d, fixed_E=result.law.E) if cov is None and fixed_E is None else cov


def prediction_sd(law: Law, cov: np.ndarray, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray:
    """The sd of each log L(n, d) owed to estimating `law` (its free constants' covariance `cov`,
    `law_covariance`), to first order."""
    grad = log_loss_jacobian(law, np.atleast_1d(n), np.atleast_1d(d))[:, 5 - cov.shape[0]:]
    return np.sqrt(np.einsum("ij,jk,ik->i", grad, cov, grad))


def estimation_sd(law: Law | None, cov: np.ndarray | tuple | None, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray:
    """`prediction_sd` broadcast over n and d, as the floor beyond the data takes it
    (`extrapolation.at_least`): 0 where not measured (no `cov`: constants the runs cannot separate,
    or a fit.json from before), so that the floor is the runs' scatter alone."""
    shape = np.broadcast(np.asarray(n), np.asarray(d)).shape
    if law is None or cov is None or len(cov) == 0:
        return np.zeros(shape)
    n, d = (np.broadcast_to(np.asarray(v, dtype=float), shape).ravel() for v in (n, d))
    return prediction_sd(law, np.asarray(cov, dtype=float), n, d).reshape(shape)


def dof_left(runs: int, cov: np.ndarray | tuple | None) -> float:
    """The degrees of freedom a fit to `runs` runs left for `estimation_sd`'s Student t: its runs
    less its free constants (`cov`'s). Where not measured (`cov` None or empty) the estimation
    error is 0 and the t's degrees of freedom change nothing: none are taken off."""
    return float(runs - (0 if cov is None else len(cov)))
