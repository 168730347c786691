"""Judge a sweep before training it: simulate it under a prior law, refit, and see what it determines.

    runs = np.array([(n, d) for ...])                       # the planned (N, D) of each run
    outlook = expected_precision(runs, prior, noise=0.01, n_sims=20)
    outlook.tpp_ratio, outlook.a_width, outlook.not_identified_share

Each simulation draws the planned runs' losses from `prior` with log-normal scatter `noise`
(`scaling.laws.design.simulate`), fits them as `scaling fit` does (with `bootstrap` resamples; not
the backtest, which the outlook does not read) and runs the diagnostics. A prior is itself
uncertain: taking its point law as the truth and its residual RMS as the scatter predicted intervals
1.4-1.7x narrower than those realised when the truth was drawn from inside the prior's intervals.
So, given the prior fit's bootstrap laws (`laws`), each simulation draws its truth from them, and
given the degrees of freedom the scatter was measured with (`noise_df`, `noise` then the unbiased
estimate s, s^2 = sum of squares / df), each draws its scatter from the scaled-inverse-chi2
posterior of that measurement, s * sqrt(df / chi2(df)). The outlook is the median over simulations
of the 95% interval widths of alpha, a and tokens per parameter at the design's largest compute, how
often the verdict would be `not identified`, and how often the tokens-per-parameter interval covers
the prior's true value. Two designs at equal compute compared this way answer "how should I spend my
sweep budget?" with a number.

`asymptotic_precision` is the same question answered without simulation: the widths the best fit
could reach if the law's form and the scatter were known, from the delta method on the
Gauss-Newton covariance of the log losses (for log-normal scatter, the Cramer-Rao bound). A design
whose bound already reaches the `not identified` thresholds cannot determine the allocation at that
scatter, whatever the fit does; it also checks the simulations (the two agree on a design that is
well determined). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.laws import analysis
from scaling.laws.design.simulate import check_outlook, simulate
from scaling.laws.fitting.objective import law_from_theta, log_loss_jacobian, theta_from_law
from scaling.laws.fitting.quantiles import normal_quantile
from scaling.laws.forms.law import Law
from scaling.laws.optimal.allocation import check_allocatable, has_allocation
from scaling.laws.results import lawfit as results


@dataclass(frozen=True)
class Outlook:
    """What a design is expected to determine (medians over `n_sims` simulated sweeps)."""

    n_runs: int
    compute: float                 # total training compute of the design, sum of 6 N D
    reference_compute: float       # the largest run's 6 N D, where tokens per parameter is read
    noise: float
    n_sims: int
    alpha_rel_width: float         # (hi - lo) / alpha of the 95% interval
    a_width: float                 # hi - lo of a
    tpp_ratio: float               # hi / lo of tokens per parameter
    not_identified_share: float    # share of simulations the verdict calls `not identified`
    tpp_coverage: float            # share whose tokens-per-parameter interval holds the truth
    refused: int = 0               # simulations whose fit was refused (constants unbounded)
    prior_laws: int = 0            # bootstrap laws the truths were drawn from (0: the point law)
    noise_df: int | None = None    # degrees of freedom of the measured scatter (None: taken as exact)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _widths(fit: results.LawFit) -> tuple[float, float, float]:
    alpha, a, tpp = (fit.interval(k) for k in ("alpha", "a", "tokens_per_param"))
    return ((alpha[1] - alpha[0]) / abs(fit.law.alpha) if alpha and fit.law.alpha else np.inf,
            a[1] - a[0] if a else np.inf,
            tpp[1] / tpp[0] if tpp and tpp[0] > 0 else np.inf)


def usable_laws(resampled: npt.ArrayLike) -> np.ndarray:
    """The rows of (R, 5) bootstrap constants that make a law with an allocation."""
    resampled = np.asarray(resampled, dtype=float)
    return resampled[has_allocation(resampled)]


def measured_scatter(fit: results.LawFit | None) -> tuple[float, int | None]:
    """The prior fit's scatter, as an unbiased estimate s (s^2 = sum of squares / degrees of
    freedom), and the degrees of freedom it was measured on: the replicates' pure error where the
    sweep had replicates, else the residual RMS times sqrt(points / (points - 5)) (the RMS divides
    by the points, though the law's 5 constants took 5 of them: it runs 3-22% below the true
    scatter); 0.01 without a fit."""
    if fit is None or not fit.residual_rms:
        return 0.01, None
    lof = fit.lack_of_fit or {}
    replicates = next((t for t in lof.get("tests", ()) if t.get("by") == "replicates"), None)
    if lof.get("pure_error_rms") and replicates is not None:
        return float(lof["pure_error_rms"]), int(replicates["df"][1])
    points = int(fit.data.n_points or 0)
    if points <= 5:
        return float(fit.residual_rms), None
    return float(fit.residual_rms) * (points / (points - 5)) ** 0.5, points - 5


def expected_precision(runs: npt.ArrayLike, prior: Law, *, noise: float = 0.01, n_sims: int = 20, bootstrap: int = 100,
                       seed: int = 0, laws: npt.ArrayLike | None = None, noise_df: int | None = None,
                       fixed_E: float | None = None, E_prior: tuple | None = None) -> Outlook:
    """Simulate the design `n_sims` times under `prior` (see the module doc). laws: (R, 5)
    bootstrap constants E, A, B, alpha, beta to draw each simulation's truth from; noise_df: the
    degrees of freedom `noise` was measured with, to draw each simulation's scatter. fixed_E,
    E_prior: each simulated sweep is refitted with E pinned, or under the prior (mean, sd), as the
    prior fit was made: a fit that pinned E and a refit that frees it measure different intervals."""
    runs = np.asarray(runs, dtype=float)
    if runs.ndim != 2 or runs.shape[1] != 2 or len(runs) < 6:
        raise UsageError(f"a design needs at least 6 runs of (N, D); got {len(runs)}")
    check_outlook(n_sims, bootstrap, noise)
    if noise_df is not None and noise_df < 1:
        raise UsageError(f"the scatter's degrees of freedom must be >= 1; got {noise_df}")
    # Checked here, not per simulation: each refit's refusal would count as "not identified".
    check_allocatable(prior, "the prior")
    truths = None if laws is None else usable_laws(laws)
    if truths is not None and not len(truths):
        raise UsageError("none of the prior's bootstrap laws has alpha, beta > 0: no allocation to simulate")
    compute = 6.0 * runs[:, 0] * runs[:, 1]
    reference = float(compute.max())
    rng = np.random.default_rng(seed)
    widths, not_identified, covered, refused = [], 0, 0, 0
    for k in range(n_sims):
        law = prior if truths is None else replace(Law(*truths[rng.integers(len(truths))]), flops=prior.flops)
        scatter = noise if noise_df is None else noise * float(np.sqrt(noise_df / rng.chisquare(noise_df)))
        truth = float(law.tokens_per_param(reference))
        data = simulate(law, runs, noise=scatter, seed=seed + k)
        try:   # no backtest: the outlook reads the bootstrap's intervals and the verdict's
            # `not identified`, and the backtest's checks are cautions at most (about 40% of each fit)
            fit = analysis.fit_data(data, bootstrap=bootstrap, seed=seed + k, backtest=False, fixed_E=fixed_E,
                                    E_prior=E_prior)
        except UsageError:              # the constants run off: as undetermined as it gets
            refused += 1
            not_identified += 1
            widths.append((np.inf, np.inf, np.inf))
            continue
        widths.append(_widths(fit))
        not_identified += fit.verdict == "not identified"
        tpp = fit.interval("tokens_per_param")
        covered += bool(tpp and tpp[0] <= truth <= tpp[1])
    alpha_w, a_w, tpp_r = np.median(np.array(widths), axis=0)
    return Outlook(len(runs), float(compute.sum()), reference, noise, n_sims, float(alpha_w), float(a_w),
                   float(tpp_r), not_identified / n_sims, covered / n_sims, refused,
                   0 if truths is None else len(truths), noise_df)


def asymptotic_precision(runs: npt.ArrayLike, law: Law, *, noise: float, compute: float,
                         level: float = 0.95) -> tuple[float, float]:
    """(hi - lo of a, hi / lo of tokens per parameter at `compute`): the `level` intervals of a fit
    of the design `runs` (N, D) whose truth is `law`, scattered log-normally by `noise`, to first
    order. Covariance noise^2 (J^T J)^-1, J the Jacobian of log L at the runs in (log E, log A,
    log B, alpha, beta); the two answers' gradients by central differences. inf where the design
    cannot separate the constants (J^T J singular)."""
    runs = np.asarray(runs, dtype=float)
    n, d = runs[:, 0], runs[:, 1]
    jac = log_loss_jacobian(law, n, d)
    info = jac.T @ jac
    if np.linalg.cond(info) > 1e14:
        return np.inf, np.inf
    cov = noise**2 * np.linalg.inv(info)
    theta = theta_from_law(law)        # log E, log A, log B, alpha, beta: scales alike

    def answers(t: np.ndarray) -> np.ndarray:
        moved = replace(law_from_theta(t), flops=law.flops)
        return np.array([moved.a, np.log(moved.tokens_per_param(compute))])

    steps = 1e-6 * np.maximum(np.abs(theta), 1.0)
    grad = np.column_stack([(answers(theta + e) - answers(theta - e)) / (2 * e.sum()) for e in np.diag(steps)])
    sd = np.sqrt(np.einsum("ij,jk,ik->i", grad, cov, grad))
    z = normal_quantile(0.5 + level / 2)
    return float(2 * z * sd[0]), float(np.exp(2 * z * sd[1]))
