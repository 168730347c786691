"""Training: FLOPs per token from a shape, achieved throughput, and compute, time and money.

    C = 6 N D                     FLOPs (2 N forward + 4 N backward per parameter and token)
    GPU-hours H = C / F / 3600    F the *achieved* FLOP/s per GPU: given, or a dense peak x MFU
    days = H / G / 24             on G GPUs, scaling perfectly
    US$ = H x price per GPU-hour

Given a model's shape, the exact count of `scaling.train.counts` too (the count of runs.csv's
`flops_exact`): every matmul, attention over the full window and the output layer included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scaling.cost.result import SIX_ND, Result, fixed_sci
from scaling.errors import UsageError
from scaling.formats import positive
from scaling.train import counts

# Dense (no structured sparsity) peak tensor throughput per GPU, FLOP/s, from the vendors'
# datasheets (SXM parts). Sparsity doubles the datasheet headline; these are the halves.
GPU_PRESETS: dict[str, tuple[float, str]] = {
    "v100": (125e12, "NVIDIA V100 SXM2, fp16 tensor cores, dense"),
    "a100": (312e12, "NVIDIA A100 SXM, bf16 tensor cores, dense (no sparsity)"),
    "h100": (989e12, "NVIDIA H100 SXM, bf16 tensor cores, dense (no sparsity)"),
    "h200": (989e12, "NVIDIA H200 SXM, bf16 tensor cores, dense (no sparsity)"),
}


# ----------------------------------------------------------------------------- FLOPs per token

@dataclass(frozen=True)
class ModelShape:
    """What the exact FLOP count needs beyond N: depth, width, context length, vocabulary."""

    n_layers: int
    d_model: int
    context: int
    vocab: int
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("n_layers", "d_model", "context", "vocab"):
            positive(getattr(self, name), name.replace("_", " "), integer=True)


@dataclass(frozen=True)
class FlopCount(Result):
    """One model's FLOPs per training token, counted from its shape, beside the 6 N estimate.
    (A family's c(N) = 6 kappa N^gamma, which a fit and a plan solve under, is
    `scaling.train.compute.FlopsPerToken`.)"""

    n_params: float
    shape: ModelShape
    n_nonembed: float           # N less the embeddings (Kaplan's N)
    n_matmul: float             # N_nonembed less the LayerNorms: the linear layers' weights
    forward_matmul: float       # 2 N_matmul
    forward_output: float       # 2 d_model V
    forward_attention: float    # 4 n_layers n_ctx d_model
    forward: float
    training: float             # 3 x forward
    training_6n: float          # 6 N
    units: dict = field(default_factory=lambda: {
        "*": "FLOPs per token", "n_params": "parameters", "n_nonembed": "parameters",
        "n_matmul": "parameters"})
    assumptions: tuple = ()

    @property
    def ratio_to_6n(self) -> float:
        return self.training / self.training_6n


def flops_per_token(n_params: float | str, shape: ModelShape) -> FlopCount:
    """Training FLOPs per token of a model of N parameters in all and this shape.

    The count of `scaling.train.counts`: N less the shape's embeddings and LayerNorms is the
    linear layers' weights, 2 FLOPs each per token; attention (4 n_ctx d_model per layer) and the
    output layer (2 d_model V) are counted from the shape; training = 3 x forward. For N the
    total of a `scaling.train.model.GPT`, this is exactly its `flops_by_measure(cfg)["exact"]`.
    """
    n = positive(n_params, "parameter count N")
    L, d, T, V = shape.n_layers, shape.d_model, shape.context, shape.vocab
    embed = counts.embedding_params(d, T, V, shape.tied_embeddings)
    norms = counts.norm_params(L, d)
    n_matmul = n - embed - norms
    if n_matmul <= 0:
        raise UsageError(
            f"N = {n:g} is not larger than this shape's embeddings ({embed:g}: token table, "
            f"positions{'' if shape.tied_embeddings else ', output layer'}) and LayerNorms "
            f"({norms:g}); give the total parameter count")
    forward = float(counts.forward_from_weights(n_matmul, L, d, T, V))
    tables = "V d_model (tied: one V x d_model matrix)" if shape.tied_embeddings else \
        "2 V d_model (untied: input and output V x d_model matrices both in N)"
    return FlopCount(
        n_params=n, shape=shape, n_nonembed=n - embed, n_matmul=n_matmul, forward_matmul=2.0 * n_matmul,
        forward_output=float(counts.output_flops(d, V)), forward_attention=float(counts.attention_flops(L, d, T)),
        forward=forward,
        training=3.0 * forward, training_6n=6.0 * n,
        assumptions=(
            "exact count (scaling.train.counts, as runs.csv's flops_exact): forward = 2 N_matmul "
            "+ 2 d_model V + 4 n_layers n_ctx d_model per token; training = 3 x forward",
            f"N_matmul = N - {tables} - n_ctx d_model (learned positions) - (4 n_layers + 2) "
            "d_model (LayerNorms): the linear layers' weights; the input lookup costs no FLOPs",
            "attention: Q K^T and A V, 2 n_ctx d_model each per layer and token, over the full "
            "window of n_ctx keys (as Chinchilla's Appendix F, and as the math kernel computes "
            "it; a causal flash kernel skips about half); softmax, norms, biases and "
            "activations not counted",
        ),
    )


# ----------------------------------------------------------------------------- throughput

@dataclass(frozen=True)
class Throughput(Result):
    """Achieved FLOP/s per GPU, and where the figure came from."""

    flops_per_s: float
    peak_flops_per_s: float | None
    mfu: float | None
    source: str
    units: dict = field(default_factory=lambda: {
        "flops_per_s": "FLOP/s per GPU (achieved)", "peak_flops_per_s": "FLOP/s per GPU (peak)",
        "mfu": "fraction of peak"})
    assumptions: tuple = ()


def check_mfu(value: float | str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = float("nan")
    if not (0 < x <= 1):
        raise UsageError(f"MFU must be a fraction in (0, 1] (e.g. 0.4 for 40%), got {value!r}")
    return x


def peak_of(gpu: str) -> tuple[float, str]:
    """A preset's dense peak FLOP/s and what it is; UsageError naming the presets."""
    key = str(gpu).strip().lower()
    if key not in GPU_PRESETS:
        raise UsageError(f"unknown GPU preset {gpu!r}; known: {', '.join(GPU_PRESETS)} "
                         "(or give the peak FLOP/s per GPU)")
    return GPU_PRESETS[key]


def throughput(*, achieved: float | str | None = None, gpu: str | None = None, peak: float | str | None = None,
               mfu: float | str | None = None) -> Throughput:
    """Achieved FLOP/s per GPU from exactly one of: an achieved figure, a preset, a peak.

    A peak (preset or user value) needs an MFU: quoting peak as if it were achieved is the
    mistake this guards against. An achieved figure already includes utilisation, so it takes
    no MFU.
    """
    given = [what for what, v in (("an achieved FLOP/s", achieved), ("a GPU preset", gpu),
                                  ("a peak FLOP/s", peak)) if v is not None]
    if len(given) != 1:
        raise UsageError(
            "give exactly one of: the achieved FLOP/s per GPU, a GPU preset "
            f"(one of {', '.join(GPU_PRESETS)}) with an MFU, or a peak FLOP/s per GPU with an MFU"
            + (f"; got {' and '.join(given)}" if given else ""))
    if achieved is not None:
        if mfu is not None:
            raise UsageError("an MFU applies to a peak FLOP/s (a GPU preset's or one given); an "
                             "achieved FLOP/s figure already includes utilisation")
        f = positive(achieved, "achieved FLOP/s per GPU")
        return Throughput(f, None, None, "achieved, given by the user", assumptions=(
            f"achieved {fixed_sci(f, 3)} FLOP/s per GPU, as given (utilisation already included)",))
    if mfu is None:
        raise UsageError("a peak FLOP/s figure needs an MFU, the fraction of peak actually "
                         "achieved, in (0, 1]; large dense runs typically reach 0.3 to 0.5")
    u = check_mfu(mfu)
    if gpu is not None:
        p, what = peak_of(gpu)
        source = f"preset {str(gpu).strip().lower()}: {what}, peak {fixed_sci(p, 3)} FLOP/s"
    else:
        assert peak is not None    # exactly one of achieved, gpu, peak is given
        p = positive(peak, "peak FLOP/s per GPU")
        source = f"peak given by the user, {fixed_sci(p, 3)} FLOP/s"
    return Throughput(p * u, p, u, source, assumptions=(
        f"achieved = peak x MFU = {fixed_sci(p, 3)} x {u:g} = {fixed_sci(p * u, 3)} FLOP/s per GPU "
        f"({source}); MFU is an assumption, not a measurement",))


# ----------------------------------------------------------------------------- compute, time, money

@dataclass(frozen=True)
class TrainingCost(Result):
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
    flops_per_token: FlopCount | None = None
    units: dict = field(default_factory=lambda: {
        "n_params": "parameters", "tokens": "training tokens", "compute": "FLOPs",
        "compute_exact": "FLOPs", "gpu_hours": "GPU-hours", "gpu_hours_exact": "GPU-hours",
        "gpus": "GPUs", "days": "days wall-clock", "days_exact": "days wall-clock",
        "price_per_gpu_hour": "US$ per GPU-hour", "usd": "US$", "usd_exact": "US$",
        "flops_per_gpu_s": "FLOP/s per GPU (achieved)"})
    assumptions: tuple = ()


def training_cost(name: str, n_params: float | str, tokens: float | str, tp: Throughput, *, gpus: int = 1,
                  price: float | str | None = None, shape: ModelShape | None = None) -> TrainingCost:
    """C = 6 N D; H = C / F / 3600; days = H / G / 24; US$ = H x price (and the same from the
    exact count when a shape is given)."""
    n = positive(n_params, "parameter count N")
    d = positive(tokens, "training tokens D")
    g = positive(gpus, "number of GPUs", integer=True)
    pr = None if price is None else positive(price, "price per GPU-hour")
    c = 6.0 * n * d

    def hours_days_usd(compute: float) -> tuple[float, float, float | None]:
        h = compute / tp.flops_per_s / 3600.0
        return h, h / g / 24.0, (None if pr is None else h * pr)

    h, days, usd = hours_days_usd(c)
    assumptions = [SIX_ND, *tp.assumptions,
                   f"{g} GPUs scale perfectly: days = GPU-hours / {g} / 24, with no restarts, "
                   "evaluation, or pipeline bubbles"]
    if pr is not None:
        assumptions.append(f"US${pr:g} per GPU-hour, flat")
    extra: dict[str, Any] = {}
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
