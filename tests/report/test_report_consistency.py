"""A report that agrees with itself: every C, axis and formula in the measure the fit used,
decisions before detail, degenerate and undetermined fits flagged rather than drawn, verdict text
in words. Asserted on the real report of the shared micro sweep (exact FLOPs, c(N) fitted) and
on the packaged Chinchilla fit (6ND)."""

from __future__ import annotations

import contextlib
import io
import json
import re

import numpy as np
import pytest

from scaling.cli import main
from scaling.laws.forms.law import Law
from scaling.report import frontiers, literature
from scaling.report.inputs import load_inputs
from scaling.report.report import build_report
from scaling.report.style import SizeColours
from scaling.runs import store
from tests.report.test_report import _table_row


def _run(argv) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def _cells(md: str, header_start: str) -> tuple[list[str], list[list[str]]]:
    """A Markdown table's header and rows, found by its header's first cells."""
    lines = md.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(header_start))
    split = lambda line: [c.strip() for c in line.strip().strip("|").split("|")]   # noqa: E731
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        rows.append(split(line))
    return split(lines[i]), rows


def test_a_is_one_formula_in_text_and_table(from_fit, fit_dir):
    """The text's formula, evaluated on the table's alpha, beta and the stated gamma, gives the
    table's a (the run store's compute is exact FLOPs, so gamma is fitted, not 1)."""
    _, out = from_fit
    md = (out / "report.md").read_text()
    assert "a = beta/(alpha+beta) is" not in md
    text = re.search(r"a = beta/\(alpha \+ gamma beta\).*?gamma = ([0-9.]+)", md)
    assert text, "the fitted law's text states the formula with gamma"
    gamma = float(text.group(1))
    assert gamma != 1.0
    fit = json.loads((fit_dir / "fit.json").read_text())
    alpha, beta = fit["params"]["alpha"], fit["params"]["beta"]
    assert gamma == pytest.approx(fit["compute"]["gamma"], rel=1e-3)
    table_a = float(_table_row(md, "a")[1])
    assert table_a == pytest.approx(beta / (alpha + fit["compute"]["gamma"] * beta), abs=5e-5)


def test_run_table_compute_is_the_fits_and_holds_the_largest_hold_out_runs(from_fit, micro_sweep):
    _, out = from_fit
    _, sweep = micro_sweep
    md = (out / "report.md").read_text()
    header, rows = _cells(md, "| run | status |")
    column = header.index("C (exact FLOPs)")
    spent = store.read_runs(sweep.sweep_dir).set_index("run_id").flops_exact
    for row in rows:
        assert float(row[column]) == pytest.approx(spent[row[0]], rel=5e-4), row[0]
    held = [row for row in rows if "held out" in row[-1]]
    others = [row for row in rows if "held out" not in row[-1]]
    assert held and min(float(r[column]) for r in held) >= max(float(r[column]) for r in others)
    hold_header, _ = _cells(md, "| held-out run |")
    assert "C (exact FLOPs)" in hold_header


def test_axes_name_the_compute_measure(fit_dir):
    report = build_report(load_inputs(fit_dir))
    residuals = report.figures["residuals"].axes[0].get_xlabel()
    frontier = report.figures["frontiers"].axes[0].get_xlabel()
    assert "exact FLOPs" in residuals and "6ND" not in residuals
    assert "exact FLOPs" in frontier and "6ND" not in frontier


def test_decisions_come_before_the_detail(from_fit):
    _, out = from_fit
    md = (out / "report.md").read_text()
    order = [md.index(h) for h in ("**Verdict", "## Plan for a few budgets", "## The fitted law", "## Diagnostics",
                                   "## The sweep")]
    assert order == sorted(order)


def test_report_help_states_the_real_default():
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        main(["report", "--help"])
    assert re.search(r"count N as total\s+\(default", text.getvalue())


def test_degenerate_kaplan_fit_is_flagged_not_shown():
    """X_c = 3.26e+259 with alpha's interval across zero: no finding; a sound fit passes."""
    bad = {"alpha": 0.002, "alpha_ci": [-0.01, 0.02], "x_c": 3.26e259, "n_points": 7}
    assert "reaches 0" in literature._kaplan_degenerate(bad)
    assert "barely moves" in literature._kaplan_degenerate({**bad, "alpha_ci": [0.001, 0.003]})
    assert literature._kaplan_degenerate({"alpha": 0.08, "alpha_ci": [0.06, 0.1], "x_c": 8.8e13}) is None


def test_frontier_contour_labels_are_not_repeated():
    """Near E the optimal losses of successive decades round to one label: each is drawn once."""
    law = Law(E=3.35, A=40.0, B=60.0, alpha=0.5, beta=0.5)
    n = np.geomspace(1e4, 1e6, 6)
    fig = frontiers.frontiers(law, n, 6 * n * 20 * n, SizeColours(n, "N"), references={}, c_max=1e24)
    labels = [t.get_text() for t in fig.axes[0].texts if re.fullmatch(r"[0-9.]+", t.get_text())]
    assert len(labels) >= 3 and len(labels) == len(set(labels)), labels


def test_verdict_text_is_in_words_and_each_caution_once(tmp_path):
    """The Chinchilla refit: no check names or '.;' in the verdict; compare gives the verdict in
    one line and its approaches caution once; C is named 6ND, once."""
    rc, summary = _run(["fit", "--dataset", "chinchilla", "--drop-highest-loss", "5", "--bootstrap", "100",
                        "--out", str(tmp_path)])
    assert rc == 0
    verdict = summary[summary.index("verdict:"):]
    for name in ("tpp_ratio", "E_over_min_loss", "n_decades", "tokens_per_param ", ".;", "[nan, nan]"):
        assert name not in verdict, name
    assert "C = 6ND" in summary and "(6N)" not in summary
    rc, compared = _run(["compare", str(tmp_path / "fit.json")])
    assert rc == 0
    assert len([line for line in compared.splitlines() if line.startswith("verdict:")]) == 1
    assert "caution:" not in compared                   # the reasons are the fit's summary's
    assert compared.count("disagree beyond their intervals") == 1


def test_undefined_intervals_are_said_in_words():
    from scaling.laws.checks.verdict import graded, interval_text

    what = f"width of a's 95% interval {interval_text(float('nan'), float('nan'))}"
    check = graded("a_width", float("nan"), higher_is_better=False, what=what)
    assert "nan" not in check.reason and "none" in check.reason

