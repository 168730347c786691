"""Synthetic sweeps from a known law: a design of runs, a noise level -> the points a sweep would give.

    law = Law(E=1.8, A=400, B=2000, alpha=0.34, beta=0.37)
    runs = cross_grid(sizes=np.geomspace(1e6, 3e7, 5), tokens=np.geomspace(2e7, 6e8, 4))
    runs = isoflop_grid(budgets=np.geomspace(1e15, 1e17, 4), law=law, per_budget=5, span=4.0)
    data = simulate(law, runs, noise=0.01, seed=0)      # a FitData, ready for analysis.fit_data

Noise is multiplicative and log-normal (each loss times exp(noise * z), z standard normal), the
scatter of final losses between seeds and learning rates: `noise=0.01` is about 1%. The
diagnostics' thresholds are calibrated with these functions (bench/bench_diagnostics.py), and
`scaling design` uses them to judge a sweep before it is trained.
"""

from __future__ import annotations

import numpy as np

from scaling.errors import UsageError
from scaling.laws.fitdata import FitData
from scaling.laws.law import Law


def cross_grid(sizes, tokens) -> np.ndarray:
    """Every size trained on every token count: an (M, 2) array of (N, D)."""
    n, d = np.meshgrid(np.asarray(sizes, float), np.asarray(tokens, float), indexing="ij")
    return np.column_stack([n.ravel(), d.ravel()])


def isoflop_grid(budgets, law: Law | None = None, *, tokens_per_param: float | None = None,
                 per_budget: int = 5, span: float = 4.0) -> np.ndarray:
    """Chinchilla's Approach-2 design: at each compute C, `per_budget` sizes spaced evenly in log N
    over a factor `span` either side of the expected optimum, each trained on D = C / 6N.

    The expected optimum comes from `law` (its N_opt(C)) or, without one, from a prior ratio
    `tokens_per_param` (N = sqrt(C / (6 k)); Chinchilla's rule of thumb is k = 20).
    """
    budgets = np.asarray(budgets, dtype=float)
    if law is not None:
        centre = np.asarray(law.n_opt(budgets), dtype=float)
    elif tokens_per_param is not None:
        centre = np.sqrt(budgets / (6.0 * tokens_per_param))
    else:
        raise UsageError("an IsoFLOP design needs a prior: a law or a tokens-per-parameter ratio")
    if per_budget < 2 or not span > 1:
        raise UsageError(f"an IsoFLOP design needs >= 2 sizes per budget and a span > 1; "
                         f"got {per_budget} and {span}")
    offsets = np.geomspace(1.0 / span, span, per_budget)
    n = (centre[:, None] * offsets[None, :]).ravel()
    d = np.repeat(budgets, per_budget) / (6.0 * n)
    return np.column_stack([n, d])


def simulate(law: Law, runs, *, noise: float = 0.01, seed: int = 0, source: str = "simulated") -> FitData:
    """The points a sweep of `runs` ((N, D) rows) would give if `law` were true, with log-normal
    scatter `noise` (seeded)."""
    runs = np.asarray(runs, dtype=float)
    if runs.ndim != 2 or runs.shape[1] != 2:
        raise UsageError(f"runs must be an (M, 2) array of (N, D); got shape {runs.shape}")
    if not noise >= 0:
        raise UsageError(f"noise must be >= 0; got {noise!r}")
    rng = np.random.default_rng(seed)
    n, d = runs[:, 0], runs[:, 1]
    loss = law.loss(n, d) * np.exp(noise * rng.standard_normal(n.size))
    return FitData(n=n, d=d, loss=loss, source=f"{source} (noise {noise:g}, seed {seed})")
