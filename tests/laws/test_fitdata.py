"""scaling.laws.fitting.fitdata: loaders (run store, CSV, parquet, packaged dataset), filters, and their errors."""

import json

import numpy as np
import pandas as pd
import pytest

from scaling.errors import UsageError
from scaling.laws.fitting import fitdata, readers, selection
from scaling.laws.forms.law import Law
from scaling.runs import store

CHINCHILLA_CSV = readers.data_file("chinchilla.csv")
LAW = Law(E=2.0, A=300.0, B=900.0, alpha=0.3, beta=0.3)


def write_store(root, runs):
    """A run store as scaling.runs.store lays it out: <run-id>/config.yaml and, once ended, summary.json."""
    sweep = root / "mini"
    sweep.mkdir()
    for run in runs:
        run_dir = sweep / run["run_id"]
        run_dir.mkdir()
        (run_dir / store.CONFIG).write_text(f"name: mini\nrun_id: {run['run_id']}\n")
        if run.get("status") is not None:
            store.write_json(run_dir / store.SUMMARY, run)
    return sweep


def finished_run(run_id, n_non_emb, tokens, loss=None):
    n_total = n_non_emb + 20_000
    return {"run_id": run_id, "status": "finished", "n_params_total": n_total,
            "n_params_non_embedding": n_non_emb, "tokens": tokens, "flops_6nd": 6 * n_non_emb * tokens,
            "final_val_loss": float(LAW.loss(n_non_emb, tokens)) if loss is None else loss,
            "reason": None}


@pytest.fixture
def sweep_dir(tmp_path):
    runs = [finished_run(f"d{n}-t{t:.0e}", n, t) for n in (10_000, 40_000, 160_000) for t in (1e6, 4e6)]
    runs += [
        {"run_id": "d640-diverged", "status": "diverged", "reason": "loss was NaN at step 120",
         "n_params_total": 660_000, "n_params_non_embedding": 640_000, "tokens": 1e6},
        {"run_id": "d640-failed", "status": "failed", "reason": "CUDA out of memory"},
        {"run_id": "d640-running"},      # config.yaml only: interrupted or still running
    ]
    return write_store(tmp_path, runs)


# ----------------------------------------------------------------------------- packaged dataset

def test_chinchilla_dataset_is_the_245_runs_with_d_from_compute():
    data = readers.from_dataset("chinchilla")
    raw = pd.read_csv(CHINCHILLA_CSV)
    assert len(data) == 245 and data.ids == tuple(range(245))
    np.testing.assert_array_equal(data.n, raw["Model Size"].to_numpy())
    np.testing.assert_allclose(data.d, raw["Training FLOP"] / (6 * raw["Model Size"]), rtol=1e-15)
    np.testing.assert_allclose(data.compute, raw["Training FLOP"], rtol=1e-12)
    assert data.param_convention == "total" and "Besiroglu" in data.source
    assert len(data.digest) == 64 and data.digest == fitdata.digest_arrays(data.n, data.d, data.loss)
    assert data.dropped == ()


def test_drop_highest_loss_drops_those_rows_and_records_them():
    data = readers.from_dataset("chinchilla")
    kept = selection.apply_filters(data, drop_highest_loss=5)
    assert len(kept) == 240
    worst = set(np.argsort(-data.loss, kind="stable")[:5].tolist())
    assert {d.id for d in kept.dropped} == worst
    assert all("highest losses" in d.reason for d in kept.dropped)
    assert kept.loss.max() < min(data.loss[i] for i in worst)
    assert kept.filters == {"drop_highest_loss": 5, "min_tokens_per_param": None, "min_tokens": None}
    assert kept.digest != data.digest
    assert kept.dropped[0].to_dict() == {"id": kept.dropped[0].id, "reason": kept.dropped[0].reason}


def test_threshold_filters():
    data = readers.from_dataset("chinchilla")
    tpp = selection.apply_filters(data, min_tokens_per_param=10.0)
    assert len(tpp) == int((data.d / data.n >= 10).sum()) and (tpp.d / tpp.n >= 10).all()
    tok = selection.apply_filters(data, min_tokens=1e10)
    assert len(tok) == int((data.d >= 1e10).sum()) and tok.d.min() >= 1e10
    assert all("tokens below the minimum" in d.reason for d in tok.dropped)
    both = selection.apply_filters(data, min_tokens=1e10, drop_highest_loss=3)
    assert len(both) == len(tok) - 3


@pytest.mark.parametrize("kwargs, message", [
    ({"drop_highest_loss": -1}, "whole number >= 0"),
    ({"drop_highest_loss": 245}, "would drop all 245"),
    ({"min_tokens_per_param": 0.0}, "the minimum tokens per parameter must be a positive number"),
    ({"min_tokens": float("nan")}, "the minimum tokens must be a positive number"),
])
def test_bad_filters(kwargs, message):
    with pytest.raises(UsageError, match=message):
        selection.apply_filters(readers.from_dataset("chinchilla"), **kwargs)


def test_unknown_dataset():
    with pytest.raises(UsageError, match="unknown dataset 'pile'; known: chinchilla"):
        readers.from_dataset("pile")


# ----------------------------------------------------------------------------- tables

def _frame(rows=8):
    n = np.geomspace(1e7, 1e9, rows)
    d = 20 * n
    return pd.DataFrame({"params": n, "tokens": d, "flops": 6 * n * d, "val": LAW.loss(n, d)})


def test_csv_and_parquet_with_tokens_or_compute_give_the_same_points(tmp_path):
    frame = _frame()
    frame.to_csv(tmp_path / "p.csv", index=False)
    frame.to_parquet(tmp_path / "p.parquet")
    a = readers.from_table(tmp_path / "p.csv", n_col="params", loss_col="val", d_col="tokens")
    b = readers.from_table(tmp_path / "p.parquet", n_col="params", loss_col="val", d_col="tokens")
    c = readers.from_table(tmp_path / "p.csv", n_col="params", loss_col="val", c_col="flops")
    assert a.digest == b.digest
    np.testing.assert_allclose(c.d, a.d, rtol=1e-12)
    assert a.source == f"table {tmp_path / 'p.csv'}" and a.param_convention is None


def test_the_packaged_csv_loads_as_a_table_with_the_chinchilla_defaults():
    assert readers.from_table(CHINCHILLA_CSV).digest == readers.from_dataset("chinchilla").digest


def test_missing_column_names_it_and_lists_those_present(tmp_path):
    _frame().to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(UsageError) as exc:
        readers.from_table(tmp_path / "p.csv", n_col="N", loss_col="val", d_col="tokens")
    msg = str(exc.value)
    assert "'N' (for N)" in msg and "'params', 'tokens', 'flops', 'val'" in msg
    # Not named: found by the conventional names ('tokens' is D), or every one missing said at once.
    assert readers.from_table(tmp_path / "p.csv", n_col="params", loss_col="val").d.tolist() == _frame().tokens.tolist()
    _frame().rename(columns={"tokens": "seen", "flops": "spent"}).to_csv(tmp_path / "q.csv", index=False)
    with pytest.raises(UsageError, match="no column for D or C \\(under none of 'tokens', .*'Training FLOP'\\); "
                                         "the columns present are: 'params', 'seen', 'spent', 'val'"):
        readers.from_table(tmp_path / "q.csv", n_col="params", loss_col="val")


@pytest.mark.parametrize("column, values, expect", [
    ("val", {3: -1.0}, "column 'val' must be positive and finite, but 1 of 8 rows are not \\(first at row index 3"),
    ("tokens", {2: 0.0, 5: 0.0}, "column 'tokens' .* 2 of 8 rows .*first at row index 2"),
    ("params", {6: np.inf}, "column 'params' .* 1 of 8 rows .*row index 6"),
    ("val", {1: "abc"}, "column 'val' .* 1 of 8 rows .*row index 1: 'abc'"),
    ("val", {4: None}, "column 'val' .* 1 of 8 rows .*row index 4: nan"),
])
def test_non_positive_or_non_finite_values_are_named(tmp_path, column, values, expect):
    frame = _frame().astype(object)
    for row, v in values.items():
        frame.loc[row, column] = v
    frame.to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(UsageError, match=expect):
        readers.from_table(tmp_path / "p.csv", n_col="params", loss_col="val", d_col="tokens")


def test_table_file_errors(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        readers.from_table(tmp_path / "none.csv")
    (tmp_path / "p.xlsx").write_text("x")
    with pytest.raises(UsageError, match="expected a .csv or .parquet file"):
        readers.from_table(tmp_path / "p.xlsx")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(UsageError, match="cannot read"):
        readers.from_table(tmp_path / "bad.parquet")
    _frame().to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(UsageError, match="not both"):
        readers.from_table(tmp_path / "p.csv", n_col="params", loss_col="val", d_col="tokens", c_col="flops")
    (tmp_path / "empty.csv").write_text("params,tokens,val\n")
    with pytest.raises(UsageError, match="no rows"):
        readers.from_table(tmp_path / "empty.csv", n_col="params", loss_col="val", d_col="tokens")


# ----------------------------------------------------------------------------- fittable

def test_too_few_points_for_the_free_parameters(tmp_path):
    frame = _frame(rows=4)
    frame.to_csv(tmp_path / "p.csv", index=False)
    data = readers.from_table(tmp_path / "p.csv", n_col="params", loss_col="val", d_col="tokens")
    with pytest.raises(UsageError, match="4 point\\(s\\), fewer than the 5 free parameters"):
        selection.check_fittable(data)
    selection.check_fittable(data, fixed_E=2.0)          # 4 points, 4 free parameters with E fixed
    three = selection.apply_filters(data, drop_highest_loss=1)
    with pytest.raises(UsageError, match="3 point\\(s\\) after filters, fewer than the 4 free parameters "
                                         "of the fit with E fixed"):
        selection.check_fittable(three, fixed_E=2.0)


def test_a_single_model_size_is_refused(tmp_path):
    frame = _frame()
    frame["params"] = 1e8
    frame.to_csv(tmp_path / "p.csv", index=False)
    data = readers.from_table(tmp_path / "p.csv", n_col="params", loss_col="val", d_col="tokens")
    with pytest.raises(UsageError, match="all 8 points have the same model size \\(N = 1e\\+08\\)"):
        selection.check_fittable(data)


# ----------------------------------------------------------------------------- run store

def test_from_runs_keeps_finished_runs_and_lists_the_others(sweep_dir):
    data = readers.from_runs(sweep_dir, param_convention="non_embedding")   # the count LAW was written in
    assert len(data) == 6 and data.param_convention == "non_embedding"
    assert set(data.ids) == {f"d{n}-t{t:.0e}" for n in (10_000, 40_000, 160_000) for t in (1e6, 4e6)}
    np.testing.assert_allclose(data.loss, LAW.loss(data.n, data.d))
    assert sorted((d.id, d.reason) for d in data.dropped) == [
        ("d640-diverged", "diverged: loss was NaN at step 120"),
        ("d640-failed", "failed: CUDA out of memory"),
        ("d640-running", "incomplete: no summary.json: interrupted or running"),
    ]
    total = readers.from_runs(sweep_dir)                 # Chinchilla's count, the default
    np.testing.assert_array_equal(total.n, data.n + 20_000)
    assert total.param_convention == "total" and total.digest != data.digest
    assert data.source == f"runs {sweep_dir}"


def test_from_runs_errors(tmp_path, sweep_dir):
    with pytest.raises(UsageError, match="no run store"):
        readers.from_runs(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="has no runs"):
        readers.from_runs(tmp_path / "empty")
    with pytest.raises(UsageError, match="the parameter convention must be one of non_embedding, total"):
        readers.from_runs(sweep_dir, param_convention="embedding")
    # A finished run whose summary lacks the loss is named, not silently dropped.
    summary = sweep_dir / "d10000-t1e+06" / store.SUMMARY
    record = json.loads(summary.read_text())
    record["final_val_loss"] = None
    store.write_json(summary, record)
    with pytest.raises(UsageError, match="1 finished run\\(s\\) have no positive, finite 'final_val_loss'.*"
                                         "run d10000-t1e\\+06"):
        readers.from_runs(sweep_dir)


def test_from_runs_with_no_finished_run(tmp_path):
    sweep = write_store(tmp_path, [{"run_id": "a", "status": "diverged", "reason": "NaN"}, {"run_id": "b"}])
    with pytest.raises(UsageError, match="none of its 2 runs finished \\(1 diverged, 1 incomplete\\)"):
        readers.from_runs(sweep)
