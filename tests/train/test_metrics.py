"""Evaluation beyond the loss (scaling.train.metrics): exact match from one teacher-forced pass equals
greedy generation's, the prompts are the same for every run, and a real micro run records the fields
in its summary and in runs.csv."""

from __future__ import annotations

from contextlib import nullcontext
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
import torch

from scaling.runs import store
from scaling.train.metrics import (
    N_PROMPTS,
    TASK_KS,
    continuation_length,
    exact_match,
    score_continuations,
    task_prompts,
)
from scaling.train.model import GPT
from scaling.train.shape import GPTConfig

CFG = GPTConfig(vocab_size=64, context_length=24, d_model=32, n_layers=2, n_heads=2)


@torch.no_grad()
def greedy(model: GPT, prompt: torch.Tensor, k: int) -> torch.Tensor:
    """k tokens generated one at a time, each the argmax given the prompt and the tokens before it."""
    seq = prompt[None]
    for _ in range(k):
        logits, _ = model(seq)
        seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq[0, len(prompt):]


def test_exact_match_from_one_pass_equals_greedy_generation():
    torch.manual_seed(0)
    model = GPT(CFG).eval()
    T, k = CFG.context_length, continuation_length(CFG.context_length)
    prompts = torch.randint(CFG.vocab_size, (2 * (k + 1), T + 1 - k))
    windows, agree = [], []
    for i, prompt in enumerate(prompts):
        text = greedy(model, prompt, k)
        if i <= k:                       # the model's own continuation with its token i changed: agrees for i tokens
            if i < k:
                text[i] = (text[i] + 1) % CFG.vocab_size
            agree.append(i)
        else:                            # a random continuation: agrees for as many tokens as generation says
            text = torch.randint(CFG.vocab_size, (k,))
            generated = greedy(model, prompt, k)
            agree.append(int(torch.cumprod(generated == text, 0).sum()))
        windows.append(torch.cat([prompt, text]))
    windows = torch.stack(windows)
    assert windows.shape[1] == T + 1     # context T of inputs, and the target after the last
    correct, logprob = score_continuations(model, windows, k, 5, nullcontext())
    expected = [(np.array(agree) >= j).mean() for j in range(1, k + 1)]
    np.testing.assert_allclose(exact_match(correct), expected)
    assert 0 < expected[-1] < expected[0] < 1 and (logprob <= 0).all()


def test_prompts_are_seeded_and_the_same_for_every_run():
    val = np.arange(10_000, dtype=np.uint16) % 997
    a = task_prompts(val, 32, torch.device("cpu"))
    b = task_prompts(val.copy(), 32, torch.device("cpu"))
    assert a.shape == (N_PROMPTS, 33) and torch.equal(a, b)
    assert len(set(a[:, 0].tolist())) > N_PROMPTS // 2          # spread over the split, not one window
    assert continuation_length(128) == 16 and continuation_length(20) == 10


def test_a_micro_run_records_the_metrics(micro_sweep):
    _, sweep = micro_sweep
    table = pd.read_csv(sweep.sweep_dir / store.TABLE)
    for run_dir in store.run_dirs(sweep.sweep_dir):
        s = store.read_summary(run_dir)
        em = s["exact_match"]
        assert s["task_prompts"] == N_PROMPTS and len(em) == s["task_k"] == 16
        assert all(1 >= a >= b >= 0 for a, b in pairwise(em))           # longer matches are rarer
        assert [s[f"final_exact_match_{k}"] for k in TASK_KS] == [em[k - 1] for k in TASK_KS]
        # better than a uniform guess over 320 tokens, and a per-token log-probability near the loss's
        assert 1 / 320 < s["final_token_accuracy"] < 1
        per_token = -s["final_continuation_logprob"] / 16
        assert 0.5 * s["final_val_loss"] < per_token < 1.5 * s["final_val_loss"]
        row = table[table.run_id == run_dir.name].iloc[0]
        assert row.final_exact_match_4 == pytest.approx(s["final_exact_match_4"])
        assert row.final_token_accuracy == pytest.approx(s["final_token_accuracy"])
