"""Issue 43: a tampered fit.json is refused where it is read, by one schema (scaling.schemas.fit),
never met as a traceback in report, plan or compare; and a seeded fuzz of fit.json and
validate.json through the same commands finds no traceback."""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from scaling import cli
from scaling.errors import UsageError
from scaling.report.inputs import load_inputs
from scaling.validation.result import format_validation, load_validation, write_validation
from tests.hardening.helpers import FLAT_POINTS, fit_table, refused
from tests.test_hardening import good_validation

DELETE = object()


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """A fit of a table without bootstrap (an edit would not match a bootstrap file's digest), with
    the other forms fitted beside it (its "forms" section, which a fit no longer writes by default)."""
    return fit_table(tmp_path_factory.mktemp("fit"), forms=True)


def edited(fit: Path, tmp: Path, edits: dict) -> Path:
    """A copy of `fit` with `edits` ({"a.b.0.c": value}; a missing section is made) in tmp/fit.json."""
    obj = json.loads(fit.read_text())
    for dotted, value in edits.items():
        *path, last = [int(k) if k.isdigit() else k for k in dotted.split(".")]
        node = obj
        for key in path:
            if isinstance(node, dict) and node.get(key) is None:
                node[key] = {}
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    out = tmp / "fit.json"
    out.write_text(json.dumps(obj))
    return out


# The tampered fields the probe found read without a schema (report, plan or compare: rc 1, a
# traceback), each with the field the refusal names.
TAMPERED = {
    "beta 1e308": ({"params.beta": 1e308}, "'params.beta'"),
    "alpha 40": ({"params.alpha": 40.0}, "'params.alpha'"),  # a fit may write 8 (a narrow table)
    "approach_1.a text": ({"approaches.approach_1": {"a": "x", "b": 0.5, "method": "envelope"}},
                          "'approaches.approach_1.a'"),
    "approach_2.a_ci short": ({"approaches.approach_2.a": 0.5, "approaches.approach_2.a_ci": [0.4]},
                              "'approaches.approach_2.a_ci"),
    "approach_2.a_ci of text": ({"approaches.approach_2.a": 0.5, "approaches.approach_2.a_ci": ["a", "b"]},
                                "'approaches.approach_2.a_ci[0]'"),
    "approach_2.budgets text": ({"approaches.approach_2.budgets": "x"}, "'approaches.approach_2.budgets'"),
    "verdict an int": ({"verdict.verdict": 3}, "'verdict.verdict'"),
    "verdict missing": ({"verdict": {"reasons": []}}, "'verdict.verdict' is missing"),
    "lack_of_fit.tests text": ({"lack_of_fit.tests": "x"}, "'lack_of_fit.tests'"),
    "lack_of_fit p-value text": ({"lack_of_fit.tests.0.p_value": "x"}, "'lack_of_fit.tests[0].p_value'"),
    "lack_of_fit p-value 2": ({"lack_of_fit.tests.0.p_value": 2.0}, "'lack_of_fit.tests[0].p_value'"),
    "lack_of_fit factor text": ({"lack_of_fit.interval_factor": "x"}, "'lack_of_fit.interval_factor'"),
    "kaplan.L_N text": ({"kaplan.L_N": "x"}, "'kaplan.L_N'"),
    "kaplan alpha text": ({"kaplan.L_N.alpha": "x"}, "'kaplan.L_N.alpha'"),
    "dropped of text": ({"data.dropped": ["x"]}, "'data.dropped[0]'"),
    "reference_compute -1": ({"reference_compute": -1}, "'reference_compute' must be positive (at least 1e-300)"),
    "delta text": ({"options.delta": "x"}, "'options.delta'"),
    "n_starts text": ({"options.n_starts": "x"}, "'options.n_starts'"),
    "fixed_E text": ({"options.fixed_E": "x"}, "'options.fixed_E'"),
    "seed text": ({"seed": "x"}, "'seed'"),
    "holdout error text": ({"holdout.mean_abs_rel_error": "x"}, "'holdout.mean_abs_rel_error'"),
    "holdout rows text": ({"holdout.rows": "x"}, "'holdout.rows'"),
    "diagnostic value text": ({"diagnostics.0.value": "x"}, "'diagnostics[0].value'"),
    "diagnostic margin text": ({"diagnostics.0.margin": "x"}, "'diagnostics[0].margin'"),
    "diagnostic threshold an int": ({"diagnostics.0.threshold": 3}, "'diagnostics[0].threshold'"),
    "diagnostic status unknown": ({"diagnostics.0.status": "great"}, "'diagnostics[0].status'"),
    "curves without decay": ({"curves": {"sizes": []}}, "'curves.decay' is missing"),
    "param_conventions of text": ({"param_conventions": {"total": "x"}}, "'param_conventions.total'"),
    "filters.drop": ({"data.filters.drop": 2}, "'data.filters.drop' is not a known key"),
    "table empty": ({"data.table": {}}, "'data.table.path' is missing"),
    "table extra key": ({"data.table.extra": 1}, "'data.table.extra' is not a known key"),
    "table path an int": ({"data.table.path": 3}, "'data.table.path'"),
    "allocation a 1e308": ({"allocation.a": 1e308}, "'allocation.a' must be at most 1e+300"),
    "evidence of ints": ({"evidence": [1, 2]}, "'evidence[0]'"),
    # numbers beyond a float, which float() refuses with an OverflowError (the fuzz found the first)
    "forms calibration 10^400": ({"forms.entries.1.extrapolation.calibration": 10**400},
                                 "'forms.entries[1].extrapolation.calibration' input should be a valid number"),
    "backtest calibration 10^400": ({"backtest.extrapolation.calibration": 10**400},
                                    "'backtest.extrapolation.calibration' input should be a valid number"),
    # a form's optimum as a section, not any dict (the fuzz found {"n": {}} crashing the report)
    "forms optimum n a dict": ({"forms.entries.1.optimum.n": {}}, "'forms.entries[1].optimum.n'"),
    "forms optimum without d": ({"forms.entries.1.optimum.d": None},
                                "a form's optimum has n, d and loss, or a reason"),
}


@pytest.mark.parametrize("name", list(TAMPERED))
def test_a_tampered_fit_json_is_refused_by_report_plan_and_compare(fitted, tmp_path, capsys, name):
    edits, expected = TAMPERED[name]
    fit = edited(fitted, tmp_path, edits)
    refused(["plan", "--fit", fit, "--compute", "1e21"], capsys, expected)
    refused(["compare", fit], capsys, expected)
    refused(["report", fit.parent, "--out", tmp_path / "report"], capsys, expected)
    assert not (tmp_path / "report").exists()


def test_report_refuses_a_law_without_an_allocation_as_plan_does(fitted, tmp_path, capsys):
    fit = edited(fitted, tmp_path, {"params.alpha": -0.3})     # was: a complex N_opt in the report's tables
    for argv in (["plan", "--fit", fit, "--compute", "1e21"], ["report", fit.parent, "--out", tmp_path / "r"]):
        refused(argv, capsys, "a compute-optimal allocation needs A, B, alpha and beta positive")


def test_a_flat_tables_report_says_why_there_is_no_optimum_as_plan_does(tmp_path, capsys):
    """A table whose loss does not fall with N or D, fitted without bootstrap: its law's optimum lies
    at N = 1e183 on D = 1e-164. plan refused it, but the report listed it as the plan for 1e18-1e23
    FLOPs, with 1e-217 tokens per parameter, N_opt 1e116 at each IsoFLOP budget and the verdict
    'use with caution'. Now the report says why there is no plan, in plan's words."""
    table = tmp_path / "flat.csv"
    table.write_text(FLAT_POINTS)
    assert cli.main(["fit", "--csv", str(table), "--bootstrap", "0", "--out", str(tmp_path / "fit")]) == 0
    capsys.readouterr()
    why = "no model (alpha 0.00128, beta 0.000592: the points do not identify the allocation)"
    refused(["plan", "--fit", tmp_path / "fit", "--compute", "1e18"], capsys, why)
    assert cli.main(["report", str(tmp_path / "fit"), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    plan = text.split("## Plan for a few budgets")[1].split("\n## ")[0]
    # The report plans at 1x, 3x, 10x and 30x its largest run (1.8e18 FLOPs): no plan at any of them.
    assert "| law optimum |" not in plan and plan.count(why) == 4, plan
    assert "- C = 1.8e18: no plan: the law's optimum at C = 1.8e+18 falls at N = " in plan
    assert "**Verdict: not identified.**" in text and "Tokens per parameter at" not in text
    # No N, D or tokens per parameter past 1e40 or below 1e-40 but in the sentences saying why (G is a constant).
    said = [line for line in text.splitlines() if re.search(r"\de[+-]?[4-9]\d|\de[+-]?\d{3}", line)]
    assert all(why in line or line.startswith("| G |") for line in said), said


# --------------------------------------------------------------------------------------------
# Fuzz: seeded mutations of every field of fit.json and validate.json


HOSTILE = [None, "x", "", -1, 0, 1, 0.5, -0.5, 7.0, 1e308, -1e308, 1e-320, True, [], {}, [1], [None, None],
           ["a", "b"], [1.0, 2.0, 3.0], {"x": 1}, 10**400, [[1]], {"a": {"b": [1]}}]


def leaves(obj, path=()):
    """Every path into `obj` (sections and values), depth first."""
    yield path
    children = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in children:
        yield from leaves(value, (*path, key))


def mutate(obj, rng: random.Random):
    """A copy of `obj` with one to three of its entries replaced by a hostile value or deleted."""
    obj = copy.deepcopy(obj)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in leaves(obj) if p]
        *where, last = rng.choice(paths)
        node = obj
        for key in where:
            node = node[key]
        if isinstance(node, dict) and rng.random() < 0.15:
            del node[last]
        else:
            node[last] = copy.deepcopy(rng.choice(HOSTILE))
    return obj


def quiet(argv) -> tuple[int, str]:
    """`scaling ARGV` in-process: its exit code and stderr (stdout discarded)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main([str(a) for a in argv])
    return code, err.getvalue()


def one_line_or_done(code: int, err: str, what) -> None:
    assert code in (0, 2), (what, code, err)
    assert code == 0 or (len(err.strip().splitlines()) == 1 and "Traceback" not in err), (what, err)


FUZZ = 400           # mutations of each file, through plan, compare and the report's reader (fit.json's
                     # sections with their side files re-stamped: test_fit_json_sections.py)
FULL_REPORTS = 4     # of the mutated files the readers accept, rendered and written whole (2-4 s each)


@pytest.fixture
def one_parser(monkeypatch):
    """main() builds its argument parser once, not per call (12 ms of each of 2,000 calls)."""
    monkeypatch.setattr(cli, "build_parser", functools.cache(cli.build_parser))


def test_fuzzed_fit_json_through_plan_compare_and_report(fitted, tmp_path, one_parser):
    rng = random.Random(43)
    good = json.loads(fitted.read_text())
    shutil.copy(fitted.parent.parent / "fit.csv", tmp_path / "fit.csv")
    accepted = []
    for i in range(FUZZ):
        obj = mutate(good, rng)
        path = tmp_path / "fit.json"
        path.write_text(json.dumps(obj).replace("Infinity", "1e999"))
        for argv in (["plan", "--fit", path, "--compute", "1e21"], ["compare", path]):
            one_line_or_done(*quiet(argv), (i, argv[0], obj))
        try:
            load_inputs(path)              # what `scaling report` reads, checked where it opens the file
        except UsageError as exc:
            assert "\n" not in str(exc), (i, exc)
        else:
            accepted.append(obj)
    assert 0 < len(accepted) < FUZZ                  # mutations both refused and read
    for obj in accepted[:FULL_REPORTS]:
        (tmp_path / "fit.json").write_text(json.dumps(obj))
        one_line_or_done(*quiet(["report", tmp_path, "--out", tmp_path / "report"]), obj)


def test_fuzzed_validate_json_through_its_reader_and_report(fitted, tmp_path):
    rng = random.Random(44)
    path = write_validation(tmp_path, good_validation())
    good = json.loads(path.read_text())
    accepted = []
    for i in range(FUZZ):
        obj = mutate(good, rng)
        path.write_text(json.dumps(obj).replace("Infinity", "1e999"))
        try:
            validation = load_validation(path)
        except UsageError as exc:
            assert "\n" not in str(exc), (i, exc)
            continue
        format_validation(validation)       # what validate prints and the report's section is made of
        accepted.append(obj)
    assert 0 < len(accepted) < FUZZ
    shutil.copytree(fitted.parent, tmp_path / "fit")
    shutil.copy(fitted.parent.parent / "fit.csv", tmp_path / "fit.csv")
    for obj in accepted[:FULL_REPORTS // 2]:
        (tmp_path / "fit" / "validate.json").write_text(json.dumps(obj))
        one_line_or_done(*quiet(["report", tmp_path / "fit", "--out", tmp_path / "report"]), obj)
