"""Synthetic sweeps from a known law: a design of runs, a noise level -> the points a sweep would give.

    law = Law(E=1.8, A=400, B=2000, alpha=0.34, beta=0.37)
    runs = cross_grid(sizes=np.geomspace(1e6, 3e7, 5), tokens=np.geomspace(2e7, 6e8, 4))
    runs = isoflop_grid(budgets=np.geomspace(1e15, 1e17, 4), law=law, per_budget=5, span=4.0)
    data = simulate(law, runs, noise=0.01, seed=0)      # a FitData, ready for analysis.fit_data

Noise is multiplicative and log-normal (each loss times exp(noise * z), z standard normal), the
scatter of final losses between seeds and learning rates: `noise=0.01` is about 1%. Systematic
error, which the verdict must catch too: `size_offset` shifts every run of one model size by a
shared log-normal factor (a learning rate mistuned for that size), `tails` draws z from Student's t
with that many degrees of freedom (outlying runs), scaled to the same standard deviation.

    runs = isoflop_grid(budgets, law, ladder=np.geomspace(1e7, 1e10, 13))   # sizes of one family
    data = simulate(law, runs, noise=0.005, size_offset=0.01, seed=0) The
diagnostics' thresholds are calibrated with these functions (bench/bench_diagnostics.py), and
`scaling design` uses them to judge a sweep before it is trained.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.laws.fitting.bootstrap import MAX_RESAMPLES, MIN_RESAMPLES
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.forms.law import Law

# The bounds of a design's simulation. A final loss scattered by more than 100% (log-normal sd 1) is no
# sweep's (theirs is 0.5-2%): at 5 a simulated loss passed 1e4, at 1e300 every one overflowed. The
# outlook's medians settle within a few hundred simulated sweeps, each a full fit: 1e8 ran for days.
MAX_NOISE = 1.0
MAX_SIMS = 1_000


def check_outlook(n_sims: int, resamples: int, noise: float) -> None:
    """UsageError unless a design's outlook asks for 1 to MAX_SIMS simulations, MIN_RESAMPLES to
    MAX_RESAMPLES resamples each (as a fit's bootstrap), and a scatter in (0, MAX_NOISE]."""
    if not (1 <= n_sims <= MAX_SIMS and MIN_RESAMPLES <= resamples <= MAX_RESAMPLES):
        raise UsageError(f"a design's outlook needs from 1 to {MAX_SIMS:,} simulations and from {MIN_RESAMPLES} to "
                         f"{MAX_RESAMPLES:,} bootstrap resamples; got {n_sims} and {resamples}")
    if not 0 < noise <= MAX_NOISE:
        raise UsageError(f"the scatter of a final loss must be above 0 and at most {MAX_NOISE:g} (100%, relative); "
                         f"got {noise!r}")


def cross_grid(sizes: npt.ArrayLike, tokens: npt.ArrayLike) -> np.ndarray:
    """Every size trained on every token count: an (M, 2) array of (N, D)."""
    n, d = np.meshgrid(np.asarray(sizes, float), np.asarray(tokens, float), indexing="ij")
    return np.column_stack([n.ravel(), d.ravel()])


def isoflop_grid(budgets: npt.ArrayLike, law: Law | None = None, *, tokens_per_param: float | None = None,
                 per_budget: int = 5, span: float = 4.0, ladder: npt.ArrayLike | None = None) -> np.ndarray:
    """Chinchilla's Approach-2 design: at each compute C, `per_budget` sizes spaced evenly in log N
    over a factor `span` either side of the expected optimum, each trained on D = C / 6N.

    The expected optimum comes from `law` (its N_opt(C)) or, without one, from a prior ratio
    `tokens_per_param` (N = sqrt(C / (6 k)); Chinchilla's rule of thumb is k = 20). With a `ladder`
    of sizes (a model family, as a real sweep has), each budget takes the `per_budget` ladder sizes
    nearest its optimum in log N, so budgets share sizes.
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
    if ladder is not None:
        ladder = np.sort(np.asarray(ladder, dtype=float))
        if ladder.size < per_budget:
            raise UsageError(f"a ladder of {ladder.size} sizes cannot give {per_budget} per budget")
        nearest = np.argsort(np.abs(np.log(ladder)[None, :] - np.log(centre)[:, None]), axis=1)[:, :per_budget]
        n = np.sort(ladder[nearest], axis=1).ravel()
    else:
        n = (centre[:, None] * np.geomspace(1.0 / span, span, per_budget)[None, :]).ravel()
    d = np.repeat(budgets, per_budget) / (6.0 * n)
    return np.column_stack([n, d])


def simulate(law: Law, runs: npt.ArrayLike, *, noise: float = 0.01, seed: int = 0, size_offset: float = 0.0,
             tails: float | None = None, source: str = "simulated") -> FitData:
    """The points a sweep of `runs` ((N, D) rows) would give if `law` were true, with log-normal
    scatter `noise`, a shared offset per model size of scale `size_offset`, and Student-t scatter
    with `tails` degrees of freedom instead of normal (seeded)."""
    runs = np.asarray(runs, dtype=float)
    if runs.ndim != 2 or runs.shape[1] != 2:
        raise UsageError(f"runs must be an (M, 2) array of (N, D); got shape {runs.shape}")
    if not (noise >= 0 and size_offset >= 0):
        raise UsageError(f"noise and size_offset must be >= 0; got {noise!r} and {size_offset!r}")
    if tails is not None and not tails > 2:
        raise UsageError(f"tails (Student-t degrees of freedom) must be > 2 for a finite spread; got {tails!r}")
    rng = np.random.default_rng(seed)
    n, d = runs[:, 0], runs[:, 1]
    z = rng.standard_normal(n.size) if tails is None else rng.standard_t(tails, n.size) / np.sqrt(tails / (tails - 2))
    sizes, size_of = np.unique(n, return_inverse=True)
    shared = size_offset * rng.standard_normal(sizes.size)[size_of]
    loss = law.loss(n, d) * np.exp(noise * z + shared)
    kind = f"noise {noise:g}" + (f", size offsets {size_offset:g}" if size_offset else "") + \
        (f", t{tails:g} tails" if tails else "")
    return FitData(n=n, d=d, loss=loss, source=f"{source} ({kind}, seed {seed})")
