"""Metrics beyond the loss across a sweep: which look "emergent", and how well the loss predicts them.

    shape = rise(compute, values)                      # gradual, sharp ("emergent") or flat, and why
    link = fit_link(loss, exact_match_16)              # metric = ceiling * sigmoid((L0 - L) / width)
    step = two_step(loss_train, em_train, law.loss(n_held, d_held))   # (N, D) -> loss -> metric

Pure: arrays in, numbers out. The runs' metrics are recorded by scaling.train.metrics (runs.csv's
final_token_accuracy, final_exact_match_k, final_continuation_logprob).

Why a metric can look emergent (Schaeffer et al. 2023): exact match of k tokens scores a
continuation 1 only when every token is right, so with per-token accuracy p it is about p^k. p can
rise smoothly with compute while p^16 stays near 0 and then climbs steeply: the sharpness is the
metric's, not a sudden change in the model. `rise` measures it: the share of a metric's rise
across the sweep that comes in the upper half of its log-compute range (a straight line in log C
gives 1/2, a metric flat then climbing nearly 1).

The two-step prediction follows OLMo's ladder (Bhagia et al. 2024): the law predicts the loss at
(N, D), and a sigmoid fitted to the runs' (loss, metric) pairs maps it to the metric. With a few
tiny runs the link has three constants (the floor is 0: a model at chance matches nothing), not
OLMo's four; its intervals resample the runs it is fitted to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.runs.store import TASK_KS, TASK_PROMPTS


@dataclass(frozen=True)
class Metric:
    column: str             # runs.csv's column
    label: str
    exact: bool             # an exact-match (all-or-nothing) metric rather than a smooth one
    trials: int | None      # the scores a run's value averages, for a share of right answers
    k: int | None = None    # continuation length of an exact-match metric


METRICS = {
    "token_accuracy": Metric("final_token_accuracy", "per-token accuracy", False, TASK_PROMPTS * max(TASK_KS)),
    "continuation_logprob": Metric("final_continuation_logprob", "log-probability of 16 tokens (nats)", False,
                                   None),
    **{f"exact_match_{k}": Metric(f"final_exact_match_{k}", f"exact match, {k} token{'s' * (k > 1)}", True,
                                  TASK_PROMPTS, k) for k in TASK_KS},
}

# -------------------------------------------------------------------------------------------- which metric rises how

LATE_SHARE_SHARP = 0.75     # at least this share of the rise in the upper half of log C: sharp
STANDARD_ERRORS = 2.0       # a rise within this many standard errors of zero is none


@dataclass(frozen=True)
class Rise:
    kind: str               # "sharp", "gradual" or "flat"
    late_share: float | None  # share of the rise in the upper half of log C (None when flat)
    rise: float             # the trend's change from the smallest to the largest compute
    error: float            # its standard error, from the runs' scatter around the trend
    reason: str


def rise(compute: npt.ArrayLike, values: npt.ArrayLike, trials: int | None = None) -> Rise:
    """How a metric rises with compute across the sweep: a quadratic in x = log C scaled to [0, 1]
    is fitted to the runs (any layout of N and D); its rise over the upper half of x, as a share of
    its whole rise, is 1/2 for a straight line in log C and near 1 for a metric that stays at its
    floor and then climbs. Sharp at LATE_SHARE_SHARP or more; flat when the whole rise is within
    STANDARD_ERRORS of zero (or negative: the metric does not rise).

    trials: for a share of `trials` all-or-nothing scores (exact match over the prompts), each run's
    noise is at least a binomial draw's, variance p (1 - p) / trials at the metric's mean p (at
    least 1 / trials): a metric that is 0 in most runs and one prompt in a few has no scatter
    around its trend, yet no rise either."""
    c, v = np.asarray(compute, float), np.asarray(values, float)
    ok = np.isfinite(c) & (c > 0) & np.isfinite(v)
    c, v = c[ok], v[ok]
    if np.unique(c).size < 3:
        raise UsageError(f"the rise of a metric with compute needs runs at 3 or more compute values; got "
                         f"{np.unique(c).size}")
    x = (np.log(c) - np.log(c.min())) / np.log(c.max() / c.min())
    design = np.stack([x ** 2, x, np.ones_like(x)], axis=1)
    q, *_ = np.linalg.lstsq(design, v, rcond=None)
    trend = np.polyval(q, [0.0, 0.5, 1.0])
    whole = float(trend[2] - trend[0])                       # q[0] + q[1]
    variance = float(np.sum((v - design @ q) ** 2)) / max(1, v.size - 3)     # each run's noise, from the scatter
    if trials:
        p = min(max(float(v.mean()), 1.0 / trials), 0.5)
        variance = max(variance, p * (1 - p) / trials)                     # or at least a binomial draw's
    along = np.array([1.0, 1.0, 0.0])
    error = float(np.sqrt(variance * along @ np.linalg.pinv(design.T @ design) @ along))
    if whole <= max(STANDARD_ERRORS * error, 1e-9 * max(1.0, float(np.abs(v).max()))):
        return Rise("flat", None, whole, error,
                    f"no rise beyond its uncertainty: {whole:+.3g} across the sweep, standard error {error:.2g}")
    share = min(1.0, max(0.0, float(trend[2] - trend[1]) / whole))   # a trend that dips first: all of it late
    kind = "sharp" if share >= LATE_SHARE_SHARP else "gradual"
    return Rise(kind, share, whole, error,
                f"{100 * share:.0f}% of its rise ({whole:+.3g}) comes in the upper half of log compute")


def independent_tokens(accuracy: npt.ArrayLike, k: int) -> np.ndarray:
    """Exact match of k tokens if each is right independently with the per-token accuracy: p^k."""
    return np.asarray(accuracy, float) ** k


# -------------------------------------------------------------------------------------------- the link loss -> metric

@dataclass(frozen=True)
class Link:
    """metric = ceiling / (1 + exp((loss - midpoint) / width)): 0 at high loss, `ceiling` at low."""
    ceiling: float
    midpoint: float
    width: float

    def __call__(self, loss: npt.ArrayLike) -> np.ndarray:
        z = np.clip((np.asarray(loss, float) - self.midpoint) / self.width, -60, 60)
        return self.ceiling / (1.0 + np.exp(z))


MIDPOINTS, WIDTHS = 81, 41     # the grid the link is fitted on: fine for a few runs, and vectorised


def _grid(L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(midpoints, widths) of every grid point: midpoints within the losses' range widened by its
    span on each side, widths from 1/100 to 10 spans (log-spaced)."""
    span = max(float(np.ptp(L)), 1e-3)
    mid, width = np.meshgrid(np.linspace(L.min() - span, L.max() + span, MIDPOINTS),
                             np.geomspace(span / 100, 10 * span, WIDTHS), indexing="ij")
    return mid.ravel(), width.ravel()


def _fit_links(L: np.ndarray, m: np.ndarray, weights: np.ndarray) -> list[Link]:
    """The least-squares link for each row of `weights` (B, n): for a given midpoint and width the
    best ceiling is linear least squares (clipped to [0, 1]), so the grid is searched exactly."""
    mid, width = _grid(L)
    g = 1.0 / (1.0 + np.exp(np.clip((L[None, :] - mid[:, None]) / width[:, None], -60, 60)))   # (G, n)
    gm = weights @ (g * m).T                                   # (B, G)
    gg = weights @ (g * g).T
    ceiling = np.clip(gm / np.maximum(gg, 1e-300), 1e-6, 1.0)
    sse = ceiling ** 2 * gg - 2 * ceiling * gm + (weights @ (m * m))[:, None]
    best = np.argmin(sse, axis=1)
    return [Link(float(ceiling[i, j]), float(mid[j]), float(width[j])) for i, j in enumerate(best)]


def _check_pairs(L: np.ndarray, m: np.ndarray) -> None:
    if L.size < 3 or L.size != m.size or not (np.isfinite(L).all() and np.isfinite(m).all()):
        raise UsageError(f"a loss-to-metric link needs 3 or more runs with a finite loss and metric; got {L.size}")


def fit_link(loss: npt.ArrayLike, metric: npt.ArrayLike) -> Link:
    """The link of least squared error on a grid of midpoints and widths (see _grid), the ceiling in
    (0, 1] solved exactly at each. At least 3 runs."""
    L, m = np.asarray(loss, float), np.asarray(metric, float)
    _check_pairs(L, m)
    return _fit_links(L, m, np.ones((1, L.size)))[0]


@dataclass(frozen=True)
class TwoStep:
    """A metric predicted from the loss: the link, its predictions at `loss`, and the intervals."""
    link: Link
    loss: np.ndarray            # the losses predicted at (by the law)
    predicted: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    links: tuple                # the bootstrap's links, for bands at other losses
    level: float

    def band(self, loss: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        return _band(self.links, loss, self.level)


def _band(links: Sequence[Link], loss: npt.ArrayLike, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of the links' values at each loss."""
    tail = 50 * (1 - level)
    curves = np.array([link(loss) for link in links])
    return np.percentile(curves, tail, axis=0), np.percentile(curves, 100 - tail, axis=0)


def two_step(loss_train: npt.ArrayLike, metric_train: npt.ArrayLike, loss_predict: npt.ArrayLike, *,
             resamples: int = 200, seed: int = 0, level: float = 0.95) -> TwoStep:
    """Fit the link on (loss, metric) of the training runs; predict the metric at `loss_predict`
    (the law's loss at the runs to predict); percentile intervals from `resamples` refits on
    runs resampled with replacement (resamples with fewer than 3 distinct runs are redrawn)."""
    L, m = np.asarray(loss_train, float), np.asarray(metric_train, float)
    _check_pairs(L, m)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, L.size, (4 * resamples, L.size))
    draws = draws[[np.unique(d).size >= 3 for d in draws]][:resamples]
    counts = np.stack([np.bincount(d, minlength=L.size) for d in draws]).astype(float)
    link, *links = _fit_links(L, m, np.vstack([np.ones(L.size), counts]))
    at = np.asarray(loss_predict, float)
    lo, hi = _band(links, at, level)
    return TwoStep(link, at, link(at), lo, hi, tuple(links), level)


# -------------------------------------------------------------------------------------------- a law fitted to a metric

@dataclass(frozen=True)
class FitMetric:
    """A metric the law E + A/N^alpha + B/D^beta can describe: positive, falling with N and D to a floor."""
    column: str
    meaning: str
    transform: Callable[[np.ndarray], np.ndarray]       # runs.csv column values -> the values fitted


FIT_METRICS = {
    "loss": FitMetric("final_val_loss", "the validation loss (nats/token)", lambda v: v),
    "bpb": FitMetric("final_val_bpb", "the validation loss in bits per byte", lambda v: v),
    "token_error": FitMetric("final_token_accuracy", "1 - per-token top-1 accuracy", lambda v: 1.0 - v),
    "neg_log_accuracy": FitMetric("final_token_accuracy", "-ln(per-token top-1 accuracy)", lambda v: -np.log(v)),
    "continuation_nll": FitMetric("final_continuation_logprob",
                                  "-log-probability of the 16-token continuations (nats)", lambda v: -v),
}
_EXACT = ("exact match is bounded in [0, 1] and sigmoidal in the loss (near 0 until the model is good), not a "
          "power law falling to a floor; fit token_error, or see the report's prediction of it from the loss")
NOT_FITTED = {
    "token_accuracy": "accuracy rises toward 1 instead of falling to a floor; fit token_error (1 - accuracy) or "
                      "neg_log_accuracy",
    "continuation_logprob": "a log-probability is negative and rises with scale; fit its negative, continuation_nll",
    **{f"exact_match_{k}": _EXACT for k in TASK_KS},
}


def fit_metric(name: str) -> FitMetric:
    """The metric `name` to fit the law to; UsageError, in one line, for one the law does not describe."""
    if name in NOT_FITTED:
        raise UsageError(f"the law cannot be fitted to {name}: {NOT_FITTED[name]}")
    if name not in FIT_METRICS:
        raise UsageError(f"unknown metric {name!r}; the law fits {', '.join(FIT_METRICS)}")
    return FIT_METRICS[name]
