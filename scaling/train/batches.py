"""What a run reads, and how it is scored: its training batches and the validation loss in nats
per token and in bits per byte.

Batches are random windows of the training tokens drawn by a generator seeded from (seed, step),
so a run resumed from its checkpoint sees exactly the batches it would have seen, and a WSD
branch exactly those of the run from step 0 it stands for. Validation reads the first
eval_tokens of the validation split, the same windows for every run.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from scaling.errors import UsageError
from scaling.train.model import GPT


@dataclass(frozen=True)
class TokenData:
    train: np.ndarray            # flat token ids (uint16/uint32, memmap welcome)
    val: np.ndarray              # flat token ids
    val_token_bytes: np.ndarray  # UTF-8 length of each val token, for bits per byte


def get_batch(tokens: np.ndarray, seed: int, step: int, n_seqs: int, T: int, device: torch.device
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """n_seqs random windows of T+1 tokens -> (inputs, next-token targets), each (n_seqs, T)."""
    starts = np.random.default_rng([seed, step]).integers(0, len(tokens) - T, size=n_seqs)
    windows = torch.from_numpy(tokens[starts[:, None] + np.arange(T + 1)].astype(np.int64))
    x, y = windows[:, :-1].contiguous(), windows[:, 1:].contiguous()
    if device.type == "cuda":  # pinned memory lets the copy run without waiting for the GPU
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


def val_windows(data: TokenData, eval_tokens: int, T: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor,
                int]:
    """The first eval_tokens of the validation split as non-overlapping windows (the same for every
    run), and the UTF-8 bytes of the tokens they predict. check_data makes sure there is one."""
    n_windows = min(eval_tokens, len(data.val) - 1) // T
    n = n_windows * T
    x = torch.from_numpy(data.val[:n].astype(np.int64)).view(n_windows, T)
    y = torch.from_numpy(data.val[1:n + 1].astype(np.int64)).view(n_windows, T)
    return x.to(device), y.to(device), int(np.sum(data.val_token_bytes[1:n + 1], dtype=np.int64))


class Evaluation(NamedTuple):
    loss: float          # nats per token
    bpb: float           # bits per byte: the same nats over the text's UTF-8 bytes
    context_use: float | None   # see `context_use`


# Context use: how much lower the loss is at the second half of the context than at positions
# 1-7, which see a few tokens, as an n-gram model does. Tiny models first learn what a few tokens
# predict and only later use their whole context: on the demo's corpus every sweep run had a
# negative value, while the longer validation runs had +0.08 to +0.09 nats and beat the law's
# prediction by 6% (docs/validate.md). A law fitted on runs of one regime does not foresee
# the other.
FEW_TOKENS = 8


def context_use(nats_by_position: np.ndarray) -> float | None:
    """Mean loss at positions 1 to FEW_TOKENS - 1 minus the mean over the context's second half
    (positive: the model predicts better with more context); None for a context under 2 FEW_TOKENS."""
    T = len(nats_by_position)
    if T < 2 * FEW_TOKENS:
        return None
    return float(nats_by_position[1:FEW_TOKENS].mean() - nats_by_position[T // 2:].mean())


@torch.no_grad()
def evaluate(model: GPT, windows: tuple[torch.Tensor, torch.Tensor, int], n_seqs: int,
             autocast: AbstractContextManager[Any]) -> Evaluation:
    """The validation windows' mean loss, bits per byte and context use."""
    x, y, n_bytes = windows
    model.eval()
    nats = torch.zeros(x.shape[1], dtype=torch.float64, device=x.device)     # summed per position
    for i in range(0, len(x), n_seqs):
        with autocast:
            logits, _ = model(x[i:i + n_seqs])
        token_nats = F.cross_entropy(logits.float().flatten(0, 1), y[i:i + n_seqs].flatten(), reduction="none")
        nats += token_nats.view(-1, x.shape[1]).sum(0, dtype=torch.float64)
    model.train()
    total = nats.sum().item()
    return Evaluation(total / y.numel(), total / math.log(2) / n_bytes, context_use(nats.cpu().numpy() / len(x)))


def check_data(T: int, eval_tokens: int, data: TokenData) -> None:
    """Refuse splits too small for one window of T + 1 tokens (a sweep checks before writing anything)."""
    if len(data.train) <= T:
        raise UsageError(f"the training split has {len(data.train)} tokens, fewer than one window of "
                         f"model.context_length + 1 = {T + 1}: use a larger corpus or a shorter context")
    if min(eval_tokens, len(data.val) - 1) < T:
        raise UsageError(f"the validation split has {len(data.val)} tokens; evaluation needs at least "
                         f"model.context_length + 1 = {T + 1} (and train.eval_tokens >= {T}): use a larger "
                         "corpus or corpus.val_fraction, or a shorter context")
