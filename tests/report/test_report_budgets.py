"""The report's plan where the data are: budgets relative to the largest fitted run (and the user's own,
`--compute`), each row saying how far beyond the runs it lies, one count of C named in every table, and
Kaplan's D/N one number in the plan and in the comparison with published laws."""

from __future__ import annotations

import pytest

from scaling.laws.optimal.allocation import kaplan_allocation
from scaling.report.decisions import plan
from scaling.report.inputs import load_inputs
from scaling.report.literature import published_laws
from scaling.report.page import Report
from tests.report.test_report import _run, _table_row


@pytest.fixture(scope="module")
def planned(fit_dir):
    """The plan and comparison sections of the micro sweep's fit, with a budget of the user's own."""
    inputs = load_inputs(fit_dir)
    top = float(inputs.fit.data.c_range[1])
    r = Report.start(inputs, compute=[5 * top])
    plan(r)
    published_laws(r)
    return r, top


def test_the_plan_is_at_multiples_of_the_largest_run_and_the_users_own(planned):
    r, top = planned
    assert r.budgets == pytest.approx([top, 3 * top, 5 * top, 10 * top, 30 * top])
    md = r.doc.markdown()
    for where in ("at the largest run", "3x beyond", "5x beyond", "10x beyond", "30x beyond"):
        assert _table_row(md, where)[2] == "law optimum"
    assert "1e+23" not in md and "1e23" not in md.split("## Comparison")[0]


def test_one_count_of_compute_named_in_every_table(planned):
    r, _ = planned
    md, flops = r.doc.markdown(), r.fit.law.flops
    assert not flops.is_six_n            # a run store: the exact count c(N), not 6ND
    assert f"| C ({flops.name}) |" in md
    header = next(line for line in md.splitlines() if "D/N at" in line)
    assert header.count(f"({flops.name})") == 2
    assert "D = C / (6N)" not in md and f"D = C / c(N) ({flops.name}" in md


def test_kaplans_tokens_per_parameter_is_one_number(planned):
    # The plan table's kaplan row at the largest budget and the comparison's Kaplan D/N there: the same
    # split of the same C in the fit's count (they were 0.548 and 0.332 when one used 6ND).
    r, _ = planned
    md, c = r.doc.markdown(), r.budgets[-1]
    in_plan = [line.split(" | ") for line in md.splitlines() if "| 30x beyond |" in line and "| kaplan |" in line]
    in_comparison = _table_row(md.split("## Comparison")[1], "kaplan")[-1].split()[0]
    expected = kaplan_allocation(c, r.fit.law).tokens_per_param
    assert float(in_plan[0][5]) == pytest.approx(expected, rel=5e-3)
    assert float(in_comparison) == pytest.approx(expected, rel=5e-3)


def test_a_caution_where_the_count_of_compute_is_extrapolated(planned):
    # c(N) was fitted on the sweep's tiny shapes; Kaplan's N at 30x is far beyond them.
    r, _ = planned
    hi = float(r.fit.data.n_range[1])
    line = next(line for line in r.doc.markdown().splitlines() if "c(N) is extrapolated" in line)
    assert f"-{hi:.3g} parameters" in line and "counted as 6ND" in line


def test_report_refuses_a_negative_budget_naming_it(fit_dir, tmp_path, capsys):
    rc, _ = _run(["report", str(fit_dir), "--out", str(tmp_path / "r"), "--compute", "-1e21"])
    assert rc == 2
    assert "'-1e21'" in capsys.readouterr().err and not (tmp_path / "r").exists()
