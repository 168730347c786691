"""`scaling.tune`: the command's tuning as one call (real micro runs, one step each), and its
options checked as the command checks its flags, before anything trains."""

import json

import pytest
import yaml

import scaling
from scaling.cli import main
from scaling.errors import UsageError
from scaling.formats import json_safe
from scaling.tuning.files import tune_record
from scaling.tuning.run import TunedRates
from tests.conftest import MICRO


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, cache_dir):
    """The micro config's 2 shapes at 3 rates tuned by `scaling.tune`, then by `scaling tune` on the
    same store (which trains nothing more): (the function's result, the command's exit code, tune.json)."""
    root = tmp_path_factory.mktemp("tune-api")
    config = root / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    result = scaling.tune(config, lrs=["3e-3", 1e-2, 3e-2], tokens=256, runs_dir=root / "runs", cache_dir=cache_dir)
    code = main([str(a) for a in ("tune", config, "--lrs", "3e-3,1e-2,3e-2", "--tokens", "256", "--runs-dir",
                                  root / "runs", "--cache-dir", cache_dir, "--out", root / "out", "--json")])
    return result, code, json.loads((root / "out" / "tune.json").read_text())


def test_scaling_tune_gives_what_the_command_writes(tuned):
    result, code, record = tuned
    assert isinstance(result, TunedRates) and result.tuning.trained == 6 and result.tuning.skipped == 0
    assert [len(s.lrs) for s in result.tuning.shapes] == [3, 3] and result.tuning.tokens == 256
    mine = json.loads(json.dumps(json_safe(tune_record(result.tuning, result.law))))
    assert mine == {k: v for k, v in record.items() if k not in ("config", "tuned_config")}
    assert code == (1 if result.failed else 0)


@pytest.mark.parametrize("options, message", [
    ({"budgets": True, "lrs": [1e-3, 2e-3, 4e-3]}, "budgets tunes each cell at its own D and rates: lrs cannot go"),
    ({"seeds": [0, 1], "cells": "all"}, "seeds, cells: only with budgets"),
    ({"budgets": True, "seeds": [0, 0]}, "seeds must be distinct non-negative integers"),
    ({"budgets": True, "beta2": [0.9, 1.0]}, r"each beta2 must lie in \(0, 1\)"),
    ({"budgets": True, "cells": "edges"}, "cells must be one of corners, all"),
    ({"lrs": [1e-3, 1e-3, 2e-3]}, "at least 3 distinct rates, got 2"),
    ({"tokens": 0}, "the tuning token budget must be a positive whole number")])
def test_bad_options_are_refused_before_any_training(tmp_path, options, message):
    with pytest.raises(UsageError, match=message):
        scaling.tune(scaling.parse_config(MICRO), runs_dir=tmp_path / "runs", **options)
    assert not (tmp_path / "runs").exists()
