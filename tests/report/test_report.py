"""`scaling report`: figures from real (micro) runs, numbers equal to fit.json's, the hold-out
check against a direct refit, byte-identical reruns, self-contained HTML, broken stores, bad input.

Every report here is drawn from the shared micro sweep (tests/conftest.py), with a handful of
bootstrap resamples to stay fast.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from scaling.cli import main
from scaling.laws import fit as fitting
from scaling.laws import fitdata, results
from scaling.report import report
from scaling.report.figures import DPI
from scaling.runs import store
from tests.conftest import MICRO_RUNS

FIGURES = ("loss_curves", "final_loss", "isoflop", "frontiers", "residuals", "bootstrap")
BOOT = "12"


def _run(argv) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def fit_dir(micro_sweep, tmp_path_factory):
    """`scaling fit` of the micro sweep: the fit.json the report reads."""
    _, sweep = micro_sweep
    out = tmp_path_factory.mktemp("fit")
    rc, _ = _run(["fit", str(sweep.sweep_dir), "--bootstrap", BOOT, "--out", str(out)])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def from_fit(fit_dir, tmp_path_factory):
    """`scaling report FIT_DIR`: (stdout, report folder)."""
    out = tmp_path_factory.mktemp("report-a")
    rc, stdout = _run(["report", str(fit_dir), "--out", str(out)])
    assert rc == 0
    return stdout, out


def _table_row(md: str, first_cell: str) -> list[str]:
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row starting with {first_cell!r}")


def _direct_holdout(sweep_dir):
    """The hold-out check computed by hand: the top round(20%) by C out, refit, predict."""
    data = fitdata.apply_filters(fitdata.from_runs(sweep_dir), drop_highest_loss=0)
    c = data.compute
    k = max(1, round(0.2 * len(data)))
    held = np.argsort(-c, kind="stable")[:k]
    train = np.setdiff1d(np.arange(len(data)), held)
    law = fitting.fit_law(data.n[train], data.d[train], data.loss[train]).law
    pred = law.loss(data.n[held], data.d[held])
    err = np.abs(pred - data.loss[held]) / data.loss[held]
    return {data.ids[i]: (float(p), float(e)) for i, p, e in zip(held, pred, err)}, float(err.mean())


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
    assert "Figures not drawn" not in md
    # Every run of the store is in the run table.
    assert md.count("| finished |") == MICRO_RUNS
    assert "wrote" in stdout and "report.md" in stdout


def test_report_numbers_are_fit_json_numbers(from_fit, fit_dir):
    _, out = from_fit
    md = (out / "report.md").read_text()
    fit = json.loads((fit_dir / "fit.json").read_text())
    fmt = report.FMT
    for name in ("E", "A", "B", "alpha", "beta"):
        row = _table_row(md, name)
        assert row[1] == format(fit["params"][name], fmt[name])
        lo, hi = fit["ci"][name]
        assert row[2] == f"[{lo:{fmt[name]}}, {hi:{fmt[name]}}]"
    for name in ("a", "b", "G"):
        row = _table_row(md, name)
        assert row[1] == format(fit["allocation"][name], fmt[name])
        lo, hi = fit["ci"][name]
        assert row[2] == f"[{lo:{fmt[name]}}, {hi:{fmt[name]}}]"
    row = _table_row(md, f"tokens_per_param at C = {fit['reference_compute']:.3g}")
    assert row[1] == format(fit["tokens_per_param_at_reference"], ".4g")
    # The three approaches side by side, as fit.json has them.
    a3 = _table_row(md, "Approach 3 (parametric fit)")
    assert a3[1] == f"{fit['approaches']['approach_3']['a']:.4f}"
    a2 = _table_row(md, "Approach 2 (IsoFLOP)")
    assert a2[1] == ("-" if fit["approaches"]["approach_2"]["a"] is None
                     else f"{fit['approaches']['approach_2']['a']:.4f}")
    # Evidence and limitations are fit.json's lists (the report adds after them).
    for line in fit["evidence"] + fit["limitations"]:
        assert f"- {line}\n" in md
    # The published comparison and the plan are there.
    assert _table_row(md, "chinchilla")[3].startswith("0.452")
    for c in ("1e18", "1e21", "1e23"):
        assert _table_row(md, c)[1] == "law optimum"


def test_holdout_matches_a_direct_refit(from_fit, micro_sweep):
    stdout, out = from_fit
    _, sweep = micro_sweep
    expected, mean = _direct_holdout(sweep.sweep_dir)
    md = (out / "report.md").read_text()
    section = md.split("## Hold-out check")[1].split("\n## ")[0]
    for run_id, (pred, err) in expected.items():
        row = _table_row(section, run_id)
        assert row[5] == f"{pred:.4f}" and row[6] == f"{100 * err:.2f}%"
        line = next(ln for ln in stdout.splitlines() if ln.startswith(run_id))
        assert line.split()[-2:] == [f"{pred:.4f}", f"{100 * err:.2f}%"]
    assert f"mean absolute relative error: {100 * mean:.2f}%" in stdout
    assert f"Mean absolute relative error of the held-out predictions: {100 * mean:.2f}%" in md


def test_holdout_split_takes_the_largest_compute():
    train, held = report.holdout_split([5.0, 1.0, 9.0, 3.0, 9.0, 2.0, 7.0, 4.0, 6.0, 8.0], 0.2)
    assert held.tolist() == [2, 4] and train.tolist() == [0, 1, 3, 5, 6, 7, 8, 9]
    train, held = report.holdout_split([1.0, 2.0, 3.0], 0.2)       # at least one point held out
    assert held.tolist() == [2]


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


def test_html_report_fitted_here_is_self_contained(micro_sweep, fit_dir, from_fit, tmp_path):
    """A run store fitted in-process: fit.json equal to `scaling fit`'s, one HTML file with
    every figure embedded, the same numbers as the Markdown report of that fit."""
    _, sweep = micro_sweep
    rep, paths = report.make_report(sweep.sweep_dir, out=tmp_path, fmt="html", bootstrap=int(BOOT))
    assert (tmp_path / "fit.json").read_bytes() == (fit_dir / "fit.json").read_bytes()
    page = (tmp_path / "report.html").read_text()
    assert f"<code>scaling fit {sweep.sweep_dir} --bootstrap {BOOT} --seed 0</code> writes the same fit.json" in page
    assert paths[-1] == tmp_path / "report.html"
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", page)           # nothing fetched from outside
    assert "<script" not in page and "<link" not in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(FIGURES)
    for name, fig in rep.figures.items():
        png = (tmp_path / "figures" / f"{name}.png").read_bytes()
        assert base64.b64encode(png).decode() in images
        h, w = (round(v * DPI) for v in fig.get_size_inches()[::-1])
        assert imread(tmp_path / "figures" / f"{name}.png").shape[:2] == (h, w)
    md = (from_fit[1] / "report.md").read_text()
    for name in ("alpha", "beta", "a"):
        assert f"<td>{name}</td><td class=\"num\">{_table_row(md, name)[1]}</td>" in page


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
    rc, stdout = _run(["report", str(runs), "--bootstrap", "5", "--out", str(out)])
    assert rc == 0
    md = (out / "report.md").read_text()
    section = md.split("## What was left out, and why")[1].split("\n## ")[0]
    assert f"| {diverged.name} | diverged: loss was NaN at step 12 |" in section
    assert re.search(rf"\| {no_metrics.name} \| no metrics.jsonl: no loss curve.*still fitted", section)
    fit = json.loads((out / "fit.json").read_text())
    assert fit["data"]["n_points"] == MICRO_RUNS - 1
    assert (out / "figures" / "loss_curves.png").exists()
    assert "left out" in stdout and "hold-out check" in stdout
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
    rep = report.build_report(report.load_inputs(runs, bootstrap=0))
    assert (bad.name, "finished, but summary.json has no positive, finite final_val_loss") in rep.left_out
    assert len(rep.inputs.data) == MICRO_RUNS - 1 and "bootstrap" in rep.missing_figures


def test_fit_whose_runs_are_gone_renders_the_law(fit_dir, tmp_path):
    fit = json.loads((fit_dir / "fit.json").read_text())
    fit["data"]["source"] = f"runs {tmp_path / 'gone'}"
    path = results.write_fit(tmp_path / "fit.json", fit)
    rep = report.build_report(report.load_inputs(path))
    md = rep.doc.markdown()
    assert "was not found" in md and set(rep.figures) == {"frontiers"}
    assert rep.holdout is None and _table_row(md, "alpha")[1] == format(fit["params"]["alpha"], ".4f")


@pytest.mark.parametrize("argv, message", [
    (["missing-dir"], "does not exist"),
    (["{empty}"], "is neither a run store"),
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
