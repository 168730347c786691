"""`scaling report`: figures from real (micro) runs, numbers equal to fit.json's, the hold-out
check on the store's largest runs, byte-identical reruns, self-contained HTML, the packaged
dataset, a table-sourced fit, broken stores, bad input.

The run-store reports are drawn from the shared micro sweep (tests/conftest.py), with a handful
of bootstrap resamples to stay fast.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import importlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from scaling.cli import main
from scaling.laws.forms.law import Law
from scaling.report.inputs import load_inputs
from scaling.report.report import build_report
from scaling.report.style import DPI
from scaling.runs import store
from tests.conftest import MICRO_RUNS

# Not "forms": `scaling fit` fits the other law forms only with --forms now, and the shared fit has none.
FIGURES = ("loss_curves", "context_curves", "final_loss", "isoflop", "frontiers", "residuals", "bootstrap",
           "task_metrics")
BOOT = "12"


def _run(argv) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def _table_row(md: str, first_cell: str) -> list[str]:
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row starting with {first_cell!r}")


def _number(cell: str, value: float, digits: int = 4) -> None:
    """A printed number equals `value` to the digits shown (`digits` significant, or decimals)."""
    half = 5.01 * 10.0 ** -digits          # half a unit in the last digit shown, relative (.4g) or absolute (.4f)
    assert float(cell) == pytest.approx(value, rel=half, abs=half / 10), (cell, value)


def _interval(cell: str, pair) -> None:
    """A printed interval equals fit.json's; where fit.json has none ([None, None] when too few
    resamples have an allocation) the report prints "-"."""
    if pair is None or None in pair:
        assert cell == "-", (cell, pair)
        return
    lo, hi = (c.strip() for c in cell.strip("[]").split(","))
    _number(lo, pair[0])
    _number(hi, pair[1])


def test_report_of_a_fit_draws_every_figure_from_the_runs(from_fit):
    stdout, out = from_fit
    md = (out / "report.md").read_text()
    for name in FIGURES:
        png, svg = out / "figures" / f"{name}.png", out / "figures" / f"{name}.svg"
        assert png.stat().st_size > 10_000 and svg.stat().st_size > 10_000, name
        image = imread(png)
        assert image.ndim == 3 and image.shape[2] == 4 and image.shape[0] >= 400 and image.shape[1] >= 800
        assert image[..., :3].std() > 0.05          # not a blank canvas
        assert svg.read_text().lstrip().startswith("<?xml")
        assert f"(figures/{name}.png)" in md and f"(figures/{name}.svg)" in md
    # Only the backtest's figure is not drawn (the micro store is too small for any cut, and its section says
    # so), and the forms' (a fit made without --forms has none).
    not_drawn = md[md.index("## Figures not drawn"):].split("\n## ")[0]
    assert [line for line in not_drawn.splitlines() if line.startswith("- ")] == [
        "- The backtest: each cut's predictions of the top budget's runs, with their intervals: no backtest cut "
        "could be made (see its section)",
        "- The law's forms side by side along compute, with their prediction intervals and backtests: no forms in "
        "this fit.json"]
    assert "backtest: no cut could be made" in md
    # Every run of the store is in the run table.
    assert md.count("| finished |") == MICRO_RUNS
    assert "wrote" in stdout and "report.md" in stdout


def test_report_numbers_are_fit_json_numbers(from_fit, fit_dir):
    """Each number of the report, parsed back, is the one `scaling fit` wrote to fit.json."""
    _, out = from_fit
    md = (out / "report.md").read_text()
    fit = json.loads((fit_dir / "fit.json").read_text())
    for name in ("E", "A", "B", "alpha", "beta"):
        row = _table_row(md, name)
        _number(row[1], fit["params"][name])
        _interval(row[2], fit["ci"][name])
    for name in ("a", "b", "G"):
        row = _table_row(md, name)
        _number(row[1], fit["allocation"][name])
        _interval(row[2], fit["ci"][name])
    row = _table_row(md, f"tokens_per_param at C = {fit['reference_compute']:.3g}")
    _number(row[1], fit["tokens_per_param_at_reference"])
    # The three approaches side by side, as fit.json has them.
    _number(_table_row(md, "Approach 3 (parametric fit)")[1], fit["approaches"]["approach_3"]["a"])
    a2 = _table_row(md, "Approach 2 (IsoFLOP)")[1]
    if fit["approaches"]["approach_2"]["a"] is None:
        assert a2 == "-"
    else:
        _number(a2, fit["approaches"]["approach_2"]["a"])
    # Evidence and limitations are fit.json's lists (the report adds after them).
    for line in fit["evidence"] + fit["limitations"]:
        assert f"- {line}\n" in md
    # The published comparison: Chinchilla's a = beta / (alpha + beta) = 0.28 / 0.62; and the plan.
    published = md[md.index("## Comparison with published laws"):]       # (the forms table has a chinchilla row too)
    assert float(_table_row(published, "chinchilla")[3].split()[0]) == pytest.approx(0.28 / 0.62, abs=5e-4)
    for where in ("at the largest run", "3x beyond", "10x beyond", "30x beyond"):
        assert _table_row(md, where)[2] == "law optimum"


def test_holdout_predicts_the_largest_runs_of_the_store(from_fit, micro_sweep):
    """The held-out runs are the store's top 20% by compute (runs.csv's flops_6nd), and each error
    printed is |predicted - observed| / observed with the observed loss of the run's summary."""
    stdout, out = from_fit
    _, sweep = micro_sweep
    table = store.read_runs(sweep.sweep_dir).sort_values("flops_6nd", ascending=False)
    k = round(0.2 * len(table))
    held = table.head(k)
    md = (out / "report.md").read_text()
    section = md.split("## Hold-out check")[1].split("\n## ")[0]
    errors = []
    for run in held.itertuples():
        row = _table_row(section, run.run_id)
        predicted, error = float(row[5]), float(row[6].rstrip("%")) / 100
        assert error == pytest.approx(abs(predicted - run.final_val_loss) / run.final_val_loss, abs=2e-4)
        line = next(ln for ln in stdout.splitlines() if ln.startswith(run.run_id))
        assert line.split()[-2:] == [row[5], row[6]]
        errors.append(error)
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| held-out")]
    assert len(rows) == k
    mean = re.search(r"Mean absolute relative error of the held-out predictions: ([0-9.]+)%", md).group(1)
    assert float(mean) / 100 == pytest.approx(np.mean(errors), abs=1e-4)
    assert f"mean absolute relative error: {mean}%" in stdout


# The law optimiser and the bootstrap, from the outside in: a whole fit, one fit of the law, one
# bootstrap, and the two L-BFGS loops everything above runs on (each module holds its own name).
OPTIMISERS = (("scaling.laws.analysis", "fit_data"), ("scaling.laws.fitting.fit", "fit_law"),
              ("scaling.laws.fitting.bootstrap", "bootstrap"), ("scaling.laws.fitting.fit", "lbfgs_in_chunks"),
              ("scaling.laws.fitting.bootstrap", "lbfgs_batched"))


def _count_optimiser_calls(monkeypatch) -> collections.Counter:
    """Wrap each of OPTIMISERS in a counter that still calls the real function (instrumentation:
    every number is still computed)."""
    calls = collections.Counter()
    for module, name in OPTIMISERS:
        real = getattr(importlib.import_module(module), name)

        def counted(*args, _real=real, _key=f"{module}.{name}", **kwargs):
            calls[_key] += 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(f"{module}.{name}", counted)
    return calls


def test_report_of_a_fit_refits_nothing_and_draws_fit_jsons_numbers(fit_dir, tmp_path, monkeypatch):
    """`scaling report FIT_DIR` calls no optimiser and no bootstrap: its bootstrap histograms are
    fit.bootstrap.csv's resamples, its hold-out table fit.json's "holdout", both to the last bit."""
    calls = _count_optimiser_calls(monkeypatch)
    rep = build_report(load_inputs(fit_dir))
    assert sum(calls.values()) == 0, dict(calls)
    fit = json.loads((fit_dir / "fit.json").read_text())
    assert rep.holdout.to_json() == fit["holdout"]
    csv = np.loadtxt(fit_dir / "fit.bootstrap.csv", delimiter=",", skiprows=2)
    samples = rep.fit.bootstrap_samples()
    assert samples["alpha"].tolist() == csv[:, 3].tolist() and samples["beta"].tolist() == csv[:, 4].tolist()
    assert len(csv) == fit["ci"]["n_resamples"] == int(BOOT)
    if np.isfinite(samples["a"]).all():
        lo, hi = np.percentile(samples["a"], [2.5, 97.5])
        assert (lo, hi) == pytest.approx(tuple(fit["ci"]["a"]), rel=1e-12)
    else:                       # a resample without an allocation: no interval, not one of the rest
        assert fit["ci"]["a"] == [None, None]
    assert not rep.inputs.notes and set(rep.figures) >= {"bootstrap", "residuals"}
    # Another hold-out fraction, asked for, is the one refit: the hold-out's, not the law's or the bootstrap's.
    other = build_report(load_inputs(fit_dir), holdout_fraction=0.1).holdout
    assert dict(calls) == {"scaling.laws.fitting.fit.fit_law": 1, "scaling.laws.fitting.fit.lbfgs_in_chunks": 1}
    assert other.fraction == 0.1 and other.n_train == fit["data"]["n_points"] - 1 and other.law is not None


@pytest.fixture(scope="module")
def fitted_here(micro_sweep, tmp_path_factory):
    """`scaling report RUNS --format html --bootstrap BOOT`: a report that fits the store itself, made
    once for the two tests that read it, with the optimiser calls it made (counted, still computed):
    (stdout, report folder, calls)."""
    _, sweep = micro_sweep
    out = tmp_path_factory.mktemp("fitted-here")
    with pytest.MonkeyPatch.context() as patch:
        calls = _count_optimiser_calls(patch)
        rc, stdout = _run(["report", str(sweep.sweep_dir), "--format", "html", "--bootstrap", BOOT, "--out", str(out)])
    assert rc == 0
    return stdout, out, collections.Counter(calls)


def test_report_of_a_run_store_fits_once_as_scaling_fit_does(counted_fit, fitted_here):
    """Fitted here, the report makes exactly the calls `scaling fit` makes (`counted_fit`, the same
    command's), and the same fit.json."""
    fit_folder, by_fit = counted_fit
    _, out, calls = fitted_here
    assert dict(calls) == dict(by_fit) and by_fit["scaling.laws.analysis.fit_data"] == 1
    assert (out / "fit.json").read_bytes() == (fit_folder / "fit.json").read_bytes()


def test_same_inputs_give_identical_files(from_fit, fit_dir, tmp_path):
    _, first = from_fit
    rc, _ = _run(["report", str(fit_dir), "--out", str(tmp_path)])
    assert rc == 0
    names = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert len(names) == 1 + 2 * len(FIGURES)
    for name in names:
        assert (first / name).read_bytes() == (tmp_path / name).read_bytes(), name
    assert b"<dc:date>" not in (first / "figures" / "frontiers.svg").read_bytes()


def test_html_report_fitted_here_is_self_contained(micro_sweep, fit_dir, from_fit, fitted_here):
    """`scaling report RUNS --format html`: fit.json equal to `scaling fit`'s, one HTML file with
    every figure embedded, the same numbers as the Markdown report of that fit."""
    _, sweep = micro_sweep
    stdout, tmp_path, _ = fitted_here
    assert f"wrote {tmp_path / 'report.html'}" in stdout
    assert (tmp_path / "fit.json").read_bytes() == (fit_dir / "fit.json").read_bytes()
    assert not (tmp_path / "report.md").exists()
    page = (tmp_path / "report.html").read_text()
    assert f"<code>scaling fit {sweep.sweep_dir} --bootstrap {BOOT} --seed 0</code> writes the same fit.json" in page
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", page)           # nothing fetched from outside
    assert "<script" not in page and "<link" not in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(FIGURES)
    for name in FIGURES:
        png = (tmp_path / "figures" / f"{name}.png").read_bytes()
        assert base64.b64encode(png).decode() in images
        assert imread(tmp_path / "figures" / f"{name}.png").shape[0] >= 4 * DPI
    md = (from_fit[1] / "report.md").read_text()
    for name in ("alpha", "beta", "a"):
        assert f"<td>{name}</td><td class=\"num\">{_table_row(md, name)[1]}</td>" in page


def test_report_of_the_packaged_dataset(tmp_path):
    """`scaling report --dataset chinchilla --drop-highest-loss 5`: Besiroglu et al.'s 240 points,
    their published refit (E 1.8172, alpha 0.3478, beta 0.3658) recovered, no training curves."""
    out = tmp_path / "report"
    rc, stdout = _run(["report", "--dataset", "chinchilla", "--drop-highest-loss", "5", "--bootstrap", "0",
                       "--out", str(out)])
    assert rc == 0 and "predict the 48 with the largest" in stdout
    md = (out / "report.md").read_text()
    fit = json.loads((out / "fit.json").read_text())
    assert fit["data"]["n_points"] == 240 and len(fit["data"]["dropped"]) == 5
    for name, published, tolerance in (("E", 1.8172, 0.01), ("alpha", 0.3478, 0.005), ("beta", 0.3658, 0.005)):
        assert fit["params"][name] == pytest.approx(published, abs=tolerance)
        _number(_table_row(md, name)[1], fit["params"][name])
    assert "240 points (not listed here; see the source)" in md
    assert "`scaling fit --dataset chinchilla --drop-highest-loss 5 --bootstrap 0 --seed 0` writes the same" in md
    drawn = sorted(p.stem for p in (out / "figures").glob("*.png"))
    assert drawn == ["backtest", "final_loss", "frontiers", "isoflop", "residuals"]     # no forms: fitted without them
    assert "Figures not drawn" in md and "no training curves" in md
    # The backtest, as fit.json records it: one row per factor, the farthest in the sentence above it.
    assert "## Backtest: how far beyond its data" in md and "predicts runs 30x beyond its fitted compute" in md
    assert all(f"| {c['factor']:g}x | {c['n_train']} |" in md for c in fit["backtest"]["cuts"])


def test_report_of_a_table_sourced_fit(tmp_path):
    """`scaling fit --csv` then `scaling report FIT_DIR`: fit.json records the table and its columns,
    so the report reads the points again and does the hold-out check on them; points made from a
    known law, without noise, are predicted exactly. A table that has moved is named."""
    law = Law(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
    n, d = (v.ravel() for v in np.meshgrid(np.geomspace(1e7, 1e9, 5), np.geomspace(1.1e9, 0.9e11, 5)))
    (tmp_path / "points.csv").write_text("N,D,loss\n" + "".join(f"{float(a)!r},{float(b)!r},{float(law.loss(a, b))!r}\n"
                                                                for a, b in zip(n, d)))
    rc, _ = _run(["fit", "--csv", str(tmp_path / "points.csv"), "--n-col", "N", "--d-col", "D", "--loss-col", "loss",
                  "--param-convention", "total", "--bootstrap", "0", "--out", str(tmp_path / "fit")])
    assert rc == 0
    recorded = json.loads((tmp_path / "fit" / "fit.json").read_text())["data"]
    assert recorded["table"]["path"] == str(tmp_path / "points.csv") and recorded["param_convention"] == "total"
    rc, stdout = _run(["report", str(tmp_path / "fit"), "--out", str(tmp_path / "report")])
    assert rc == 0 and "hold-out check: not possible" not in stdout
    md = (tmp_path / "report" / "report.md").read_text()
    for name in ("E", "A", "B", "alpha", "beta"):
        _number(_table_row(md, name)[1], getattr(law, name), digits=3)
    assert re.search(r"mean absolute relative error of 0(\.0+)?%", md)        # exact points: exact prediction
    assert {"final_loss.png", "residuals.png"} <= {p.name for p in (tmp_path / "report" / "figures").iterdir()}
    (tmp_path / "points.csv").rename(tmp_path / "moved.csv")
    rc, _ = _run(["report", str(tmp_path / "fit"), "--out", str(tmp_path / "report2")])
    assert rc == 0 and "was not found" in (tmp_path / "report2" / "report.md").read_text()


def _copy_store(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(store.CHECKPOINT))
    return dst


def test_broken_store_still_renders_and_says_what_was_left_out(micro_sweep, tmp_path):
    _, sweep = micro_sweep
    runs = _copy_store(sweep.sweep_dir, tmp_path / "runs" / "micro")
    dirs = store.run_dirs(runs)
    diverged, no_metrics = dirs[0], dirs[-1]
    summary = json.loads((diverged / store.SUMMARY).read_text())
    summary.update(status="diverged", reason="loss was NaN at step 12", final_val_loss=None)
    (diverged / store.SUMMARY).write_text(json.dumps(summary))
    (no_metrics / store.METRICS).unlink()

    out = tmp_path / "report"
    rc, stdout = _run(["report", str(runs), "--bootstrap", "10", "--out", str(out)])
    assert rc == 0
    md = (out / "report.md").read_text()
    section = md.split("## What was left out, and why")[1].split("\n## ")[0]
    assert f"| {diverged.name} | diverged: loss was NaN at step 12 |" in section
    assert re.search(rf"\| {no_metrics.name} \| no metrics.jsonl: no loss curve.*still fitted", section)
    fit = json.loads((out / "fit.json").read_text())
    assert fit["data"]["n_points"] == MICRO_RUNS - 1
    assert (out / "figures" / "loss_curves.png").exists()
    assert "left out" in stdout and "hold-out check" in stdout
    note = next(line for line in stdout.splitlines() if line.startswith("note:"))
    named = re.findall(r'"([^"]+)"', note)              # the sections the note sends the reader to
    assert "What was left out, and why" in named and all(f"\n## {h}\n" in md for h in named)
    # Five points leave four for the refit: fewer than the law's five constants, and it says so.
    assert "too few points are left to refit" in md


def test_finished_run_without_a_final_loss_is_left_out(micro_sweep, tmp_path):
    """`scaling fit` refuses such a store; the report leaves the run out and says why."""
    _, sweep = micro_sweep
    runs = _copy_store(sweep.sweep_dir, tmp_path / "micro")
    bad = store.run_dirs(runs)[2]
    summary = json.loads((bad / store.SUMMARY).read_text())
    summary.pop("final_val_loss")
    (bad / store.SUMMARY).write_text(json.dumps(summary))
    rep = build_report(load_inputs(runs, bootstrap=0))
    assert (bad.name, "finished, but summary.json has no positive, finite final_val_loss") in rep.left_out
    assert len(rep.inputs.data) == MICRO_RUNS - 1 and "bootstrap" in rep.missing_figures


def test_fit_whose_runs_are_gone_renders_the_law(fit_dir, tmp_path):
    """Without its runs, a fit still shows its law and its hold-out check, both fit.json's."""
    fit = json.loads((fit_dir / "fit.json").read_text())
    fit["data"]["source"] = f"runs {tmp_path / 'gone'}"
    fit["data"]["store"]["path"] = str(tmp_path / "gone")      # the absolute record is what is followed
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(fit))
    rep = build_report(load_inputs(path))
    md = rep.doc.markdown()
    assert "was not found" in md and set(rep.figures) == {"frontiers"}     # drawn from fit.json alone (no forms in it)
    assert rep.holdout.to_json() == fit["holdout"]
    _number(_table_row(md, "alpha")[1], fit["params"]["alpha"])


@pytest.mark.parametrize("argv, message", [
    (["missing-dir"], "does not exist"),
    (["{empty}"], "has no runs (no <run-id>/config.yaml): not a run store"),
    (["{notjson}"], "is not valid JSON"),
    (["{otherjson}"], "is not a fit.json"),
    (["{empty}", "--holdout-fraction", "1.5"], "--holdout-fraction must be between 0 and 1"),
    ([], "give exactly one input"),
    (["--dataset", "nope"], "unknown dataset 'nope'"),
])
def test_bad_input_exits_2_with_a_message(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "notjson.json").write_text("hello\n")
    (tmp_path / "other.json").write_text(json.dumps({"kind": "something.else"}))
    subs = {"{empty}": "empty", "{notjson}": "notjson.json", "{otherjson}": "other.json"}
    argv = ["report", *[subs.get(a, a) for a in argv], "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("scaling report: error:") and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_report_json_names_the_files_and_holds_the_holdout_check(fit_dir, tmp_path):
    rc, stdout = _run(["report", str(fit_dir), "--out", str(tmp_path), "--json"])
    shown = json.loads(stdout)
    assert rc == 0 and shown["report"] == str(tmp_path / "report.md") and (tmp_path / "report.md").is_file()
    assert all(Path(p).is_file() for p in shown["files"]) and any(p.endswith(".svg") for p in shown["files"])
    fit = json.loads((fit_dir / "fit.json").read_text())
    assert shown["holdout"]["rows"] and len(shown["holdout"]["rows"]) == len(fit["holdout"]["rows"])
    assert isinstance(shown["missing_figures"], dict) and isinstance(shown["left_out"], list)
