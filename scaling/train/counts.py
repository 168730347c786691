"""Parameter and FLOP counts of the GPT in `scaling.train.model`, from its shape alone.

The one definition of each count: the model (runs.csv's n_params_* and flops_*), the sweep's plan,
`scaling cost train` and bench/ all call these functions. No torch, so the cost stage can use them.

The shape: L layers, width d, context T, vocabulary V, MLP ratio r (hidden width r d), and whether
the output layer is the token embedding (tied) or a matrix of its own.

Parameters

    per layer   attention q, k, v (3 d^2) and output projection (d^2), MLP in and out (2 r d^2):
                (4 + 2r) d^2 matmul weights (no biases); two LayerNorms, weight and bias: 4 d
    after them  the final LayerNorm: 2 d
    embeddings  token table V d, learned positions T d, and an untied output layer V d

    non-embedding N = L ((4 + 2r) d^2 + 4 d) + 2 d        (Kaplan et al. 2020, sec. 2.1; 12 L d^2
                                                           at r = 4, the LayerNorms aside)
    total           = N + (V + T) d, + V d when untied

An untied output layer is a second V x d table, so it is an embedding too: N is the same tied or
untied, only the total differs.

Training FLOPs per token (a multiply-add is 2 FLOPs; one token's row through a k x n matmul costs
2 k n). Forward, per token:

    linear layers   2 (4 + 2r) d^2 per layer             (twice their weights)
    attention       Q K^T: the query against T keys of width d, 2 T d; A V: T weights times T
                    values of width d, 2 T d; together 4 T d per layer (over the heads, d in all)
    output layer    2 d V

    forward = L (2 (4 + 2r) d^2 + 4 T d) + 2 d V
    exact   = 3 x forward: the backward pass does two matmuls the size of each forward one (the
              gradient of its input and of its weight; for Q K^T and A V, of both operands)
    6N      = 6 x non-embedding N, the convention of the fit (C = 6 N D, Kaplan et al. 2020):
              attention and the output layer left out, LayerNorm weights counted as if matmuls

Attention is counted over the full window, every query against all T keys, as Chinchilla's
Appendix F does (Hoffmann et al. 2022: logits and "softmax @ query reduction", each 2 T^2 d per
sequence) and as the math attention kernel computes it, masked half included; a flash kernel
skips the masked blocks and does about half. Kaplan's Table 1 writes 2 L T d (one product, or
both averaged over a causal context). Runs already in a store were counted this way, and keep
their numbers. Embedding lookups, LayerNorms, GELU, softmax and the loss are not matmuls and
are left out: O(d) per token against O(d^2).
"""

from __future__ import annotations

from typing import TypeVar

# A count of weights: exact (int) from a shape, or a float N from `scaling cost train`.
Count = TypeVar("Count", int, float)


def matmul_params(n_layers: int, d_model: int, mlp_ratio: int = 4) -> int:
    """The weights of the blocks' linear layers: L (4 + 2r) d^2."""
    return n_layers * (4 + 2 * mlp_ratio) * d_model * d_model


def norm_params(n_layers: int, d_model: int) -> int:
    """LayerNorm weights and biases: two per layer and a final one, 4 L d + 2 d."""
    return n_layers * 4 * d_model + 2 * d_model


def embedding_params(d_model: int, context: int, vocab: int, tied_embeddings: bool = True) -> int:
    """The token and position tables, (V + T) d, and an untied output layer's V d."""
    return (vocab + context + (0 if tied_embeddings else vocab)) * d_model


def param_counts(n_layers: int, d_model: int, context: int, vocab: int, mlp_ratio: int = 4,
                 tied_embeddings: bool = True) -> tuple[int, int]:
    """(total, non-embedding N)."""
    non_embedding = matmul_params(n_layers, d_model, mlp_ratio) + norm_params(n_layers, d_model)
    return non_embedding + embedding_params(d_model, context, vocab, tied_embeddings), non_embedding


def attention_flops(n_layers: int, d_model: int, context: int) -> int:
    """Forward FLOPs per token of Q K^T and A V over the full window: 4 T d per layer."""
    return n_layers * 2 * (2 * context * d_model)


def output_flops(d_model: int, vocab: int) -> int:
    """Forward FLOPs per token of the output layer (logits): 2 d V."""
    return 2 * d_model * vocab


def forward_from_weights(n_matmul: Count, n_layers: int, d_model: int, context: int, vocab: int) -> Count:
    """Matmul FLOPs of one token's forward pass through linear layers of `n_matmul` weights, then
    attention and the output layer: 2 n_matmul + 2 d V + 4 L T d. `scaling cost train` gives
    n_matmul from a model's N; `forward_flops` from the shape."""
    return 2 * n_matmul + output_flops(d_model, vocab) + attention_flops(n_layers, d_model, context)


def forward_flops(n_layers: int, d_model: int, context: int, vocab: int, mlp_ratio: int = 4) -> int:
    """Matmul FLOPs of one token's forward pass: linear layers + attention + output layer."""
    return forward_from_weights(matmul_params(n_layers, d_model, mlp_ratio), n_layers, d_model, context, vocab)


# The measures of training compute a design, fit or plan can count C in (`flops_by_measure`):
#   exact             3 x every forward matmul (above): the FLOPs the run spends, output layer and
#                     attention included (Hoffmann et al. 2022, Appendix F)
#   6n_total          6 N_total D, Chinchilla's parameter count (embeddings and output layer in N)
#   6n_non_embedding  6 N D with Kaplan's non-embedding N: the convention of stores written before
#                     the measure was chosen; 1.4-3.6x below the exact count at vocabulary 1,024
COMPUTE_MEASURES = ("exact", "6n_total", "6n_non_embedding")
# What N counts: Kaplan's non-embedding parameters, or Chinchilla's total (embeddings included).
PARAM_CONVENTIONS = ("non_embedding", "total")
# The parameter count each measure's "6N" is paired with (exact FLOPs are planned in total N).
MEASURE_CONVENTION = {"exact": "total", "6n_total": "total", "6n_non_embedding": "non_embedding"}


def flops_by_measure(n_layers: int, d_model: int, context: int, vocab: int, mlp_ratio: int = 4,
                     tied_embeddings: bool = True) -> dict:
    """Training FLOPs per token in each of COMPUTE_MEASURES: the one definition of a token's cost.

    exact is 3 x forward; it is the same tied or untied (the output layer is a matmul either way),
    as is 6n_non_embedding (N leaves the output layer out); 6n_total counts an untied one."""
    total, non_embedding = param_counts(n_layers, d_model, context, vocab, mlp_ratio, tied_embeddings)
    exact = 3 * forward_flops(n_layers, d_model, context, vocab, mlp_ratio)
    return {"exact": exact, "6n_total": 6 * total, "6n_non_embedding": 6 * non_embedding}
