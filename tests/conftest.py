"""Shared fixtures: a micro sweep that really trains, on a slice of the builtin corpus.

The sweep is trained once per test session (a few seconds) and its run store is read by the
sweep, fit and report tests alike.
"""

from __future__ import annotations

import os

import pytest

from scaling.config import parse_config

MICRO = {
    "name": "micro",
    "seed": 0,
    "corpus": {"source": "builtin", "max_documents": 30, "val_fraction": 0.1},
    "tokenizer": {"vocab_size": 320},
    "model": {"context_length": 32},
    "grid": {
        "models": [
            {"d_model": 16, "n_layers": 1, "n_heads": 2},
            {"d_model": 32, "n_layers": 2, "n_heads": 2},
        ],
        "tokens": ["8192", "1.6384e4", "3.2768e4"],  # whole batches of 256 tokens
    },
    "train": {"batch_tokens": 256, "lr": 1e-2, "eval_interval": 10, "eval_tokens": 4096,
              "log_interval": 5, "checkpoint_interval": 40},
}


MICRO_RUNS = len(MICRO["grid"]["models"]) * len(MICRO["grid"]["tokens"])


def pytest_configure(config):
    """Under pytest-xdist (`make test` runs `-n auto`), each worker is one of as many processes as
    there are cores: torch's default of a thread per core in each would oversubscribe them, so a
    worker and what it starts (CLI subprocesses, sweep workers) share the cores out instead."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    import torch

    from scaling.sweep.packing import usable_cores

    threads = max(1, usable_cores() // int(workers))
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    torch.set_num_threads(threads)


def micro_config(**overrides):
    data = {**MICRO, **overrides}
    return parse_config(data, "micro")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("token-cache")


@pytest.fixture(scope="session")
def micro_sweep(tmp_path_factory, cache_dir):
    """A finished micro sweep: (config, SweepResult)."""
    from scaling.sweep.driver import run_sweep

    cfg = micro_config()
    runs_dir = tmp_path_factory.mktemp("runs")
    return cfg, run_sweep(cfg, runs_dir, cache_dir)
