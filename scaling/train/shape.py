"""One model's shape, `GPTConfig`, and its parameter and FLOP counts, without torch.

The model (`scaling.train.model`) is built from a GPTConfig; the sweep's plan, the design and the
dry run only need its counts (`scaling.train.counts`, where they are derived), so they import
this module and never load torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaling.config import ModelConfig, Shape
from scaling.train import counts


@dataclass(frozen=True)
class GPTConfig:
    """The shape of one GPT: vocabulary, context, width, depth, heads, MLP ratio, tied output layer."""

    vocab_size: int
    context_length: int
    d_model: int
    n_layers: int
    n_heads: int
    mlp_ratio: int = 4
    tied_embeddings: bool = True

    @classmethod
    def from_config(cls, model: ModelConfig, shape: Shape, vocab_size: int) -> GPTConfig:
        return cls(vocab_size=vocab_size, context_length=model.context_length, d_model=shape.d_model,
                   n_layers=shape.n_layers, n_heads=shape.n_heads, mlp_ratio=model.mlp_ratio,
                   tied_embeddings=model.tied_embeddings)


def param_counts(cfg: GPTConfig) -> tuple[int, int]:
    """(total, non-embedding) parameter counts, without building the model: `scaling.train.counts`,
    where the derivation is (Kaplan's non-embedding N, LayerNorms included; an untied output layer
    counts as an embedding)."""
    return counts.param_counts(cfg.n_layers, cfg.d_model, cfg.context_length, cfg.vocab_size,
                               cfg.mlp_ratio, cfg.tied_embeddings)


def flops_by_measure(cfg: GPTConfig) -> dict:
    """Training FLOPs per token in each measure of `scaling.train.counts.COMPUTE_MEASURES`
    ("exact": 3 x every forward matmul, attention over the full window, as the math kernel
    computes it)."""
    return counts.flops_by_measure(cfg.n_layers, cfg.d_model, cfg.context_length, cfg.vocab_size,
                                   cfg.mlp_ratio, cfg.tied_embeddings)
