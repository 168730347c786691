"""Replicates (train.seeds): each planned run trained once per seed on the same tokens, and the fit's
pure error measured from them."""

import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from scaling.errors import UsageError
from scaling.laws import analysis
from scaling.laws.fitting import readers
from scaling.runs import store
from scaling.sweeps.driver import run_sweep
from scaling.sweeps.plan import plan
from tests.conftest import MICRO, MICRO_RUNS, micro_config


def replicated(seeds):
    return micro_config(train={**MICRO["train"], "seeds": seeds})


def test_a_replicate_is_the_same_run_with_another_seed():
    single = plan(micro_config())
    runs = plan(replicated([0, 1]))
    assert len(runs) == 2 * MICRO_RUNS
    first, second = runs[:MICRO_RUNS], runs[MICRO_RUNS:]
    # The data seed's runs keep their ids: a store trained before replicates is reused.
    assert [r.run_id for r in first] == [r.run_id for r in single]
    assert all(r.run_id.endswith("-s1") and r.spec.seed == 1 for r in second)
    assert {r.run_id for r in second}.isdisjoint(r.run_id for r in first)
    for a, b in zip(first, second):
        assert (a.spec.tokens, a.spec.lr, a.spec.model, a.n_params_total) == \
            (b.spec.tokens, b.spec.lr, b.spec.model, b.n_params_total)


@pytest.mark.parametrize("seeds", [[0, 0], [], [-1], [2**32]])
def test_bad_seeds_are_refused(seeds):
    with pytest.raises(UsageError, match="seeds"):
        replicated(seeds)


def test_replicates_train_on_the_same_tokens_and_give_the_pure_error(micro_sweep, tmp_path, cache_dir):
    _, first = micro_sweep
    shutil.copytree(first.sweep_dir, tmp_path / "micro", ignore=shutil.ignore_patterns(store.LOCK, store.TABLE_LOCK))
    again = run_sweep(replicated([0, 1]), tmp_path, cache_dir)
    assert len(again.trained) == MICRO_RUNS and len(again.skipped) == MICRO_RUNS   # seed 0's runs are reused
    table = store.read_runs(tmp_path / "micro").sort_values("run_id")
    assert sorted(table["seed"].astype(int)) == [0] * MICRO_RUNS + [1] * MICRO_RUNS
    pairs = table.assign(cell=table["run_id"].str.replace("-s1", "").str.rsplit("-", n=1).str[0])
    for _, cell in pairs.groupby("cell"):
        assert len(cell) == 2
        assert cell["tokens"].nunique() == 1 and cell["unique_tokens"].nunique() == 1
        a, b = cell["final_val_loss"].astype(float)
        assert a != b                                      # another initialisation and batch order
    configs = [yaml.safe_load((tmp_path / "micro" / rid / store.CONFIG).read_text()) for rid in table["run_id"]]
    assert len({c["token_cache"] for c in configs}) == 1   # one token cache: the same tokens

    fit = analysis.fit_data(readers.from_runs(tmp_path / "micro"), bootstrap=0, backtest=False)
    assert fit.lack_of_fit["replicated_cells"] == MICRO_RUNS
    spread = pd.to_numeric(pairs["final_val_loss"]).groupby(pairs["cell"]).apply(lambda x: np.log(x).std(ddof=1))
    assert fit.lack_of_fit["pure_error_rms"] == pytest.approx(np.sqrt(np.mean(spread ** 2)), rel=1e-9)
    assert any(t["by"] == "replicates" for t in fit.lack_of_fit["tests"])
