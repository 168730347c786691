"""Inference: lifetime FLOPs of serving a model, and the model that is cheapest to train and serve.

    C_inf = 2 N FLOPs per generated token; over a model's life 2 N x tokens per request x requests,
    which equals training's 6 N D after 3 D / (tokens per request) requests, whatever N.

The inference-aware optimum (Sardana et al. 2024, "Beyond Chinchilla-Optimal", arXiv:2401.00448):
the N, D that reach a target loss under a law at least total cost 6 N D + 2 N D_inf.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from scaling.cost.result import SIX_ND, Result, check_allocation
from scaling.errors import UsageError
from scaling.formats import positive
from scaling.laws.forms.law import Law


def non_negative(value: float | str, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number >= 0, got {value!r}") from None
    if not math.isfinite(x) or x < 0:
        raise UsageError(f"{name} must be a finite number >= 0, got {value!r}")
    return x


# ----------------------------------------------------------------------------- lifetime inference

@dataclass(frozen=True)
class InferenceRow(Result):
    requests: float
    generated_tokens: float
    flops: float
    ratio_to_training: float | None


@dataclass(frozen=True)
class InferenceCost(Result):
    """Lifetime inference compute at several request counts, against training compute."""

    n_params: float
    tokens_per_request: float
    flops_per_token: float          # 2 N
    flops_per_request: float
    training_tokens: float | None
    training_flops: float | None    # 6 N D
    rows: tuple
    crossover_requests: float | None    # training FLOPs / FLOPs per request = 3 D / tokens
    crossover_tokens: float | None      # 3 D
    units: dict = field(default_factory=lambda: {
        "n_params": "parameters", "tokens_per_request": "generated tokens per request",
        "flops_per_token": "FLOPs per generated token", "flops_per_request": "FLOPs",
        "training_tokens": "tokens", "training_flops": "FLOPs",
        "rows.requests": "requests", "rows.generated_tokens": "tokens", "rows.flops": "FLOPs",
        "rows.ratio_to_training": "inference FLOPs / training FLOPs",
        "crossover_requests": "requests", "crossover_tokens": "generated tokens"})
    assumptions: tuple = ()


def inference_cost(n_params: float | str, tokens_per_request: float | str, requests: Sequence[float | str],
                   training_tokens: float | str | None = None) -> InferenceCost:
    """C_inf = 2 N per generated token, times tokens per request, times requests."""
    n = positive(n_params, "parameter count N")
    t = positive(tokens_per_request, "tokens per request")
    reqs = [positive(r, "request count") for r in requests]
    d = None if training_tokens is None else positive(training_tokens, "training tokens D")
    per_token = 2.0 * n
    per_request = per_token * t
    train = None if d is None else 6.0 * n * d
    rows = tuple(InferenceRow(r, r * t, r * per_request,
                              None if train is None else r * per_request / train) for r in reqs)
    assumptions = [
        "C_inf = 2 N FLOPs per generated token (one forward pass, 1 multiply-add per parameter)",
        "prompt (prefill) tokens and attention over the KV cache (4 n_layers n_ctx d_model per "
        "token with n_ctx tokens cached) not counted: real serving costs more per request",
    ]
    if train is not None:
        assumptions.append(SIX_ND)
        assumptions.append("crossover: requests at which 2 N x tokens x requests = 6 N D, "
                           "i.e. 3 D / tokens per request, independent of N")
    return InferenceCost(
        n_params=n, tokens_per_request=t, flops_per_token=per_token, flops_per_request=per_request,
        training_tokens=d, training_flops=train, rows=rows,
        crossover_requests=None if train is None else train / per_request,
        crossover_tokens=None if d is None else 3.0 * d,
        assumptions=tuple(assumptions))


# ----------------------------------------------------------------------------- inference-aware

@dataclass(frozen=True)
class InferenceAwarePoint(Result):
    """The cheapest (N, D) reaching the target loss when D_inf tokens will be generated."""

    inference_tokens: float
    n_params: float
    tokens: float
    tokens_per_param: float
    training_flops: float           # 6 N D
    inference_flops: float          # 2 N D_inf
    total_flops: float
    baseline_total_flops: float     # the training-only optimum serving the same D_inf
    saving: float                   # 1 - total / baseline
    cross_check: float              # relative |N - N_lagrange| / N


@dataclass(frozen=True)
class InferenceAwareOptimum(Result):
    law: dict
    law_label: str
    target_loss: float
    training_only_n: float
    training_only_tokens: float
    training_only_compute: float
    training_only_tokens_per_param: float
    points: tuple
    units: dict = field(default_factory=lambda: {
        "target_loss": "loss (nats per token, as the law)", "training_only_n": "parameters",
        "training_only_tokens": "tokens", "training_only_compute": "FLOPs",
        "training_only_tokens_per_param": "tokens per parameter",
        "points.inference_tokens": "generated tokens over the model's life",
        "points.n_params": "parameters", "points.tokens": "training tokens",
        "points.tokens_per_param": "tokens per parameter", "points.training_flops": "FLOPs",
        "points.inference_flops": "FLOPs", "points.total_flops": "FLOPs",
        "points.baseline_total_flops": "FLOPs", "points.saving": "fraction of baseline FLOPs",
        "points.cross_check": "relative difference in N between two solvers"})
    assumptions: tuple = ()


def _check_target(law: Law, target_loss: float | str) -> float:
    try:
        loss = float(target_loss)
    except (TypeError, ValueError):
        raise UsageError(f"target loss must be a number, got {target_loss!r}") from None
    if not math.isfinite(loss) or loss <= law.E:
        raise UsageError(f"target loss must be finite and above the law's irreducible loss "
                         f"E = {law.E:g}, got {target_loss!r}")
    return loss


def _sardana_point(law: Law, target: float, d_inf: float, law_label: str = "") -> tuple[float, float, float]:
    """`_solve_sardana`, with a UsageError where the law's constants put N or D past a float."""
    try:
        n, d, check = _solve_sardana(law, target, d_inf)
    except (OverflowError, ZeroDivisionError, ValueError):
        n = d = math.inf
    if not (math.isfinite(n) and math.isfinite(d) and n > 0 and d > 0):
        raise UsageError(f"law {law_label or 'given'}: the inference-aware optimum for loss {target:g} at "
                         f"D_inf = {d_inf:g} lies beyond a float's range (N or D above 1.8e308, or below "
                         "its smallest): these constants cannot be planned with")
    return n, d, check


def _solve_sardana(law: Law, target: float, d_inf: float) -> tuple[float, float, float]:
    """(N, D, relative disagreement of the two solvers) minimising 6 N D + 2 N D_inf
    subject to L(N, D) = target.

    Method 1 (the answer): for each N the law fixes D(N) = (B / (R - A N^-alpha))^(1/beta),
    R = target - E, which needs N > N_min = (A / R)^(1/alpha). Minimise ln(6 N D(N) + 2 N D_inf)
    over u = ln N - ln N_min > 0, searching v = ln u: a grid brackets the minimum, then
    Brent's bounded method refines it in an offset variable (so that scipy's sqrt(eps) * |x|
    stopping term does not cap the precision).
    Method 2 (the check): the Lagrange condition. With s = A N^-alpha / R the share of the
    reducible loss spent on the N term, N = (A / (s R))^(1/alpha), D = (B / ((1 - s) R))^(1/beta),
    and d ln(cost)/ds = 0 reads alpha s = beta (1 - s) (1 + D_inf / (3 D)): one root in (0, 1),
    found by bracketing; at D_inf = 0 it is s = beta / (alpha + beta), the Chinchilla optimum.
    """
    a, b = law.alpha, law.beta
    r = target - law.E
    log_nmin = math.log(law.A / r) / a
    log_b_over_r = math.log(law.B / r)

    def log_cost(v: float) -> float:
        u = math.exp(v)
        log_d = (log_b_over_r - math.log(-math.expm1(-a * u))) / b
        # ln(6 N D + 2 N D_inf) - ln N_min = u + ln(6 D + 2 D_inf)
        return u + log_d + math.log(6.0 + 2.0 * d_inf * math.exp(-log_d))

    grid = np.linspace(math.log(1e-9), math.log(1e4), 521)
    values = [log_cost(v) for v in grid]
    i = int(np.argmin(values))
    v0 = grid[i]
    lo = grid[max(i - 1, 0)] - v0
    hi = grid[min(i + 1, len(grid) - 1)] - v0
    res = minimize_scalar(lambda w: log_cost(v0 + w), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-12, "maxiter": 10_000})
    u = math.exp(v0 + res.x)
    n = math.exp(log_nmin + u)
    d = math.exp((log_b_over_r - math.log(-math.expm1(-a * u))) / b)

    def lagrange(s: float) -> float:
        d_s = math.exp((log_b_over_r - math.log1p(-s)) / b)
        return a * s - b * (1.0 - s) * (1.0 + d_inf / (3.0 * d_s))

    s = brentq(lagrange, 1e-300, 1.0 - 1e-16, xtol=1e-300, rtol=4 * np.finfo(float).eps,
               maxiter=1000)
    n_check = (law.A / (s * r)) ** (1.0 / a)
    return n, d, abs(n - n_check) / n_check


def inference_aware_optimum(law: Law, target_loss: float | str, inference_tokens: Sequence[float | str], *,
                            law_label: str = "") -> InferenceAwareOptimum:
    """Sardana et al. 2024: for each expected number of generated tokens D_inf, the N and D
    that reach `target_loss` under `law` at least training + inference FLOPs,
    6 N D + 2 N D_inf. At D_inf = 0 this is the training-only (Chinchilla) optimum for the
    compute that reaches the target loss."""
    check_allocation(law, law_label)
    target = _check_target(law, target_loss)
    demands = [non_negative(x, "inference tokens") for x in inference_tokens]
    if not demands:
        raise UsageError("give at least one inference-token count (0 for training only)")
    n0, d0, _ = _sardana_point(law, target, 0.0, law_label)
    points = []
    for d_inf in demands:
        n, d, check = _sardana_point(law, target, d_inf, law_label)
        if check > 1e-5:  # pragma: no cover - the two solvers disagreeing is a bug
            raise RuntimeError(f"inference-aware solvers disagree by {check:.1e} at "
                               f"D_inf = {d_inf:g}")
        train, inf = 6.0 * n * d, 2.0 * n * d_inf
        baseline = 6.0 * n0 * d0 + 2.0 * n0 * d_inf
        points.append(InferenceAwarePoint(
            inference_tokens=d_inf, n_params=n, tokens=d, tokens_per_param=d / n,
            training_flops=train, inference_flops=inf, total_flops=train + inf,
            baseline_total_flops=baseline, saving=1.0 - (train + inf) / baseline,
            cross_check=check))
    return InferenceAwareOptimum(
        law=law.to_dict(), law_label=law_label, target_loss=target,
        training_only_n=n0, training_only_tokens=d0, training_only_compute=6.0 * n0 * d0,
        training_only_tokens_per_param=d0 / n0, points=tuple(points),
        assumptions=(
            f"law {law_label or 'given'}: L(N, D) = {law.E:g} + {law.A:g} / N^{law.alpha:g} "
            f"+ {law.B:g} / D^{law.beta:g}, extrapolated to these N, D",
            "minimise 6 N D + 2 N D_inf subject to L(N, D) = target (Sardana et al. 2024, "
            "arXiv:2401.00448); training 6 N D, inference 2 N per generated token",
            "training-only optimum: the same problem at D_inf = 0, i.e. the law's "
            "compute-optimal N, D for the compute that reaches the target loss",
            "baseline: the training-only optimum serving the same D_inf; saving = 1 - total / "
            "baseline",
            "the law is assumed to hold at high tokens per parameter (Sardana et al. test "
            "this up to about 10,000)",
        ))
