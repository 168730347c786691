"""Shared fixtures: a micro sweep that really trains, on a slice of the builtin corpus.

The sweep is trained once per test session (a few seconds) and its run store is read by the
sweep, fit and report tests alike.
"""

from __future__ import annotations

import os
from pathlib import Path

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

    from scaling.sweeps.packing import usable_cores

    threads = max(1, usable_cores() // int(workers))
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    torch.set_num_threads(threads)


# The slowest test files (measured with --durations: about 45% of the suite's time), handed to the
# pytest-xdist workers first, so that no worker is left with one of them at the end while the other
# waits. Only the order changes, and only under xdist (`make test`; with --no-loadscope-reorder).
SLOWEST_FIRST = ("report/test_report.py", "sweep/test_faults.py", "cli/test_cli_fit.py", "sweep/test_executor.py",
                 "laws/test_design.py", "hardening/test_fit_json.py", "report/test_curve_report.py",
                 "hardening/test_outputs.py", "hardening/test_run_store.py", "laws/test_fit.py", "laws/test_api.py",
                 "test_notebooks.py")


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    tests = Path(__file__).parent
    items.sort(key=lambda item: rank.get(item.path.relative_to(tests).as_posix(), len(rank)))   # stable


def micro_config(**overrides):
    data = {**MICRO, **overrides}
    return parse_config(data, "micro")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("token-cache")


@pytest.fixture(scope="session")
def micro_sweep(tmp_path_factory, cache_dir):
    """A finished micro sweep: (config, SweepResult)."""
    from scaling.sweeps.driver import run_sweep

    cfg = micro_config()
    runs_dir = tmp_path_factory.mktemp("runs")
    return cfg, run_sweep(cfg, runs_dir, cache_dir)
