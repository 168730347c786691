"""Back-of-the-envelope sums for planning a run: compute, time, money and memory.

Pure functions, no I/O. Every result is a frozen dataclass that carries its numbers, a `units`
dict naming the unit of each number, and `assumptions`: the sentences that produced them, so a
printed figure is never separated from what it assumed. `to_dict()` gives the JSON form.

The sums, and the mistakes they are written to avoid:

* Training compute C = 6 N D (forward 2 N, backward 4 N FLOPs per parameter and token). It
  ignores attention and counts the input-embedding lookup as if it were a matmul. Given a model
  shape, `flops_per_token` also counts (Kaplan et al. 2020, arXiv:2001.08361, Table 1, with the
  output layer written out):

      forward FLOPs per token = 2 N_nonembed + 2 d_model V + 2 n_layers n_ctx d_model
      training FLOPs per token = 3 x forward      (backward = 2 x forward)
      N_nonembed = N - V d_model (tied embeddings) or N - 2 V d_model (untied)

  where 2 n_layers n_ctx d_model is the attention score (Q K^T) and value (A V) products,
  averaged over the positions of a causal context of n_ctx tokens.
* GPU-hours H = C / F / 3600 with F the *achieved* FLOP/s per GPU: either given directly, or
  the accelerator's dense peak (no sparsity) times a model-FLOPs utilisation MFU in (0, 1].
  Wall-clock days = H / G / 24 on G GPUs (perfect scaling); US$ = H x price per GPU-hour.
* Inference C_inf = 2 N FLOPs per generated token; over a model's life it can exceed training.
* The inference-aware optimum (Sardana et al. 2024, "Beyond Chinchilla-Optimal", arXiv:2401.00448):
  the N, D that reach a target loss at least total cost 6 N D + 2 N D_inf.
* The Chinchilla rule D = 20 N, checked against a law, and a fixed-N (Kaplan-style) allocation.
* Memory: weights follow *total* parameters (a mixture of experts stores all experts), compute
  follows *active* ones; a materialised attention score matrix grows as n^2; an SSM's state is
  constant in n; self-attention (n^2 d) and a recurrence (n d^2) cost the same at n = d.

Sizes in bytes are decimal: 1 kB = 1e3, 1 MB = 1e6, 1 GB = 1e9 bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from scaling.errors import UsageError
from scaling.laws.allocation import rule_of_thumb
from scaling.laws.law import Law

# Dense (no structured sparsity) peak tensor throughput per GPU, FLOP/s, from the vendors'
# datasheets (SXM parts). Sparsity doubles the datasheet headline; these are the halves.
GPU_PRESETS: dict[str, tuple[float, str]] = {
    "v100": (125e12, "NVIDIA V100 SXM2, fp16 tensor cores, dense"),
    "a100": (312e12, "NVIDIA A100 SXM, bf16 tensor cores, dense (no sparsity)"),
    "h100": (989e12, "NVIDIA H100 SXM, bf16 tensor cores, dense (no sparsity)"),
    "h200": (989e12, "NVIDIA H200 SXM, bf16 tensor cores, dense (no sparsity)"),
}

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5,
}

SIX_ND = ("C = 6 N D: 2 N forward + 4 N backward FLOPs per parameter and training token; "
          "ignores attention over the context and counts every parameter (embeddings included) "
          "as a matmul")


# ----------------------------------------------------------------------------- validation

def positive(value, name: str, *, integer: bool = False) -> float:
    """`value` as a positive finite float (or int); UsageError saying what is allowed."""
    allowed = "a positive whole number" if integer else "a positive, finite number"
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = float("nan")
    if not math.isfinite(x) or x <= 0 or (integer and x != int(x)):
        raise UsageError(f"{name} must be {allowed}, got {value!r}")
    return int(x) if integer else x


def non_negative(value, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number >= 0, got {value!r}") from None
    if not math.isfinite(x) or x < 0:
        raise UsageError(f"{name} must be a finite number >= 0, got {value!r}")
    return x


def check_mfu(value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = float("nan")
    if not (0 < x <= 1):
        raise UsageError(f"MFU must be a fraction in (0, 1] (e.g. 0.4 for 40%), got {value!r}")
    return x


# ----------------------------------------------------------------------------- formatting

def sci(x: float, digits: int = 2) -> str:
    """Scientific notation with `digits` significant digits and a bare exponent: 7.0e19, 1e6."""
    mantissa, exponent = f"{float(x):.{max(digits, 1) - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def format_bytes(n_bytes: float) -> str:
    """Decimal units (1 MB = 1e6 bytes): one decimal below 100, none from 100 up, and none when
    the value is whole (94 GB, 1.0 MB for 1,048,576 bytes, 268 MB, 65.5 GB)."""
    units = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
    b = float(n_bytes)
    i = 0
    while i < len(units) - 1 and abs(b) >= 1000 ** (i + 1):
        i += 1
    v = b / 1000**i
    if v == round(v):
        text = f"{v:.0f}"
    elif abs(v) >= 100:
        text = f"{v:.0f}"
    else:
        text = f"{v:.1f}"
    if text in ("1000", "1000.0") and i < len(units) - 1:  # rounding carried into the next unit
        return f"1.0 {units[i + 1]}"
    return f"{text} {units[i]}"


def format_ratio(x: float) -> str:
    """Two significant digits below 100 (0.00012, 0.12, 3.5), whole numbers from 100 up."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.2g}"


class _Result:
    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return obj


# ----------------------------------------------------------------------------- training

@dataclass(frozen=True)
class ModelShape:
    """What the exact FLOP count needs beyond N: depth, width, context length, vocabulary."""

    n_layers: int
    d_model: int
    context: int
    vocab: int
    tied_embeddings: bool = False

    def __post_init__(self):
        for name in ("n_layers", "d_model", "context", "vocab"):
            positive(getattr(self, name), name.replace("_", " "), integer=True)


@dataclass(frozen=True)
class FlopsPerToken(_Result):
    """FLOPs per training token: the 6 N estimate and the count from the model's shape."""

    n_params: float
    shape: ModelShape
    n_nonembed: float
    forward_matmul: float       # 2 N_nonembed
    forward_output: float       # 2 d_model V
    forward_attention: float    # 2 n_layers n_ctx d_model
    forward: float
    training: float             # 3 x forward
    training_6n: float          # 6 N
    units: dict = field(default_factory=lambda: {"*": "FLOPs per token"})
    assumptions: tuple = ()

    @property
    def ratio_to_6n(self) -> float:
        return self.training / self.training_6n


def flops_per_token(n_params, shape: ModelShape) -> FlopsPerToken:
    """Training FLOPs per token from the shape (see the module docstring for the formula)."""
    n = positive(n_params, "parameter count N")
    embed = shape.vocab * shape.d_model * (1 if shape.tied_embeddings else 2)
    n_nonembed = n - embed
    if n_nonembed <= 0:
        raise UsageError(
            f"N = {n:g} is not larger than its embedding matrices "
            f"({'1' if shape.tied_embeddings else '2'} x vocab {shape.vocab} x d_model "
            f"{shape.d_model} = {embed:g}); give the total parameter count")
    matmul = 2.0 * n_nonembed
    output = 2.0 * shape.d_model * shape.vocab
    attention = 2.0 * shape.n_layers * shape.context * shape.d_model
    forward = matmul + output + attention
    tie = "tied (one V x d_model matrix)" if shape.tied_embeddings else \
        "untied (input and output V x d_model matrices both in N)"
    return FlopsPerToken(
        n_params=n, shape=shape, n_nonembed=n_nonembed, forward_matmul=matmul,
        forward_output=output, forward_attention=attention, forward=forward,
        training=3.0 * forward, training_6n=6.0 * n,
        assumptions=(
            "exact count (Kaplan et al. 2020, Table 1): forward = 2 N_nonembed + 2 d_model V "
            "+ 2 n_layers n_ctx d_model per token; training = 3 x forward",
            f"embeddings {tie}; the input lookup costs no FLOPs",
            "attention products averaged over a causal context of n_ctx tokens; "
            "softmax, norms, biases and activations not counted",
        ),
    )


@dataclass(frozen=True)
class Throughput(_Result):
    """Achieved FLOP/s per GPU, and where the figure came from."""

    flops_per_s: float
    peak_flops_per_s: float | None
    mfu: float | None
    source: str
    units: dict = field(default_factory=lambda: {
        "flops_per_s": "FLOP/s per GPU (achieved)", "peak_flops_per_s": "FLOP/s per GPU (peak)",
        "mfu": "fraction of peak"})
    assumptions: tuple = ()


def throughput(*, achieved=None, gpu: str | None = None, peak=None, mfu=None) -> Throughput:
    """Achieved FLOP/s per GPU from exactly one of: an achieved figure, a preset, a peak.

    A peak (preset or user value) needs an MFU: quoting peak as if it were achieved is the
    mistake this guards against. An achieved figure already includes utilisation, so it takes
    no MFU.
    """
    given = [name for name, v in (("--flops-per-gpu", achieved), ("--gpu", gpu),
                                  ("--peak-flops", peak)) if v is not None]
    if len(given) != 1:
        raise UsageError(
            "give exactly one of --flops-per-gpu (achieved FLOP/s per GPU), --gpu PRESET "
            f"(one of {', '.join(GPU_PRESETS)}) with --mfu, or --peak-flops with --mfu"
            + (f"; got {' and '.join(given)}" if given else ""))
    if achieved is not None:
        if mfu is not None:
            raise UsageError("--mfu applies to a peak (--gpu or --peak-flops); an achieved "
                             "--flops-per-gpu already includes utilisation")
        f = positive(achieved, "achieved FLOP/s per GPU")
        return Throughput(f, None, None, "achieved, given by the user", assumptions=(
            f"achieved {sci(f, 3)} FLOP/s per GPU, as given (utilisation already included)",))
    if mfu is None:
        raise UsageError("a peak FLOP/s figure needs --mfu, the fraction of peak actually "
                         "achieved, in (0, 1]; large dense runs typically reach 0.3 to 0.5")
    u = check_mfu(mfu)
    if gpu is not None:
        key = str(gpu).strip().lower()
        if key not in GPU_PRESETS:
            raise UsageError(f"unknown GPU preset {gpu!r}; known: {', '.join(GPU_PRESETS)} "
                             "(or give --peak-flops)")
        p, what = GPU_PRESETS[key]
        source = f"preset {key}: {what}, peak {sci(p, 3)} FLOP/s"
    else:
        p = positive(peak, "peak FLOP/s per GPU")
        what = "peak given by the user"
        source = f"{what}, {sci(p, 3)} FLOP/s"
    return Throughput(p * u, p, u, source, assumptions=(
        f"achieved = peak x MFU = {sci(p, 3)} x {u:g} = {sci(p * u, 3)} FLOP/s per GPU "
        f"({source}); MFU is an assumption, not a measurement",))


@dataclass(frozen=True)
class TrainingCost(_Result):
    """One model's training compute, GPU-hours, wall-clock days and dollars."""

    name: str
    n_params: float
    tokens: float
    compute: float                  # 6 N D
    gpu_hours: float
    gpus: int
    days: float
    price_per_gpu_hour: float | None
    usd: float | None
    flops_per_gpu_s: float
    compute_exact: float | None = None      # from the shape, when given
    gpu_hours_exact: float | None = None
    days_exact: float | None = None
    usd_exact: float | None = None
    flops_per_token: FlopsPerToken | None = None
    units: dict = field(default_factory=lambda: {
        "n_params": "parameters", "tokens": "training tokens", "compute": "FLOPs",
        "compute_exact": "FLOPs", "gpu_hours": "GPU-hours", "gpu_hours_exact": "GPU-hours",
        "gpus": "GPUs", "days": "days wall-clock", "days_exact": "days wall-clock",
        "price_per_gpu_hour": "US$ per GPU-hour", "usd": "US$", "usd_exact": "US$",
        "flops_per_gpu_s": "FLOP/s per GPU (achieved)"})
    assumptions: tuple = ()


def training_cost(name: str, n_params, tokens, tp: Throughput, *, gpus=1, price=None,
                  shape: ModelShape | None = None) -> TrainingCost:
    """C = 6 N D; H = C / F / 3600; days = H / G / 24; US$ = H x price (and the same from the
    exact count when a shape is given)."""
    n = positive(n_params, "parameter count N")
    d = positive(tokens, "training tokens D")
    g = positive(gpus, "number of GPUs", integer=True)
    pr = None if price is None else positive(price, "price per GPU-hour")
    c = 6.0 * n * d

    def hours_days_usd(compute):
        h = compute / tp.flops_per_s / 3600.0
        return h, h / g / 24.0, (None if pr is None else h * pr)

    h, days, usd = hours_days_usd(c)
    assumptions = [SIX_ND, *tp.assumptions,
                   f"{g} GPUs scale perfectly: days = GPU-hours / {g} / 24, with no restarts, "
                   "evaluation, or pipeline bubbles"]
    if pr is not None:
        assumptions.append(f"US${pr:g} per GPU-hour, flat")
    extra = {}
    if shape is not None:
        fpt = flops_per_token(n, shape)
        ce = fpt.training * d
        he, de, ue = hours_days_usd(ce)
        extra = dict(compute_exact=ce, gpu_hours_exact=he, days_exact=de, usd_exact=ue,
                     flops_per_token=fpt)
        assumptions.extend(fpt.assumptions)
    return TrainingCost(name=name, n_params=n, tokens=d, compute=c, gpu_hours=h, gpus=g,
                        days=days, price_per_gpu_hour=pr, usd=usd,
                        flops_per_gpu_s=tp.flops_per_s, assumptions=tuple(assumptions), **extra)


# ----------------------------------------------------------------------------- inference

@dataclass(frozen=True)
class InferenceRow(_Result):
    requests: float
    generated_tokens: float
    flops: float
    ratio_to_training: float | None


@dataclass(frozen=True)
class InferenceCost(_Result):
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


def inference_cost(n_params, tokens_per_request, requests: Sequence,
                   training_tokens=None) -> InferenceCost:
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
        "prompt (prefill) tokens and attention over the KV cache (2 n_layers n_ctx d_model per "
        "token) not counted: real serving costs more per request",
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
class InferenceAwarePoint(_Result):
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
class InferenceAwareOptimum(_Result):
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


def _check_target(law: Law, target_loss) -> float:
    try:
        loss = float(target_loss)
    except (TypeError, ValueError):
        raise UsageError(f"target loss must be a number, got {target_loss!r}") from None
    if not math.isfinite(loss) or loss <= law.E:
        raise UsageError(f"target loss must be finite and above the law's irreducible loss "
                         f"E = {law.E:g}, got {target_loss!r}")
    return loss


def _sardana_point(law: Law, target: float, d_inf: float) -> tuple[float, float, float]:
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


def inference_aware_optimum(law: Law, target_loss, inference_tokens: Sequence, *,
                            law_label: str = "") -> InferenceAwareOptimum:
    """Sardana et al. 2024: for each expected number of generated tokens D_inf, the N and D
    that reach `target_loss` under `law` at least training + inference FLOPs,
    6 N D + 2 N D_inf. At D_inf = 0 this is the training-only (Chinchilla) optimum for the
    compute that reaches the target loss."""
    target = _check_target(law, target_loss)
    demands = [non_negative(x, "inference tokens") for x in inference_tokens]
    if not demands:
        raise UsageError("give at least one inference-token count (0 for training only)")
    n0, d0, _ = _sardana_point(law, target, 0.0)
    points = []
    for d_inf in demands:
        n, d, check = _sardana_point(law, target, d_inf)
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


# ----------------------------------------------------------------------------- rules of thumb

@dataclass(frozen=True)
class AllocationRow(_Result):
    label: str
    n_params: float
    tokens: float
    tokens_per_param: float
    flops_per_generated_token: float    # 2 N
    loss: float | None                  # predicted by the law, when one is given


@dataclass(frozen=True)
class RulesCheck(_Result):
    """The D = 20 N rule, an optional fixed-N allocation, and a law's optimum, at one C."""

    compute: float
    tokens_per_param_rule: float
    rows: tuple
    law_label: str | None
    units: dict = field(default_factory=lambda: {
        "compute": "FLOPs", "rows.n_params": "parameters", "rows.tokens": "training tokens",
        "rows.tokens_per_param": "tokens per parameter",
        "rows.flops_per_generated_token": "FLOPs per generated token",
        "rows.loss": "loss predicted by the law"})
    assumptions: tuple = ()

    def row(self, label_start: str) -> AllocationRow:
        return next(r for r in self.rows if r.label.startswith(label_start))


def rules_of_thumb(compute, *, fixed_params=None, tokens_per_param=20.0, law: Law | None = None,
                   law_label: str | None = None) -> RulesCheck:
    """At C FLOPs: the rule D = k N (N = sqrt(C / 6k)); a fixed N spent Kaplan-style
    (D = C / 6N); and the law's own compute-optimal N, D, each with its loss under the law."""
    c = positive(compute, "compute C")
    k = positive(tokens_per_param, "tokens per parameter")

    def row(label, n, d):
        loss = None if law is None else float(law.loss(n, d))
        return AllocationRow(label, n, d, d / n, 2.0 * n, loss)

    rule = rule_of_thumb(c, k)
    rows = [row(f"rule D = {k:g} N", rule.n, rule.d)]
    assumptions = [SIX_ND, f"rule: D = {k:g} N, so N = sqrt(C / {6 * k:g}) "
                           "(Hoffmann et al. 2022, 70e9 parameters on 1.4e12 tokens)"]
    if fixed_params is not None:
        nf = positive(fixed_params, "fixed parameter count N")
        if 6.0 * nf > c:
            raise UsageError(f"N = {nf:g} leaves less than one token at C = {c:g} "
                             f"(needs C >= 6 N = {6 * nf:g})")
        rows.append(row(f"Kaplan-style N = {sci(nf, 2)}", nf, c / (6.0 * nf)))
        assumptions.append("fixed N (Kaplan-style: big model, few tokens): D = C / (6 N)")
    if law is not None:
        rows.append(row(f"law {law_label or ''}".rstrip(), float(law.n_opt(c)),
                        float(law.d_opt(c))))
        assumptions.append(f"law {law_label or 'given'}: N_opt, D_opt in closed form "
                           "(Hoffmann et al. 2022, eq. 4); losses are the law's predictions")
    assumptions.append("cost per generated token 2 N, so it scales with N alone")
    return RulesCheck(compute=c, tokens_per_param_rule=k, rows=tuple(rows), law_label=law_label,
                      assumptions=tuple(assumptions))


# ----------------------------------------------------------------------------- memory

@dataclass(frozen=True)
class WeightMemory(_Result):
    """Bytes to hold the weights (total parameters) beside compute per token (active ones)."""

    total_params: float
    active_params: float
    dtype: str
    bytes_per_param: float
    weight_bytes: float
    active_fraction: float
    flops_per_token_active: float   # 2 N_active
    flops_per_token_dense: float    # 2 N_total
    units: dict = field(default_factory=lambda: {
        "total_params": "parameters", "active_params": "parameters per token",
        "bytes_per_param": "bytes", "weight_bytes": "bytes (decimal: 1 GB = 1e9)",
        "active_fraction": "fraction of the dense-equivalent compute",
        "flops_per_token_active": "FLOPs per token", "flops_per_token_dense": "FLOPs per token"})
    assumptions: tuple = ()


def _dtype_bytes(dtype: str) -> float:
    key = str(dtype).strip().lower()
    if key not in DTYPE_BYTES:
        raise UsageError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[key]


def weight_memory(total_params, dtype: str = "bf16", active_params=None) -> WeightMemory:
    n = positive(total_params, "total parameter count")
    na = n if active_params is None else positive(active_params, "active parameter count")
    if na > n:
        raise UsageError(f"active parameters ({na:g}) cannot exceed total parameters ({n:g})")
    bpp = _dtype_bytes(dtype)
    return WeightMemory(
        total_params=n, active_params=na, dtype=str(dtype).lower(), bytes_per_param=bpp,
        weight_bytes=n * bpp, active_fraction=na / n, flops_per_token_active=2.0 * na,
        flops_per_token_dense=2.0 * n,
        assumptions=(
            f"weights only: total parameters x {bpp:g} bytes ({str(dtype).lower()}); no "
            "optimizer state, gradients, activations or KV cache",
            "memory follows total parameters (every expert must be resident); compute per "
            "token follows active ones (2 N_active FLOPs)",
            "1 GB = 1e9 bytes",
        ))


@dataclass(frozen=True)
class AttentionScoresRow(_Result):
    context: int
    bytes_per_head_layer: float
    bytes_total: float


@dataclass(frozen=True)
class AttentionScoresMemory(_Result):
    bytes_per_element: float
    heads: int
    layers: int
    rows: tuple
    units: dict = field(default_factory=lambda: {
        "bytes_per_element": "bytes", "rows.context": "tokens",
        "rows.bytes_per_head_layer": "bytes", "rows.bytes_total": "bytes"})
    assumptions: tuple = ()


def attention_scores_memory(contexts: Sequence, bytes_per_element=4, heads=1,
                            layers=1) -> AttentionScoresMemory:
    """n^2 x bytes per head per layer for a materialised n x n score matrix; x heads x layers."""
    ns = [positive(n, "context length", integer=True) for n in contexts]
    if not ns:
        raise UsageError("give at least one context length")
    bpe = positive(bytes_per_element, "bytes per score")
    h = positive(heads, "number of heads", integer=True)
    l_ = positive(layers, "number of layers", integer=True)
    rows = tuple(AttentionScoresRow(n, float(n) * n * bpe, float(n) * n * bpe * h * l_)
                 for n in ns)
    assumptions = [f"dense attention: the full n x n score matrix materialised, {bpe:g} bytes "
                   "per score, batch of one sequence"]
    if h * l_ > 1:
        assumptions.append(f"total = per head per layer x {h} heads x {l_} layers, as if all "
                           "were held at once (training keeps them for the backward pass)")
    assumptions += ["fused kernels (FlashAttention) never materialise it: their extra memory "
                    "is O(n)", "1 MB = 1e6 bytes, 1 GB = 1e9 bytes"]
    return AttentionScoresMemory(bpe, h, l_, rows, assumptions=tuple(assumptions))


@dataclass(frozen=True)
class SSMState(_Result):
    d: int
    n_state: int
    bytes_per_element: float
    layers: int
    bytes_per_layer: float
    bytes_total: float
    units: dict = field(default_factory=lambda: {
        "d": "channels", "n_state": "state size per channel", "bytes_per_element": "bytes",
        "bytes_per_layer": "bytes", "bytes_total": "bytes"})
    assumptions: tuple = ()


def ssm_state_memory(d, n_state, bytes_per_element=4, layers=1) -> SSMState:
    """An SSM's recurrent state: d x N_state numbers per layer, the same at any context length."""
    dd = positive(d, "SSM channels d", integer=True)
    ns = positive(n_state, "SSM state size", integer=True)
    bpe = positive(bytes_per_element, "bytes per state element")
    l_ = positive(layers, "number of layers", integer=True)
    per_layer = float(dd) * ns * bpe
    return SSMState(dd, ns, bpe, l_, per_layer, per_layer * l_, assumptions=(
        f"state d x N_state = {dd} x {ns} numbers of {bpe:g} bytes per layer per sequence, "
        "constant in context length",
        "d is the channel count the state is kept for (in Mamba, the expanded inner width)",
    ))


@dataclass(frozen=True)
class CrossoverRow(_Result):
    context: int
    attention_ops: float     # n^2 d
    recurrence_ops: float    # n d^2
    ratio: float             # attention / recurrence = n / d


@dataclass(frozen=True)
class Crossover(_Result):
    d: int
    crossover_context: int   # = d
    rows: tuple
    units: dict = field(default_factory=lambda: {
        "d": "model width", "crossover_context": "tokens", "rows.context": "tokens",
        "rows.attention_ops": "multiply-adds per layer per sequence",
        "rows.recurrence_ops": "multiply-adds per layer per sequence",
        "rows.ratio": "attention / recurrence"})
    assumptions: tuple = ()


def attention_recurrence_crossover(d, contexts: Sequence = ()) -> Crossover:
    """Self-attention's n^2 d against a recurrence's n d^2: equal at n = d."""
    dd = positive(d, "model width d", integer=True)
    ns = [positive(n, "context length", integer=True) for n in contexts]
    rows = tuple(CrossoverRow(n, float(n) ** 2 * dd, float(n) * dd**2, n / dd) for n in ns)
    return Crossover(dd, dd, rows, assumptions=(
        "self-attention: n^2 d multiply-adds per layer (scores and weighted values); "
        "recurrence: n d^2 (a d x d state update per token); constants and projections "
        "shared by both left out",
        "attention / recurrence = n / d: cheaper below n = d, dearer above",
    ))
