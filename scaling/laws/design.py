"""Judge a sweep before training it: simulate it under a prior law, refit, and see what it determines.

    runs = np.array([(n, d) for ...])                       # the planned (N, D) of each run
    outlook = expected_precision(runs, prior, noise=0.01, n_sims=20)
    outlook.tpp_ratio, outlook.a_width, outlook.not_identified_share

Each simulation draws the planned runs' losses from `prior` with log-normal scatter `noise`
(`scaling.laws.simulate`), fits them as `scaling fit` does (with `bootstrap` resamples) and runs the
diagnostics. The outlook is the median over simulations of the 95% interval widths of alpha, a and
tokens per parameter at the design's largest compute, how often the verdict would be `not
identified`, and how often the tokens-per-parameter interval covers the prior's true value. Two
designs at equal compute compared this way answer "how should I spend my sweep budget?" with a
number. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.errors import UsageError
from scaling.laws import analysis, results
from scaling.laws.allocation import check_allocatable
from scaling.laws.bootstrap import MAX_RESAMPLES
from scaling.laws.law import Law
from scaling.laws.simulate import simulate


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

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _widths(fit: results.LawFit) -> tuple[float, float, float]:
    alpha, a, tpp = (fit.interval(k) for k in ("alpha", "a", "tokens_per_param"))
    return ((alpha[1] - alpha[0]) / abs(fit.law.alpha) if alpha and fit.law.alpha else np.inf,
            a[1] - a[0] if a else np.inf,
            tpp[1] / tpp[0] if tpp and tpp[0] > 0 else np.inf)


def expected_precision(runs, prior: Law, *, noise: float = 0.01, n_sims: int = 20, bootstrap: int = 100,
                       seed: int = 0) -> Outlook:
    """Simulate the design `n_sims` times under `prior` (see the module doc)."""
    runs = np.asarray(runs, dtype=float)
    if runs.ndim != 2 or runs.shape[1] != 2 or len(runs) < 6:
        raise UsageError(f"a design needs at least 6 runs of (N, D); got {len(runs)}")
    if n_sims < 1 or not 10 <= bootstrap <= MAX_RESAMPLES:
        raise UsageError("a design's outlook needs at least 1 simulation and from 10 to "
                         f"{MAX_RESAMPLES:,} bootstrap resamples; got {n_sims} and {bootstrap}")
    # Checked here, not per simulation: each refit's refusal would count as "not identified".
    check_allocatable(prior, "the prior")
    compute = 6.0 * runs[:, 0] * runs[:, 1]
    reference = float(compute.max())
    truth = float(prior.tokens_per_param(reference))
    widths, not_identified, covered, refused = [], 0, 0, 0
    for k in range(n_sims):
        data = simulate(prior, runs, noise=noise, seed=seed + k)
        try:
            fit = analysis.fit_data(data, bootstrap=bootstrap, seed=seed + k)
        except UsageError:              # the constants run off: as undetermined as it gets
            refused += 1
            not_identified += 1
            widths.append((np.inf, np.inf, np.inf))
            continue
        widths.append(_widths(fit))
        not_identified += fit.diagnostics.verdict == "not identified"
        tpp = fit.interval("tokens_per_param")
        covered += bool(tpp and tpp[0] <= truth <= tpp[1])
    alpha_w, a_w, tpp_r = np.median(np.array(widths), axis=0)
    return Outlook(len(runs), float(compute.sum()), reference, noise, n_sims, float(alpha_w), float(a_w),
                   float(tpp_r), not_identified / n_sims, covered / n_sims, refused)
