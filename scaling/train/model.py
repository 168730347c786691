"""A decoder-only transformer in the GPT-2 mould, and its size and cost as pure functions of the shape.

    tokens -> token + position embedding -> n_layers x [x + attn(ln(x)); x + mlp(ln(x))] -> ln -> logits

Linear layers have no biases (as in nanoGPT's bias=False: slightly faster, no worse); LayerNorms
keep their weight and bias. `param_counts` and `flops_per_token` are those of
`scaling.train.counts` (derived there, from the shape alone), checked against this module and
against torch's FLOP counter in tests/train/test_model.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from scaling.config import ModelConfig, Shape
from scaling.train import counts


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int
    context_length: int
    d_model: int
    n_layers: int
    n_heads: int
    mlp_ratio: int = 4
    tied_embeddings: bool = True

    @classmethod
    def from_config(cls, model: ModelConfig, shape: Shape, vocab_size: int) -> "GPTConfig":
        return cls(vocab_size=vocab_size, context_length=model.context_length, d_model=shape.d_model,
                   n_layers=shape.n_layers, n_heads=shape.n_heads, mlp_ratio=model.mlp_ratio,
                   tied_embeddings=model.tied_embeddings)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, heads, T, head_dim)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context_length, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tied_embeddings:
            self.head.weight = self.tok_emb.weight
        self.apply(self._init)
        # GPT-2: each block adds two projections to the residual stream, so scale them down
        # to keep the stream's variance independent of depth.
        for block in self.blocks:
            for proj in (block.attn.proj, block.mlp.proj):
                nn.init.normal_(proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        """Logits (B, T, vocab) for token ids idx (B, T), and the mean cross-entropy when targets are given."""
        T = idx.shape[1]
        if T > self.cfg.context_length:
            raise ValueError(f"sequence of {T} tokens is longer than the context of {self.cfg.context_length}")
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def param_counts(cfg: GPTConfig) -> tuple[int, int]:
    """(total, non-embedding) parameter counts, without building the model: `scaling.train.counts`,
    where the derivation is (Kaplan's non-embedding N, LayerNorms included; an untied output layer
    counts as an embedding)."""
    return counts.param_counts(cfg.n_layers, cfg.d_model, cfg.context_length, cfg.vocab_size,
                               cfg.mlp_ratio, cfg.tied_embeddings)


def flops_per_token(cfg: GPTConfig) -> dict:
    """Training FLOPs per token, {"flops_6n": 6 N, "exact": 3 x every forward matmul}, from
    `scaling.train.counts` (attention over the full window, as the math kernel computes it)."""
    flops = counts.flops_per_token(cfg.n_layers, cfg.d_model, cfg.context_length, cfg.vocab_size,
                                   cfg.mlp_ratio, cfg.tied_embeddings)
    return {"flops_6n": flops["flops_6n"], "exact": flops["exact"]}


def flops_by_measure(cfg: GPTConfig) -> dict:
    """Training FLOPs per token in each measure of `scaling.train.counts.COMPUTE_MEASURES`."""
    return counts.flops_by_measure(cfg.n_layers, cfg.d_model, cfg.context_length, cfg.vocab_size,
                                   cfg.mlp_ratio, cfg.tied_embeddings)
