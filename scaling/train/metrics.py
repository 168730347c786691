"""What a run scores beyond the loss, at its final evaluation: per-token top-1 accuracy, exact match of
k-token greedy continuations (k = 1 ... 16) and the continuation's log-probability.

    prompts = task_prompts(data.val, context_length, device)     # the same for every run
    fields = evaluate_tasks(model, prompts, n_seqs, autocast)    # {"final_token_accuracy": ..., ...}

The prompts are N_PROMPTS windows of the validation split at offsets drawn with a fixed seed
(PROMPT_SEED, not the run's: every run of every sweep on the same split reads the same text). A
window is T + 1 tokens: its last k_max tokens are the continuation to match, those before it the prompt.

Exact match needs no generation. Greedy decoding's j-th token is the argmax given the prompt and
its own first j - 1 tokens; while those equal the text's, that is the argmax of the teacher-forced
pass at position j. So the greedy continuation equals the text for k tokens exactly when the
teacher-forced argmax is right at each of the first k positions: one forward pass scores every k
(tests/train/test_metrics.py checks it against generation token by token, in fp32; under CUDA's
bf16 autocast a near-tie could round differently in the two).

Cost: one forward pass over N_PROMPTS * (T + 1) tokens, once per run: 0.15-0.8 s on the demo's
shapes on one CPU thread, 0.05-1.5% of a run's wall time (bench/bench_task_metrics.py). With 256
prompts, an exact-match rate p carries a standard error of
sqrt(p (1 - p) / 256), at most 0.031; per-token accuracy is averaged over 256 * 16 = 4,096 tokens.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from scaling.runs.store import TASK_KS
from scaling.runs.store import TASK_PROMPTS as N_PROMPTS
from scaling.train.model import GPT

PROMPT_SEED = 31_337
K_MAX = 16


def continuation_length(T: int) -> int:
    """k_max for context T: 16 tokens, or half the context when it is shorter than 32 (a prompt of
    at least as many tokens as it must continue)."""
    return min(K_MAX, T // 2)


def task_prompts(val: np.ndarray, T: int, device: torch.device) -> torch.Tensor:
    """N_PROMPTS windows of T + 1 validation tokens (inputs and next-token targets), at seeded offsets.

    The offsets depend only on PROMPT_SEED and the split's length, so every run reads the same
    windows. check_data has made sure the split holds at least one window.
    """
    starts = np.random.default_rng(PROMPT_SEED).integers(0, len(val) - T, size=N_PROMPTS)
    return torch.from_numpy(val[starts[:, None] + np.arange(T + 1)].astype(np.int64)).to(device)


@torch.no_grad()
def score_continuations(model: GPT, windows: torch.Tensor, k: int, n_seqs: int, autocast: AbstractContextManager[Any]
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct, logprob): for each window, whether the teacher-forced argmax is the text's token
    at each of its last k positions (bool, (n, k)), and the log-probability of those tokens (n, k)."""
    model.eval()
    correct, logprob = [], []
    for i in range(0, len(windows), n_seqs):
        x, y = windows[i:i + n_seqs, :-1], windows[i:i + n_seqs, -k:]
        with autocast:
            logits, _ = model(x)
        logits = logits[:, -k:].float()
        correct.append(logits.argmax(-1) == y)
        logprob.append(torch.gather(F.log_softmax(logits, -1), -1, y[..., None])[..., 0])
    model.train()
    return torch.cat(correct), torch.cat(logprob)


def exact_match(correct: torch.Tensor) -> np.ndarray:
    """Share of windows whose greedy continuation equals the text for k = 1 ... k_max tokens: the
    first k positions all correct (the running product along the continuation)."""
    return torch.cumprod(correct.to(torch.float64), dim=1).mean(0).cpu().numpy()


def evaluate_tasks(model: GPT, windows: torch.Tensor, n_seqs: int, autocast: AbstractContextManager[Any]) -> dict:
    """The summary's task fields: per-token accuracy on the continuations, exact match for TASK_KS
    (and every k in `exact_match`), and the mean log-probability (nats) of a k_max-token continuation."""
    k = continuation_length(windows.shape[1] - 1)
    correct, logprob = score_continuations(model, windows, k, n_seqs, autocast)
    match = exact_match(correct)
    fields = {"final_token_accuracy": float(correct.double().mean()),
              "final_continuation_logprob": float(logprob.double().sum(1).mean()),
              "exact_match": [float(m) for m in match], "task_prompts": len(windows), "task_k": k}
    fields.update({f"final_exact_match_{j}": float(match[j - 1]) if j <= k else None for j in TASK_KS})
    return fields


TASK_FIELDS = ("final_token_accuracy", "final_continuation_logprob", "exact_match", "task_prompts", "task_k",
               *(f"final_exact_match_{j}" for j in TASK_KS))
