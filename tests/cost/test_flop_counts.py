"""`scaling cost train` and runs.csv count the same FLOPs per token for every shape the configs train.

Both come from `scaling.train.counts`: the sweep through `scaling.train.shape.flops_by_measure` (runs.csv's
`flops_exact`), the cost command through `scaling.cost.flops_per_token`, which takes the total N and the
shape (`counts.forward_from_weights`). Given the N the sweep records for a run, the two must agree to the last FLOP.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scaling.cli import main
from scaling.config import load_config
from scaling.sweeps.plan import plan
from scaling.train import counts
from scaling.train.shape import flops_by_measure

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def test_there_are_configs_to_check():
    assert {p.name for p in CONFIGS} >= {"tiny.yaml", "small.yaml", "tiny_wsd.yaml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_cost_train_agrees_with_runs_csv_for_every_shape(path, capsys):
    runs = plan(load_config(path))
    shapes = {}                                     # one run per shape (largest budget)
    for run in runs:
        shapes[(run.spec.model.d_model, run.spec.model.n_layers)] = run
    tied = {run.spec.model.tied_embeddings for run in runs}
    assert len(tied) == 1                           # --tied-embeddings applies to every --model
    argv = ["cost", "train", "--flops-per-gpu", "1e12", "--json"]
    argv += ["--tied-embeddings"] if tied.pop() else []
    for run in shapes.values():
        m = run.spec.model
        argv += ["--model", f"{run.run_id}:{run.n_params_total}:{run.spec.tokens}:{m.n_layers}:{m.d_model}:"
                            f"{m.context_length}:{m.vocab_size}"]
    assert main(argv) == 0
    models = json.loads(capsys.readouterr().out)["models"]
    assert len(models) == len(shapes) >= 3
    for run, got in zip(shapes.values(), models):
        assert got["name"] == run.run_id
        per_token = flops_by_measure(run.spec.model)["exact"]
        assert got["flops_per_token"]["training"] == per_token, run.run_id
        assert got["compute_exact"] == run.flops_exact, run.run_id       # runs.csv's flops_exact
        assert got["flops_per_token"]["n_nonembed"] == run.n_params_non_embedding


def test_the_two_differed_by_the_causal_halving_before():
    """The figure of issue 17: d64 L4 of configs/tiny.yaml, 1.97M FLOPs per token (was 1.83M in cost)."""
    f = counts.flops_by_measure(n_layers=4, d_model=64, context=128, vocab=1024)
    assert f["exact"] == 1_966_080
    assert f["exact"] == 3 * (4 * (2 * 12 * 64**2 + 4 * 128 * 64) + 2 * 64 * 1024)


def test_the_count_and_the_cost_stage_load_without_torch():
    code = "import sys, scaling.train.counts, scaling.cost; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
