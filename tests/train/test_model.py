import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from scaling.config import ModelConfig, Shape
from scaling.train import counts
from scaling.train.model import GPT
from scaling.train.shape import GPTConfig, flops_by_measure, param_counts

SHAPES = [
    GPTConfig(vocab_size=256, context_length=16, d_model=32, n_layers=2, n_heads=2),
    GPTConfig(vocab_size=300, context_length=24, d_model=48, n_layers=3, n_heads=4, mlp_ratio=2,
              tied_embeddings=False),
]


def test_from_config():
    cfg = GPTConfig.from_config(ModelConfig(context_length=64, tied_embeddings=False, mlp_ratio=3),
                                Shape(d_model=96, n_layers=3, n_heads=3), vocab_size=1024)
    assert cfg == GPTConfig(vocab_size=1024, context_length=64, d_model=96, n_layers=3, n_heads=3,
                            mlp_ratio=3, tied_embeddings=False)


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("cfg", SHAPES, ids=["small", "wide"])
def test_param_counts_match_the_module(cfg, tied):
    cfg = GPTConfig(**{**cfg.__dict__, "tied_embeddings": tied})
    model = GPT(cfg)
    embeddings = {model.tok_emb.weight, model.pos_emb.weight, model.head.weight}
    total, non_embedding = param_counts(cfg)
    assert total == sum(p.numel() for p in model.parameters())  # parameters() counts a tied matrix once
    assert non_embedding == sum(p.numel() for p in model.parameters() if p not in embeddings)


def test_untied_output_layer_is_an_embedding():
    tied, untied = (GPTConfig(vocab_size=256, context_length=16, d_model=32, n_layers=2, n_heads=2,
                              tied_embeddings=t) for t in (True, False))
    assert param_counts(untied)[0] - param_counts(tied)[0] == 256 * 32
    assert param_counts(untied)[1] == param_counts(tied)[1]
    tied_flops, untied_flops = flops_by_measure(tied), flops_by_measure(untied)
    assert untied_flops["exact"] == tied_flops["exact"]
    assert untied_flops["6n_non_embedding"] == tied_flops["6n_non_embedding"]
    assert untied_flops["6n_total"] - tied_flops["6n_total"] == 6 * 256 * 32


@pytest.mark.parametrize("cfg", SHAPES, ids=["small", "wide"])
def test_exact_flops_match_torch_flop_counter(cfg):
    # The math kernel decomposes attention into bmm's that the counter sees: 2 forward
    # (QK^T, AV over the full T x T window) and 4 backward, the 3x of the formula. The CPU
    # flash kernel is not counted at all by FlopCounterMode (torch 2.13 registers only the
    # CUDA kernels), and the CUDA flash backward counts 5 bmm's (it recomputes QK^T), so
    # only the math kernel gives a like-for-like count.
    model = GPT(cfg)
    B, T = 3, cfg.context_length
    idx = torch.randint(cfg.vocab_size, (B, T))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        _, loss = model(idx, idx)
        loss.backward()
    assert counter.get_total_flops() == flops_by_measure(cfg)["exact"] * B * T


@pytest.mark.parametrize("cfg", SHAPES, ids=["small", "wide"])
def test_forward_count_matches_torch_flop_counter_piece_by_piece(cfg):
    """scaling.train.counts' forward figure against the matmuls torch runs for one forward pass:
    attention's two bmm's (Q K^T and A V, over the full T x T window with the math kernel), the
    output layer, and everything (linear layers included)."""
    shape = dict(n_layers=cfg.n_layers, d_model=cfg.d_model, context=cfg.context_length,
                 vocab=cfg.vocab_size)
    model = GPT(cfg)
    B, T = 2, cfg.context_length
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(torch.randint(cfg.vocab_size, (B, T)))
    by_module = counter.get_flop_counts()
    bmm = sum(n for op, n in by_module["GPT"].items() if "bmm" in str(op))
    assert bmm == counts.attention_flops(cfg.n_layers, cfg.d_model, cfg.context_length) * B * T
    assert sum(by_module["GPT.head"].values()) == counts.output_flops(cfg.d_model, cfg.vocab_size) * B * T
    assert counter.get_total_flops() == counts.forward_flops(**shape, mlp_ratio=cfg.mlp_ratio) * B * T
    assert counts.flops_by_measure(**shape, mlp_ratio=cfg.mlp_ratio)["exact"] == 3 * counts.forward_flops(
        **shape, mlp_ratio=cfg.mlp_ratio)


def test_model_counts_are_those_of_counts():
    cfg = SHAPES[1]
    shape = dict(n_layers=3, d_model=48, context=24, vocab=300, mlp_ratio=2, tied_embeddings=False)
    assert param_counts(cfg) == counts.param_counts(**shape)
    assert flops_by_measure(cfg) == counts.flops_by_measure(**shape)


def test_flops_6n_is_six_times_non_embedding():
    cfg = SHAPES[0]
    assert flops_by_measure(cfg)["6n_non_embedding"] == 6 * param_counts(cfg)[1]
    assert flops_by_measure(cfg)["6n_total"] == 6 * param_counts(cfg)[0]


def test_initial_loss_is_uniform_and_attention_is_causal():
    torch.manual_seed(0)
    cfg = SHAPES[0]
    model = GPT(cfg)
    idx = torch.randint(cfg.vocab_size, (2, cfg.context_length))
    logits, loss = model(idx, torch.randint(cfg.vocab_size, idx.shape))
    assert logits.shape == (2, cfg.context_length, cfg.vocab_size)
    assert abs(loss.item() - math.log(cfg.vocab_size)) < 0.05  # small init: near-uniform predictions
    changed = idx.clone()
    changed[:, 10:] = (changed[:, 10:] + 1) % cfg.vocab_size
    assert torch.equal(model(changed)[0][:, :10], logits[:, :10])  # the future does not leak back
    assert not torch.equal(model(changed)[0][:, 10:], logits[:, 10:])
