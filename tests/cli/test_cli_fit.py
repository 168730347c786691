"""`scaling fit` and fit.json: the schema, byte-identical reruns, loading, and bad input (exit 2)."""

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from scaling.cli import main
from scaling.errors import UsageError
from scaling.laws.fitting import readers, selection
from scaling.laws.forms.law import Law
from scaling.laws.results import fit_file
from scaling.laws.results import lawfit as results
from scaling.runs import store
from tests.conftest import MICRO_RUNS

SCHEMA = {
    "kind", "version", "seed", "data", "options", "params", "allocation", "reference_compute",
    "tokens_per_param_at_reference", "ci", "objective", "n_starts_at_optimum", "residual_rms",
    "evidence", "limitations", "approaches", "kaplan", "diagnostics", "verdict", "compute", "lack_of_fit",
    "holdout", "backtest", "form",
}
DATA_KEYS = {"source", "n_points", "digest", "param_convention", "dropped", "filters", "n_range",
             "d_range", "c_range", "provenance", "n_budgets", "loss_range"}
OPTION_KEYS = {"delta", "grid", "n_starts", "fixed_E", "bootstrap"}
CI_KEYS = {"level", "n_resamples", "E", "A", "B", "alpha", "beta", "a", "b", "G", "tokens_per_param", "widened_by"}
REFERENCE = {"A": 477.8, "B": 2143.0, "E": 1.8172, "alpha": 0.3473, "beta": 0.3672}
LAW = Law(E=2.0, A=300.0, B=900.0, alpha=0.3, beta=0.35)
CHINCHILLA_ARGS = ["fit", "--dataset", "chinchilla", "--drop-highest-loss", "5"]


@pytest.fixture(scope="module")
def chinchilla_cli(tmp_path_factory):
    """The issue's command, in a fresh interpreter: (completed process, fit.json path)."""
    out = tmp_path_factory.mktemp("fit-chinchilla")
    proc = subprocess.run([sys.executable, "-m", "scaling", *CHINCHILLA_ARGS, "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    return proc, out / "fit.json"


def test_chinchilla_fit_json_has_the_schema(chinchilla_cli):
    proc, path = chinchilla_cli
    assert proc.returncode == 0, proc.stderr
    fit = json.loads(path.read_text())
    assert set(fit) == SCHEMA
    assert fit["kind"] == "scaling.fit" and fit["version"] == 1 and fit["seed"] == 0
    assert set(fit["data"]) == DATA_KEYS and set(fit["options"]) == OPTION_KEYS
    assert set(fit["ci"]) == CI_KEYS and set(fit["params"]) == {"E", "A", "B", "alpha", "beta"}
    assert set(fit["allocation"]) == {"a", "b", "G"}
    assert fit["data"]["provenance"] == {"kind": "dataset", "location": "chinchilla"}
    assert fit["holdout"]["fraction"] == 0.2 and len(fit["holdout"]["rows"]) == 48
    # The backtest: every factor cut (the points reach 30x below their top band); the 12 runs of the
    # top band with at least 5 tokens per parameter predicted at each.
    cuts = fit["backtest"]["cuts"]
    assert [c["factor"] for c in cuts] == [2.0, 3.0, 10.0, 30.0] and all(c["reason"] is None for c in cuts)
    assert all(c["n_test"] == len(c["errors"]) == 12 and 0 <= c["covered"] <= 12 for c in cuts)
    assert fit["backtest"]["extrapolation"]["growth"] > 0 and fit["backtest"]["law"]["E"] > 0
    # The fitted law predicts and plans; no other form is fitted unless asked (--forms, --form).
    assert fit["form"] == "chinchilla" and "forms" not in fit
    assert fit["data"]["n_budgets"] > 3 and 0 < fit["data"]["loss_range"][0] < fit["data"]["loss_range"][1]
    # A table carries one count: C = 6 N D of its own N, exactly Chinchilla's constraint.
    assert fit["compute"] == {"measure": "6N", "kappa": 1.0, "gamma": 1.0, "max_error": 0.0}
    # Hoffmann et al.'s Table 2 side by side: a table has no curves, so no Approach 1.
    approaches = fit["approaches"]
    assert approaches["approach_1"] is None
    assert approaches["approach_3"]["a"] == fit["allocation"]["a"]
    assert 0.4 < approaches["approach_2"]["a"] < 0.6
    assert set(fit["kaplan"]) == {"param_convention", "L_N", "L_D", "L_C", "reasons"}
    # The points determine the law (Besiroglu et al.'s refit), but its largest runs move a: caution.
    assert fit["verdict"]["verdict"] == "use with caution" and fit["verdict"]["reasons"]
    assert {c["status"] for c in fit["diagnostics"]} == {"pass", "caution"}
    assert fit["data"]["n_points"] == 240 and len(fit["data"]["dropped"]) == 5
    assert all(set(d) == {"id", "reason"} for d in fit["data"]["dropped"])
    # the digest of the points in the canonical order the fit takes them in (row order changes nothing)
    assert fit["data"]["digest"] == selection.apply_filters(readers.from_dataset("chinchilla"),
                                                          drop_highest_loss=5).canonical().digest
    assert fit["data"]["param_convention"] == "total"
    assert fit["options"] == {"delta": 1e-3, "grid": "hoffmann", "n_starts": 4500, "fixed_E": None,
                              "bootstrap": 1000}
    for name, value in REFERENCE.items():
        assert fit["params"][name] == pytest.approx(value, rel=5e-3)
    assert fit["ci"]["n_resamples"] == 1000 and fit["ci"]["level"] == 0.95
    assert fit["ci"]["alpha"][0] < 0.348 < fit["ci"]["alpha"][1]
    assert fit["ci"]["beta"][0] < 0.366 < fit["ci"]["beta"][1]
    law = Law.from_dict(fit["params"])
    assert fit["allocation"]["a"] == law.a and fit["allocation"]["G"] == law.G
    assert fit["reference_compute"] == pytest.approx(fit["data"]["c_range"][1])
    assert fit["tokens_per_param_at_reference"] == float(law.tokens_per_param(fit["reference_compute"]))
    assert any("240 points" in e for e in fit["evidence"])
    assert any("starts ended at the optimum" in e for e in fit["evidence"])
    assert any("extrapolation" in lim for lim in fit["limitations"])
    assert any("tokenizer" in lim for lim in fit["limitations"])
    # The summary, the decision first in at most 15 lines: the verdict, the law that predicts and plans,
    # exponents with intervals, the allocation, how far it was tested, time, where it went, what next.
    lines = proc.stdout.splitlines()
    assert len(lines) <= 15 and lines[0].startswith("verdict: USE WITH CAUTION")
    for text in ("predicts and plans by the chinchilla form's law", "alpha = 0.3473 [0.3", "tokens per parameter",
                 "3x beyond its largest run", "tested: predicts runs 30x beyond", "fitted in", str(path),
                 f"next: scaling plan --fit {path.parent} --compute C"):
        assert text in proc.stdout


def test_same_inputs_and_seed_give_a_byte_identical_file(chinchilla_cli, tmp_path, capsys):
    _, first = chinchilla_cli
    assert main([*CHINCHILLA_ARGS, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "fit.json").read_bytes() == first.read_bytes()
    text = first.read_text()
    assert text == fit_file.dumps_fit(results.LawFit.from_json(json.loads(text)))  # nothing rounded away


def test_load_fit_round_trip_and_errors(chinchilla_cli, tmp_path):
    _, path = chinchilla_cli
    fit = json.loads(path.read_text())
    loaded = fit_file.load_fit(path)
    law = loaded.law
    assert law == Law.from_dict(fit["params"])
    assert fit_file.dumps_fit(loaded) == path.read_text()          # LawFit <-> fit.json, byte for byte
    assert loaded.interval("alpha") == tuple(fit["ci"]["alpha"])
    assert loaded.tokens_per_param == fit["tokens_per_param_at_reference"]
    assert fit_file.load_fit(path.parent).law == law               # a folder means its fit.json
    with pytest.raises(UsageError, match="does not exist"):
        fit_file.load_fit(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        fit_file.load_fit(bad)
    bad.write_text(json.dumps({"kind": "something else", "params": fit["params"]}))
    with pytest.raises(UsageError, match="not a fit.json \\(\"kind\" is 'something else'"):
        fit_file.load_fit(bad)
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(UsageError, match="not a fit.json"):
        fit_file.load_fit(bad)
    # A hand-written law: params only.
    bad.write_text(json.dumps({"params": fit["params"]}))
    assert fit_file.load_fit(bad).law == law
    bad.write_text(json.dumps({"params": {**fit["params"], "A": -1}}))
    with pytest.raises(UsageError, match="E, A, B > 0"):
        fit_file.load_fit(bad)
    bad.write_text(json.dumps({**fit, "params": {"E": 1.0}}))
    with pytest.raises(UsageError, match="no 'params' with all of E, A, B, alpha, beta"):
        fit_file.load_fit(bad)
    bad.write_text(json.dumps({**fit, "version": 2}))
    with pytest.raises(UsageError, match="version 2"):
        fit_file.load_fit(bad)
    # Sections of the wrong type are named, not met later as AttributeError in a consumer.
    for key, value, message in (("ci", [1], "'ci' must be dict"), ("data", "x", "'data' must be dict"),
                                ("approaches", 3, "'approaches' must be dict"),
                                ("allocation", {"a": "x"}, "allocation 'a' must be a finite number")):
        bad.write_text(json.dumps({**fit, key: value}))
        with pytest.raises(UsageError, match=message):
            fit_file.load_fit(bad)


def _law_store(root, sizes=(2e5, 5e5, 1.2e6, 3e6, 8e6), ratios=(5, 10, 20, 40, 80)):
    """A run store whose losses follow LAW exactly, plus one diverged run."""
    sweep = root / "exact"
    sweep.mkdir()
    for n in sizes:
        for k in ratios:
            run_id = f"n{n:.1e}-r{k}"
            (sweep / run_id).mkdir()
            (sweep / run_id / store.CONFIG).write_text("name: exact\n")
            store.write_json(sweep / run_id / store.SUMMARY, {
                "run_id": run_id, "status": "finished", "n_params_non_embedding": n,
                "n_params_total": n * 1.5, "tokens": n * k, "flops_6nd": 6 * n * n * k,
                "final_val_loss": float(LAW.loss(n, n * k)), "reason": None})
    (sweep / "big").mkdir()
    (sweep / "big" / store.CONFIG).write_text("name: exact\n")
    store.write_json(sweep / "big" / store.SUMMARY, {"run_id": "big", "status": "diverged",
                                                     "reason": "loss spiked past 10 at step 80"})
    return sweep


def test_fit_a_run_store_recovers_its_law(tmp_path, capsys):
    sweep = _law_store(tmp_path)
    assert main(["fit", str(sweep), "--param-convention", "non_embedding", "--bootstrap", "0",
                 "--out", str(tmp_path / "out"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    fit = json.loads((tmp_path / "out" / "fit.json").read_text())
    assert printed == fit
    assert fit["data"]["n_points"] == 25 and fit["data"]["param_convention"] == "non_embedding"
    assert fit["data"]["dropped"] == [{"id": "big", "reason": "diverged: loss spiked past 10 at step 80"}]
    for name in ("E", "alpha", "beta"):
        assert fit["params"][name] == pytest.approx(getattr(LAW, name), rel=1e-4)
    assert fit["ci"] is None and fit["options"]["bootstrap"] == 0
    assert any("no bootstrap" in lim for lim in fit["limitations"])
    assert fit["n_starts_at_optimum"] > 100          # exact data: objective ~0, still counted


def test_default_out_is_fits_name_and_total_convention(tmp_path, monkeypatch, capsys):
    sweep = _law_store(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["fit", str(sweep), "--param-convention", "total", "--bootstrap", "0"]) == 0
    fit = json.loads((tmp_path / "fits" / "exact" / "fit.json").read_text())
    assert fit["data"]["param_convention"] == "total"
    assert fit["data"]["n_range"] == [2e5 * 1.5, 8e6 * 1.5]
    assert "wrote fits/exact/fit.json" in capsys.readouterr().out


def test_csv_with_fixed_E_and_filters(tmp_path, capsys):
    n = np.repeat(np.geomspace(1e7, 1e9, 5), 4)
    d = n * np.tile([5.0, 10.0, 20.0, 40.0], 5)
    pd.DataFrame({"N": n, "D": d, "L": LAW.loss(n, d)}).to_csv(tmp_path / "pts.csv", index=False)
    args = ["fit", "--csv", str(tmp_path / "pts.csv"), "--n-col", "N", "--d-col", "D", "--loss-col", "L",
            "--fixed-E", "2.0", "--min-tokens-per-param", "6", "--bootstrap", "20", "--seed", "3",
            "--out", str(tmp_path / "o")]
    assert main(args) == 0
    fit = json.loads((tmp_path / "o" / "fit.json").read_text())
    assert fit["params"]["E"] == 2.0 and fit["options"]["fixed_E"] == 2.0 and fit["seed"] == 3
    assert fit["options"]["n_starts"] == 900
    assert fit["data"]["n_points"] == 15 and fit["data"]["filters"]["min_tokens_per_param"] == 6.0
    assert fit["params"]["alpha"] == pytest.approx(LAW.alpha, rel=1e-3)
    assert fit["ci"]["n_resamples"] == 20
    assert any("E was fixed at 2" in lim for lim in fit["limitations"])


def test_loss_rising_with_N_gives_no_allocation_and_says_why(tmp_path, capsys):
    n = np.repeat(np.geomspace(1e6, 1e8, 4), 3)
    d = n * np.tile([5.0, 10.0, 20.0], 4)
    loss = 3.0 + 1e-8 * n + 0.01 * np.random.default_rng(0).standard_normal(n.size)
    pd.DataFrame({"N": n, "D": d, "L": loss}).to_csv(tmp_path / "up.csv", index=False)
    assert main(["fit", "--csv", str(tmp_path / "up.csv"), "--n-col", "N", "--d-col", "D", "--loss-col", "L",
                 "--bootstrap", "30", "--out", str(tmp_path / "o")]) == 0
    fit = json.loads((tmp_path / "o" / "fit.json").read_text())
    assert fit["params"]["alpha"] < 0
    assert fit["allocation"] == {"a": None, "b": None, "G": None}
    assert fit["tokens_per_param_at_reference"] is None and fit["ci"]["a"] == [None, None]
    assert any("no compute-optimal allocation" in lim for lim in fit["limitations"])
    assert "a = undefined" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["fit"], "give exactly one data source: RUNS_DIR, --csv FILE or --dataset NAME"),
    (["fit", "runs/x", "--dataset", "chinchilla"], "exactly one data source.*\\(got RUNS_DIR, --dataset\\)"),
    (["fit", "--dataset", "pile"], "unknown dataset 'pile'; known: chinchilla"),
    (["fit", "--dataset", "chinchilla", "--n-col", "N"], "--n apply to --csv only"),
    (["fit", "--dataset", "chinchilla", "--param-convention", "total"], "--param-convention applies to a run store"),
    (["fit", "--dataset", "chinchilla", "--drop-highest-loss", "300"], "would drop all 245"),
    (["fit", "--dataset", "chinchilla", "--delta", "0"], "--delta must be a positive, finite number"),
    (["fit", "--dataset", "chinchilla", "--fixed-E", "-1"], "--fixed-e must be a positive"),
    (["fit", "--dataset", "chinchilla", "--bootstrap", "-1"], "--bootstrap must be a whole number >= 0"),
    (["fit", "--dataset", "chinchilla", "--reference-compute", "nan"], "--reference-compute must be"),
    (["fit", "--dataset", "chinchilla", "--min-tokens", "1e13"], "0 point\\(s\\) after filters, fewer than the 5"),
    (["fit", "/nonexistent/runs/sweep"], "no run store at /nonexistent/runs/sweep"),
    (["fit", "--dataset", "chinchilla", "--E-prior", "1.7"], "--E-prior takes MEAN,SD"),
    (["fit", "--dataset", "chinchilla", "--E-prior", "1.7,-0.1"], "--E-prior's SD must be a positive"),
    (["fit", "--dataset", "chinchilla", "--E-prior", "1.7,0.1", "--E-from", "x.json"], "--E-prior or --E-from"),
    (["fit", "--dataset", "chinchilla", "--E-from", "/nonexistent/fit.json"], "/nonexistent/fit.json"),
])
def test_bad_input_exits_2_with_the_problem_named(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("scaling fit: error: ")
    assert re.search(message, err), err


def test_a_table_s_common_column_names_need_no_flags(tmp_path, capsys):
    """N, D, loss (or params, tokens, val_loss; or C instead of D) are found as `scaling import`
    finds them; the new flags and the old spellings name the same columns; what is not found is
    named all at once, with the columns present."""
    law = Law(E=1.8, A=400.0, B=2000.0, alpha=0.34, beta=0.37)
    n, d = np.meshgrid(np.geomspace(1e7, 1e9, 4), np.geomspace(1e9, 1e11, 4))
    table = pd.DataFrame({"N": n.ravel(), "D": d.ravel(), "loss": law.loss(n.ravel(), d.ravel())})
    table.to_csv(tmp_path / "plain.csv", index=False)
    table.rename(columns={"N": "params", "D": "tokens", "loss": "val_loss"}).to_csv(tmp_path / "log.csv", index=False)
    table.assign(C=6 * table.N * table.D).drop(columns="D").to_csv(tmp_path / "compute.csv", index=False)
    alphas = []
    for name, flags in (("plain", []), ("log", []), ("compute", []),
                        ("log", ["--n", "params", "--d", "tokens", "--loss", "val_loss"]),
                        ("log", ["--n-col", "params", "--d-col", "tokens", "--loss-col", "val_loss"])):
        out = tmp_path / f"fit-{len(alphas)}"
        assert main(["fit", "--csv", str(tmp_path / f"{name}.csv"), *flags, "--bootstrap", "0", "--out", str(out)]) == 0
        alphas.append(json.loads((out / "fit.json").read_text())["params"]["alpha"])
    assert alphas == pytest.approx([0.34] * 5, abs=1e-4)
    table.rename(columns={"N": "size", "D": "seen"}).to_csv(tmp_path / "odd.csv", index=False)
    capsys.readouterr()
    assert main(["fit", "--csv", str(tmp_path / "odd.csv"), "--bootstrap", "0", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no column for N (under none of 'n_params'" in err and "; D or C (under none of 'tokens'" in err
    assert "the columns present are: 'size', 'seen', 'loss'" in err and len(err.splitlines()) == 1


def test_bad_csv_exits_2_without_a_traceback(tmp_path):
    pd.DataFrame({"N": [1e7, 1e8, -5.0, 1e9, 2e9, 3e9], "tokens": [1e9] * 6, "loss": [3.0] * 6}).to_csv(
        tmp_path / "bad.csv", index=False)
    proc = subprocess.run([sys.executable, "-m", "scaling", "fit", "--csv", str(tmp_path / "bad.csv"),
                           "--n-col", "N", "--d-col", "tokens", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "column 'N' must be positive and finite, but 1 of 6 rows are not (first at row index 2: -5.0)" \
        in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "scaling", "fit", "--csv", str(tmp_path / "bad.csv"),
                           "--n-col", "Model"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "'Model' (for N)" in proc.stderr and "'N', 'tokens', 'loss'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_fit_of_a_real_sweep_reports_all_three_approaches(micro_sweep, tmp_path, capsys):
    """The micro sweep's own store: Approach 1 reads its training curves from metrics.jsonl."""
    _, sweep = micro_sweep
    assert main(["fit", str(sweep.sweep_dir), "--bootstrap", "20", "--out", str(tmp_path)]) == 0
    fit = json.loads((tmp_path / "fit.json").read_text())
    assert fit["data"]["n_points"] == MICRO_RUNS and fit["data"]["param_convention"] == "total"
    envelope = fit["approaches"]["approach_1"]
    assert envelope["method"] == "envelope"
    # Two model sizes cannot bracket an optimum: no slope, and the reason says so.
    assert envelope["a"] is None and "need at least 3" in envelope["reason"]
    assert fit["approaches"]["approach_3"]["a_ci"] == fit["ci"]["a"]
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "fit.json")]) == 0
    assert "Approach 1 (envelope): no estimate: " + envelope["reason"] in capsys.readouterr().out
