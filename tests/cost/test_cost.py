"""`scaling.cost` and `scaling cost`: the figures of the issue, digit for digit, and bad input.

The printed tables are checked line by line against the numbers the issue gives (and that
docs/cost.md shows), so a formatting change that alters a published figure fails here.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from scaling import cost
from scaling.cli import main
from scaling.errors import UsageError
from scaling.laws.forms.references import BESIROGLU, CHINCHILLA

TRAIN_ARGV = [
    "cost", "train",
    "--model", "Pythia 1.4B:1.4e9:300e9", "--model", "GPT-3:175e9:300e9",
    "--model", "Chinchilla:70e9:1.4e12", "--model", "Llama 3.1 405B:405e9:15.6e12",
    "--flops-per-gpu", "400e12", "--gpus", "16384", "--price", "2",
]
TRAIN_TABLE = """\
Pythia 1.4B     C = 2.52e+21  hours =      1750  days =   0.0  US$      3500
GPT-3           C = 3.15e+23  hours =    218750  days =   0.6  US$    437500
Chinchilla      C = 5.88e+23  hours =    408333  days =   1.0  US$    816667
Llama 3.1 405B  C = 3.79e+25  hours =  26325000  days =  66.9  US$  52650000
"""

INFERENCE_ARGV = ["cost", "inference", "--params", "7e10", "--tokens", "1.4e12",
                  "--tokens-per-request", "500", "--requests", "1e6", "1e9", "1e12"]


def run(argv, capsys) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# ----------------------------------------------------------------------------- training

def test_training_table_digit_for_digit(capsys):
    rc, out, _ = run(TRAIN_ARGV, capsys)
    assert rc == 0
    assert out.startswith(TRAIN_TABLE)
    assert "assumptions:" in out and "C = 6 N D" in out
    assert "achieved 4.00e14 FLOP/s per GPU, as given" in out
    assert "16384 GPUs scale perfectly" in out and "US$2 per GPU-hour" in out


def test_training_cost_values():
    tp = cost.throughput(achieved=400e12)
    r = cost.training_cost("Chinchilla", 70e9, 1.4e12, tp, gpus=16384, price=2)
    assert r.compute == pytest.approx(5.88e23)
    assert r.gpu_hours == pytest.approx(5.88e23 / 400e12 / 3600)
    assert r.days == pytest.approx(r.gpu_hours / 16384 / 24)
    assert r.usd == pytest.approx(2 * r.gpu_hours)
    assert r.units["gpu_hours"] == "GPU-hours" and r.units["usd"] == "US$"
    assert any("6 N D" in a for a in r.assumptions)
    assert r.compute_exact is None
    no_price = cost.training_cost("x", 1e9, 1e9, tp)
    assert no_price.usd is None and no_price.gpus == 1


def test_peak_times_mfu_and_presets(capsys):
    tp = cost.throughput(gpu="H100", mfu=0.4)
    assert tp.flops_per_s == pytest.approx(989e12 * 0.4)
    assert tp.peak_flops_per_s == 989e12 and tp.mfu == 0.4
    assert cost.GPU_PRESETS["a100"][0] == 312e12
    assert cost.GPU_PRESETS["h200"][0] == 989e12
    assert cost.throughput(peak=1e15, mfu=0.5).flops_per_s == pytest.approx(5e14)
    assert any("MFU is an assumption" in a for a in tp.assumptions)
    rc, out, _ = run(["cost", "train", "--model", "GPT-3:175e9:300e9", "--gpu", "h100",
                      "--mfu", "0.4", "--gpus", "1024"], capsys)
    assert rc == 0
    h = 6 * 175e9 * 300e9 / (989e12 * 0.4) / 3600
    assert f"hours = {h:>9.0f}  days = {h / 1024 / 24:>5.1f}" in out
    assert "US$" not in out.splitlines()[0]      # no price, no dollar column


def test_exact_count_formula():
    # By hand, for 2 layers, d = 64, context 128, vocab 1000, untied, MLP 4d (the model's total N):
    #   linear weights (4 + 2 x 4) x 64^2 x 2 layers = 98,304; LayerNorms 4 x 64 x 2 + 2 x 64 = 640
    #   embeddings (1000 tokens + 1000 output + 128 positions) x 64 = 136,192; N = 235,136
    #   forward: 2 x 98,304 + output 2 x 64 x 1000 + attention 2 layers x (QK^T + AV) 2 x 128 x 64 x 2
    #          = 196,608 + 128,000 + 65,536 = 390,144 per token
    shape = cost.ModelShape(n_layers=2, d_model=64, context=128, vocab=1000)
    n = 235_136
    f = cost.flops_per_token(n, shape)
    assert f.n_nonembed == 98_944 and f.n_matmul == 98_304
    assert f.forward_matmul == 196_608
    assert f.forward_output == 128_000
    assert f.forward_attention == 65_536
    assert f.forward == 390_144
    assert f.training == 3 * 390_144
    assert f.training_6n == 6 * n
    tied = cost.flops_per_token(n - 64_000, cost.ModelShape(2, 64, 128, 1000, tied_embeddings=True))
    assert tied.n_nonembed == 98_944 and tied.forward == 390_144
    with pytest.raises(UsageError, match="embedding"):
        cost.flops_per_token(1e5, shape)


def test_exact_count_in_train_command(capsys):
    rc, out, _ = run(["cost", "train", "--model", "GPT-3:175e9:300e9:96:12288:2048:50257",
                      "--flops-per-gpu", "400e12", "--tied-embeddings"], capsys)
    assert rc == 0
    # N less the tied token table, the learned positions and the LayerNorms; output layer;
    # Q K^T and A V over the full 2,048-token window in each of 96 layers.
    n_matmul = 175e9 - 50257 * 12288 - 2048 * 12288 - (4 * 96 + 2) * 12288
    forward = 2 * n_matmul + 2 * 12288 * 50257 + 96 * 2 * (2 * 2048 * 12288)
    exact = 3 * forward * 300e9
    assert f"C = {exact:.2e}" in out
    assert f"({exact / 3.15e23:.3f} x 6ND)" in out
    assert "1.027 x 6ND" in out                # attention adds ~2.8% at 2k context for GPT-3


def test_training_json(capsys):
    rc, out, _ = run(TRAIN_ARGV + ["--json"], capsys)
    assert rc == 0
    data = json.loads(out)
    assert [m["name"] for m in data["models"]] == ["Pythia 1.4B", "GPT-3", "Chinchilla",
                                                   "Llama 3.1 405B"]
    assert data["models"][0]["gpu_hours"] == pytest.approx(1750)
    assert data["models"][0]["units"]["compute"] == "FLOPs"
    assert data["models"][0]["assumptions"]
    assert data["throughput"]["flops_per_s"] == 400e12


# ----------------------------------------------------------------------------- inference

def test_inference_figures(capsys):
    rc, out, _ = run(INFERENCE_ARGV, capsys)
    assert rc == 0
    lines = out.splitlines()
    assert "training:  6 N D = 6 x 7.0e10 x 1.4e12 = 5.9e23 FLOPs" in lines
    assert " 1e6 requests -> 7.0e19 FLOPs  (0.00012x training)" in lines
    assert " 1e9 requests -> 7.0e22 FLOPs  (0.12x training)" in lines
    assert "1e12 requests -> 7.0e25 FLOPs  (119x training)" in lines
    assert ("inference overtakes training after 8.4e9 requests "
            "(4.2e12 generated tokens = 3 D)") in lines


def test_inference_api():
    r = cost.inference_cost(7e10, 500, [1e6, 1e9, 1e12], training_tokens=1.4e12)
    assert [row.flops for row in r.rows] == pytest.approx([7e19, 7e22, 7e25])
    assert r.training_flops == pytest.approx(5.88e23)
    assert r.crossover_requests == pytest.approx(3 * 1.4e12 / 500)
    assert r.rows[2].ratio_to_training == pytest.approx(7e25 / 5.88e23)
    alone = cost.inference_cost(7e10, 500, [1e6])
    assert alone.crossover_requests is None and alone.rows[0].ratio_to_training is None


# ----------------------------------------------------------------------------- inference-aware

DEMANDS = [0, 1e9, 1e10, 1e11, 1e12, 3e12, 1e13, 1e14, 1e15, 1e16]


@pytest.mark.parametrize("ref", [CHINCHILLA, BESIROGLU], ids=lambda r: r.key)
def test_inference_aware_zero_demand_is_training_only_optimum(ref):
    law = ref.law
    for compute in (1e21, 5.88e23, 1e25):
        target = float(law.optimal_loss(compute))
        res = cost.inference_aware_optimum(law, target, [0])
        p = res.points[0]
        assert p.n_params == pytest.approx(float(law.n_opt(compute)), rel=1e-6)
        assert p.tokens == pytest.approx(float(law.d_opt(compute)), rel=1e-6)
        assert p.training_flops == pytest.approx(compute, rel=1e-6)
        assert p.tokens_per_param == pytest.approx(float(law.tokens_per_param(compute)), rel=1e-6)
        assert p.saving == pytest.approx(0, abs=1e-9)


@pytest.mark.parametrize("ref", [CHINCHILLA, BESIROGLU], ids=lambda r: r.key)
def test_inference_aware_tokens_per_param_rise_with_demand(ref):
    law = ref.law
    res = cost.inference_aware_optimum(law, float(law.optimal_loss(5.88e23)), DEMANDS)
    tpp = [p.tokens_per_param for p in res.points]
    assert all(b > a for a, b in zip(tpp, tpp[1:])), tpp
    n = [p.n_params for p in res.points]
    assert all(b < a for a, b in zip(n, n[1:]))
    for p in res.points:
        assert p.cross_check < 1e-6                                 # two solvers agree
        assert float(law.loss(p.n_params, p.tokens)) == pytest.approx(res.target_loss, abs=1e-9)
        assert p.total_flops <= p.baseline_total_flops * (1 + 1e-9)  # never worse than Chinchilla


def test_inference_aware_is_a_minimum():
    """Brute force: on the constraint L(N, D) = target, moving N either way costs more."""
    law = CHINCHILLA.law
    target = 2.0
    res = cost.inference_aware_optimum(law, target, [1e13])
    p = res.points[0]

    def total(n):
        d = (law.B / (target - law.E - law.A / n**law.alpha)) ** (1 / law.beta)
        return 6 * n * d + 2 * n * 1e13

    grid = p.n_params * np.exp(np.linspace(-0.3, 0.3, 601))
    assert total(p.n_params) <= min(total(n) for n in grid) * (1 + 1e-12)
    assert grid[int(np.argmin([total(n) for n in grid]))] == pytest.approx(p.n_params, rel=2e-3)


def test_inference_aware_command(capsys):
    rc, out, _ = run(["cost", "inference-aware", "--law", "chinchilla", "--compute", "5.88e23"],
                     capsys)
    assert rc == 0
    lines = out.splitlines()
    assert ("training-only optimum: N = 3.25e10, D = 3.02e12, 92.8 tokens/param, "
            "C = 5.88e23 FLOPs") in lines
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["D_inf", "N"])
    rows = []
    for line in lines[header + 1:]:
        if line.startswith("units:"):
            break
        rows.append(line.split())
    assert [r[0] for r in rows] == ["0", "1.0e10", "1.0e11", "1.0e12", "1.0e13", "1.0e14",
                                    "1.0e15"]
    tpp = [float(r[3]) for r in rows]
    assert all(b > a for a, b in zip(tpp, tpp[1:]))
    assert rows[0][1:4] == ["3.25e10", "3.02e12", "92.8"]     # zero demand = training only
    assert "Sardana et al. 2024" in out


def test_inference_aware_from_a_fit_file(tmp_path, capsys):
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps({"params": BESIROGLU.law.to_dict()}))
    rc, out, _ = run(["cost", "inference-aware", "--fit", str(fit), "--loss", "2.1",
                      "--inference-tokens", "0", "1e12", "--json"], capsys)
    assert rc == 0
    data = json.loads(out)
    assert data["law"] == BESIROGLU.law.to_dict()
    assert data["target_loss"] == 2.1
    assert data["points"][1]["tokens_per_param"] > data["points"][0]["tokens_per_param"]
    assert data["units"]["points.total_flops"] == "FLOPs" and data["assumptions"]


# ----------------------------------------------------------------------------- rules of thumb

def test_rules_worked_example(capsys):
    res = cost.rules_of_thumb(1e23, fixed_params=1e11, law=CHINCHILLA.law, law_label="chinchilla")
    rule, kaplan, fitted = res.rows
    assert rule.n_params == pytest.approx(math.sqrt(1e23 / 120))
    assert rule.tokens == pytest.approx(20 * rule.n_params)
    assert kaplan.tokens == pytest.approx(1e23 / 6e11)
    assert kaplan.flops_per_generated_token / rule.flops_per_generated_token == \
        pytest.approx(1e11 / math.sqrt(1e23 / 120))
    assert fitted.n_params == pytest.approx(float(CHINCHILLA.law.n_opt(1e23)))
    assert fitted.loss < rule.loss < kaplan.loss      # the law's optimum is the law's best

    rc, out, _ = run(["cost", "rules", "--compute", "1e23", "--params", "1e11"], capsys)
    assert rc == 0
    lines = out.splitlines()
    assert ("rule D = 20 N:  N* = sqrt(C/120) = 2.9e10 parameters, D = 5.8e11 tokens"
            in lines)
    assert ("Kaplan-style N = 1.0e11:  D = C/(6N) = 1.7e11 tokens, 1.7 tokens/param, "
            "3.46x the rule's FLOPs per generated token") in lines
    assert any(line.startswith("law chinchilla") for line in lines)


# ----------------------------------------------------------------------------- memory

@pytest.mark.parametrize("n, text", [(512, "1.0 MB"), (2048, "16.8 MB"), (8192, "268 MB"),
                                     (32768, "4.3 GB"), (128000, "65.5 GB")])
def test_attention_score_matrix(n, text):
    res = cost.attention_scores_memory([n], bytes_per_element=4)
    assert res.rows[0].bytes_per_head_layer == n * n * 4
    assert cost.format_bytes(res.rows[0].bytes_per_head_layer) == text


def test_memory_command_figures(capsys):
    rc, out, _ = run(["cost", "memory", "--params", "47e9", "--active-params", "13e9",
                      "--dtype", "fp16"], capsys)
    assert rc == 0
    lines = out.splitlines()
    assert "weights: 4.7e10 parameters x 2 bytes (fp16) = 94 GB" in lines
    assert ("compute: 1.3e10 of 4.7e10 parameters active per token = 28% of the dense "
            "equivalent (2.6e10 vs 9.4e10 FLOPs per token)") in lines

    rc, out, _ = run(["cost", "memory", "--context", "512", "2048", "8192", "32768", "128000",
                      "--score-bytes", "4"], capsys)
    assert rc == 0
    rows = [line.split(maxsplit=1) for line in out.splitlines()[2:7]]
    assert rows == [["512", "1.0 MB"], ["2048", "16.8 MB"], ["8192", "268 MB"],
                    ["32768", "4.3 GB"], ["128000", "65.5 GB"]]

    rc, out, _ = run(["cost", "memory", "--context", "512", "4096", "128000", "--heads", "32",
                      "--layers", "32", "--ssm-d", "4096", "--ssm-state", "16",
                      "--d-model", "4096"], capsys)
    assert rc == 0
    assert "     512              1.0 MB                    1.1 GB" in out
    assert ("SSM state: d x N_state = 4096 x 16 x 4 bytes = 262 kB per layer, 8.4 MB for 32 "
            "layers, at any context length") in out
    assert "self-attention n^2 d = recurrence n d^2 at n = d = 4096" in out
    assert "     4096  attention / recurrence = 1 (equal)" in out


def test_memory_api():
    w = cost.weight_memory(47e9, "fp16", active_params=13e9)
    assert w.weight_bytes == 94e9
    assert f"{100 * w.active_fraction:.0f}%" == "28%"
    assert w.flops_per_token_active == 2 * 13e9
    s = cost.ssm_state_memory(4096, 16, 4, layers=2)
    assert s.bytes_per_layer == 4096 * 16 * 4 and s.bytes_total == 2 * s.bytes_per_layer
    x = cost.attention_recurrence_crossover(1024, [512, 1024, 2048])
    assert x.crossover_context == 1024
    assert [r.ratio for r in x.rows] == [0.5, 1.0, 2.0]
    assert all(r.attention_ops == r.context**2 * 1024 for r in x.rows)
    assert all(r.recurrence_ops == r.context * 1024**2 for r in x.rows)


def test_format_helpers():
    assert cost.fixed_sci(7e19) == "7.0e19"
    assert cost.fixed_sci(1e6, 1) == "1e6"
    assert cost.fixed_sci(3.2e-5, 2) == "3.2e-5"
    assert cost.format_bytes(999.96e6) == "1.0 GB"
    assert cost.format_bytes(512) == "512 B"
    assert cost.format_ratio(0.000119) == "0.00012" and cost.format_ratio(119.3) == "119"


def _chinchilla_by_hand():
    """Hoffmann et al. 2022's Approach-3 constants and the closed forms of their eq. 4."""
    E, A, B, alpha, beta = 1.69, 406.4, 410.7, 0.34, 0.28
    G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    return E, A, B, alpha, beta, G


def _train_json(data):
    # 6 x 1e9 x 1e9 = 6e18 FLOPs at 1e14 FLOP/s: 6e4 s = 16.67 GPU-hours, on one GPU 0.694 days.
    m = data["models"][0]
    assert m["compute"] == pytest.approx(6e18)
    assert m["gpu_hours"] == pytest.approx(6e4 / 3600)
    assert m["days"] == pytest.approx(6e4 / 3600 / 24)
    assert m["usd"] is None and m["gpus"] == 1
    assert data["throughput"]["flops_per_s"] == 1e14 and data["throughput"]["mfu"] is None
    return m


def _inference_json(data):
    # 2 N = 2e9 FLOPs per generated token; one request of 10 tokens is 2e10.
    assert data["flops_per_token"] == 2e9 and data["flops_per_request"] == 2e10
    assert data["rows"] == [{"requests": 1.0, "generated_tokens": 10.0, "flops": 2e10,
                             "ratio_to_training": None}]
    return data


def _inference_aware_json(data):
    # At D_inf = 0 the cheapest (N, D) on the iso-loss L = 2.5 spends the reducible loss
    # R = 2.5 - E in the ratio of the exponents: A / N^alpha = beta / (alpha + beta) x R.
    E, A, B, alpha, beta, _ = _chinchilla_by_hand()
    R = 2.5 - E
    n = (A / (beta / (alpha + beta) * R)) ** (1 / alpha)
    d = (B / (alpha / (alpha + beta) * R)) ** (1 / beta)
    assert data["training_only_n"] == pytest.approx(n, rel=1e-6)
    assert data["training_only_tokens"] == pytest.approx(d, rel=1e-6)
    zero, served = data["points"]
    assert zero["saving"] == pytest.approx(0, abs=1e-9)
    assert served["inference_flops"] == pytest.approx(2 * served["n_params"] * 1e9)
    n_s, d_s = served["n_params"], served["tokens"]
    assert served["total_flops"] == pytest.approx(6 * n_s * d_s + 2 * n_s * 1e9)
    assert served["baseline_total_flops"] == pytest.approx(6 * n * d + 2 * n * 1e9, rel=1e-6)
    return data


def _rules_json(data):
    # D = 20 N with 6 N D = 1e21: N = sqrt(1e21 / 120); the law's N_opt = G (C / 6)^(beta / (alpha + beta)).
    E, A, B, alpha, beta, G = _chinchilla_by_hand()
    rule, law = data["rows"]
    n = (1e21 / 120) ** 0.5
    assert rule["n_params"] == pytest.approx(n) and rule["tokens"] == pytest.approx(20 * n)
    assert rule["loss"] == pytest.approx(E + A / n**alpha + B / (20 * n) ** beta)
    assert rule["flops_per_generated_token"] == pytest.approx(2 * n)
    assert law["n_params"] == pytest.approx(G * (1e21 / 6) ** (beta / (alpha + beta)))
    assert law["n_params"] * law["tokens"] * 6 == pytest.approx(1e21)
    return data


def _memory_json(data):
    # bf16: 2 bytes x 1e9; a 1024 x 1024 score matrix of 4-byte floats; an 8 x 4 state of 4 bytes;
    # attention 1024^2 x 512 against recurrence 1024 x 512^2 multiply-adds, twice as many.
    assert data["weights"]["weight_bytes"] == 2e9
    assert data["attention_scores"]["rows"][0]["bytes_per_head_layer"] == 1024 * 1024 * 4
    assert data["ssm_state"]["bytes_total"] == 8 * 4 * 4
    x = data["crossover"]["rows"][0]
    assert (x["attention_ops"], x["recurrence_ops"], x["ratio"]) == (1024**2 * 512, 1024 * 512**2, 2.0)
    return data["weights"]


@pytest.mark.parametrize("sub, check", [
    (["train", "--model", "X:1e9:1e9", "--flops-per-gpu", "1e14"], _train_json),
    (["inference", "--params", "1e9", "--tokens-per-request", "10", "--requests", "1"], _inference_json),
    (["inference-aware", "--loss", "2.5", "--inference-tokens", "0", "1e9"], _inference_aware_json),
    (["rules", "--compute", "1e21"], _rules_json),
    (["memory", "--params", "1e9", "--context", "1024", "--ssm-d", "8", "--ssm-state", "4",
      "--d-model", "512"], _memory_json),
], ids=["train", "inference", "inference-aware", "rules", "memory"])
def test_every_command_has_json(sub, check, capsys):
    """Each --json carries the numbers of a hand derivation for its stated input, with units and
    assumptions beside them."""
    rc, out, _ = run(["cost", *sub, "--json"], capsys)
    assert rc == 0
    shown = check(json.loads(out))
    assert shown["units"] and shown["assumptions"]


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("argv, allowed", [
    (["train", "--model", "X:0:1e9", "--flops-per-gpu", "1e14"], "positive"),
    (["train", "--model", "X:1e9:-3e9", "--flops-per-gpu", "1e14"], "positive"),
    (["train", "--model", "X:1e9", "--flops-per-gpu", "1e14"], "NAME:N:D"),
    (["train", "--model", "X:1e9:1e9", "--gpu", "tpu", "--mfu", "0.4"], "a100, h100, h200"),
    (["train", "--model", "X:1e9:1e9", "--gpu", "h100", "--mfu", "1.5"], "(0, 1]"),
    (["train", "--model", "X:1e9:1e9", "--gpu", "h100", "--mfu", "0"], "(0, 1]"),
    (["train", "--model", "X:1e9:1e9", "--gpu", "h100"], "--mfu"),
    (["train", "--model", "X:1e9:1e9"], "exactly one of"),
    (["train", "--model", "X:1e9:1e9", "--flops-per-gpu", "1e14", "--mfu", "0.4"],
     "already includes"),
    (["train", "--model", "X:1e9:1e9", "--flops-per-gpu", "1e14", "--gpus", "0"], "whole"),
    (["train", "--model", "X:1e9:1e9", "--flops-per-gpu", "1e14", "--price", "-2"], "positive"),
    (["inference", "--params", "-7e10", "--tokens-per-request", "500", "--requests", "1e6"],
     "positive"),
    (["inference", "--params", "7e10", "--tokens-per-request", "0", "--requests", "1e6"],
     "positive"),
    (["inference", "--params", "7e10", "--tokens-per-request", "5", "--requests", "1e6", "-1e9"],
     "request count must be a positive"),
    (["inference-aware", "--loss", "1.5"], "above the law's irreducible loss"),
    (["inference-aware", "--loss", "2", "--inference-tokens", "-1"], ">= 0"),
    (["inference-aware", "--loss", "2", "--law", "kaplan"], "chinchilla, besiroglu"),
    (["inference-aware", "--loss", "2", "--law", "gpt"], "known:"),
    (["inference-aware", "--loss", "2", "--fit", "/nonexistent/fit.json"], "does not exist"),
    (["rules", "--compute", "0"], "positive"),
    (["rules", "--compute", "1e20", "--params", "1e20"], "C >= 6 N"),
    (["memory"], "at least one of"),
    (["memory", "--context", "0"], "positive"),
    (["memory", "--params", "47e9", "--dtype", "fp12"], "fp16, bf16"),
    (["memory", "--params", "13e9", "--active-params", "47e9"], "cannot exceed"),
    (["memory", "--ssm-d", "4096"], "--ssm-state"),
])
def test_invalid_input_exits_2_and_says_what_is_allowed(argv, allowed, capsys):
    rc, out, err = run(["cost", *argv], capsys)
    assert rc == 2
    assert err.startswith("scaling cost: error: ") and allowed in err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("kwargs", [{}, {"achieved": 1e14, "peak": 1e15}, {"achieved": 1e14, "mfu": 0.4},
                                    {"gpu": "h100"}, {"gpu": "tpu", "mfu": 0.4}])
def test_library_messages_name_quantities_not_flags(kwargs):
    """A notebook user never typed --mfu: the library says "an MFU", the CLI says which flag."""
    with pytest.raises(UsageError) as caught:
        cost.throughput(**kwargs)
    assert "--" not in str(caught.value)
    assert "MFU" in str(caught.value) or "FLOP/s" in str(caught.value)


def test_invalid_input_subprocess_has_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "cost", "train", "--model", "X:1e9:1e9",
         "--gpu", "tpu", "--mfu", "0.4"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "unknown GPU preset 'tpu'; known: v100, a100, h100, h200" in proc.stderr


# ----------------------------------------------------------------------------- docs

def test_docs_commands_print_what_docs_show(capsys):
    """Every `$ scaling cost ...` block in docs/cost.md prints exactly the text shown under it."""
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "cost.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```console\n")[1:]]
    assert len(blocks) >= 8
    for block in blocks:
        command, _, shown = block.partition("\n")
        assert command.startswith("$ scaling cost "), command
        rc = main(shlex.split(command)[2:])
        out, err = capsys.readouterr()
        assert (out + err) == shown, command
        assert rc == (2 if "error:" in shown else 0), command
