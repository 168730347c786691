"""Memory: weights by dtype, dense attention scores, an SSM's state, and attention against recurrence.

Weights follow *total* parameters (a mixture of experts stores all experts), compute follows
*active* ones; a materialised attention score matrix grows as n^2; an SSM's state is constant in
n; self-attention (n^2 d) and a recurrence (n d^2) cost the same at n = d. Sizes in bytes are
decimal: 1 kB = 1e3, 1 MB = 1e6, 1 GB = 1e9 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scaling.cost.result import Result
from scaling.errors import UsageError
from scaling.formats import positive

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5,
}


@dataclass(frozen=True)
class WeightMemory(Result):
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


def weight_memory(total_params: float | str, dtype: str = "bf16",
                  active_params: float | str | None = None) -> WeightMemory:
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
class AttentionScoresRow(Result):
    context: int
    bytes_per_head_layer: float
    bytes_total: float


@dataclass(frozen=True)
class AttentionScoresMemory(Result):
    bytes_per_element: float
    heads: int
    layers: int
    rows: tuple
    units: dict = field(default_factory=lambda: {
        "bytes_per_element": "bytes", "rows.context": "tokens",
        "rows.bytes_per_head_layer": "bytes", "rows.bytes_total": "bytes"})
    assumptions: tuple = ()


def attention_scores_memory(contexts: Sequence[float | str], bytes_per_element: int = 4, heads: int = 1,
                            layers: int = 1) -> AttentionScoresMemory:
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
class SSMState(Result):
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


def ssm_state_memory(d: float | str, n_state: float | str, bytes_per_element: int = 4, layers: int = 1) -> SSMState:
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
class CrossoverRow(Result):
    context: int
    attention_ops: float     # n^2 d
    recurrence_ops: float    # n d^2
    ratio: float             # attention / recurrence = n / d


@dataclass(frozen=True)
class Crossover(Result):
    d: int
    crossover_context: int   # = d
    rows: tuple
    units: dict = field(default_factory=lambda: {
        "d": "model width", "crossover_context": "tokens", "rows.context": "tokens",
        "rows.attention_ops": "multiply-adds per layer per sequence",
        "rows.recurrence_ops": "multiply-adds per layer per sequence",
        "rows.ratio": "attention / recurrence"})
    assumptions: tuple = ()


def attention_recurrence_crossover(d: float | str, contexts: Sequence[float | str] = ()) -> Crossover:
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
