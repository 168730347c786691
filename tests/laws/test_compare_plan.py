"""`scaling compare` and `scaling plan`: the comparison rows, and the CLI against the maths."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from scaling.cli import main
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import BESIROGLU, CHINCHILLA
from scaling.laws.optimal.allocation import compare_allocations, kaplan_allocation, numerical_optimum
from scaling.laws.optimal.compare import CAVEATS, compare, compare_approaches, format_table, table_cells
from scaling.laws.results.fit_sections import Intervals
from scaling.train.compute import FlopsPerToken

# Besiroglu et al.'s published 95% intervals, plus allocation intervals around their a = 0.513.
CI = {"level": 0.95, "n_resamples": 200,
      "E": [1.769, 1.871], "A": [285.2, 743.6], "B": [1042.4, 5810.3],
      "alpha": [0.317, 0.373], "beta": [0.331, 0.415],
      "a": [0.48, 0.54], "b": [0.46, 0.52], "G": [0.1, 1.0], "tokens_per_param": [15.0, 30.0]}


def fit_dict(law: Law, ci=CI, reference_compute=1e21, **extra) -> dict:
    """A fit.json as scaling.fit writes it (schema version 1)."""
    data = {
        "kind": "scaling.fit", "version": 1, "seed": 0,
        "data": {"source": "synthetic", "n_points": 40, "digest": "0" * 16,
                 "param_convention": "non_embedding", "dropped": [], "filters": {},
                 "n_range": [1e6, 1e8], "d_range": [1e8, 1e10], "c_range": [1e15, 1e19]},
        "options": {}, "params": law.to_dict(),
        "allocation": {"a": law.a, "b": law.b, "G": law.G},
        "reference_compute": reference_compute,
        "tokens_per_param_at_reference": float(law.tokens_per_param(reference_compute)),
        "ci": ci, "objective": 0.01, "n_starts_at_optimum": 12, "residual_rms": 0.01,
        "evidence": [], "limitations": [],
    }
    data.update(extra)
    return data


def write_fit(tmp_path, law=BESIROGLU.law, **kw):
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(fit_dict(law, **kw)))
    return path


# ----------------------------------------------------------------------------- compare

def test_compare_rows_and_interval_flags():
    rows = compare(BESIROGLU.law, Intervals.from_json(CI), 1e21)
    assert [r["name"] for r in rows] == ["your fit", "kaplan", "chinchilla", "besiroglu",
                                         "20 tokens/param"]
    mine, kaplan, chin, besi, rule = rows
    assert mine["a"] == pytest.approx(0.3658 / (0.3478 + 0.3658))
    assert mine["ci"]["alpha"] == [0.317, 0.373]
    assert besi["inside"] == {"alpha": True, "beta": True, "a": True, "b": True, "tokens_per_param": True}
    # Chinchilla: alpha 0.34 inside (0.317, 0.373); beta 0.28 below 0.331; a = 0.452 below 0.48.
    assert chin["inside"]["alpha"] is True and chin["inside"]["beta"] is False
    assert chin["inside"]["a"] is False
    assert chin["a"] == pytest.approx(0.28 / 0.62)
    # Kaplan publishes no alpha/beta of this form; a = 0.73 is far outside.
    assert kaplan["alpha"] is None and kaplan["inside"]["alpha"] is None
    assert kaplan["a"] == 0.73 and kaplan["inside"]["a"] is False
    assert rule["tokens_per_param"] == 20.0 and rule["inside"]["tokens_per_param"] is True


def test_compare_tokens_per_param_against_second_methods():
    rows = {r["name"]: r for r in compare(BESIROGLU.law, None, 1e21)}
    for name, law in (("chinchilla", CHINCHILLA.law), ("besiroglu", BESIROGLU.law)):
        at_c, large = numerical_optimum(law, 1e21), numerical_optimum(law, 1e23)
        assert rows[name]["tokens_per_param"] == pytest.approx(at_c.tokens_per_param, rel=1e-6)
        assert rows[name]["tokens_per_param_large"] == pytest.approx(large.tokens_per_param, rel=1e-6)
    k = kaplan_allocation(1e23)
    assert rows["kaplan"]["tokens_per_param_large"] == pytest.approx(k.d / k.n)
    assert rows["kaplan"]["tokens_per_param_large"] == pytest.approx(
        1e23 / (6 * (1.3e9 * (1e23 / 8.64e19) ** 0.73) ** 2))
    # Without intervals nothing is judged.
    assert all(v is None for r in list(rows.values())[1:] for v in r["inside"].values())


def test_null_interval_bounds_are_no_interval():
    # fit.json writes a NaN bound as null; such an interval judges nothing.
    ci = {**CI, "alpha": [None, None], "beta": [0.3, None]}
    rows = compare(BESIROGLU.law, Intervals.from_json(ci), 1e21)
    assert rows[0]["ci"]["alpha"] is None and rows[0]["ci"]["beta"] is None
    assert rows[2]["inside"]["alpha"] is None and rows[2]["inside"]["a"] is False
    assert "0.348 [" not in format_table(rows, 1e21)
    _, warnings = compare_approaches({"approach_2": {"a": 0.9, "a_ci": [None, None]}}, BESIROGLU.law,
                                     Intervals.from_json(ci))
    assert len(warnings) == 1  # 0.9 is outside approach 3's a interval (0.48, 0.54)


def test_format_table_is_aligned_and_marks_in_and_out():
    text = format_table(compare(BESIROGLU.law, Intervals.from_json(CI), 1e21), 1e21)
    lines = text.splitlines()
    assert len({len(line) for line in lines}) == 1  # every column right-aligned to one width
    assert "D/N at 1e21" in lines[0] and "D/N at 1e23" in lines[0]
    chin = next(line for line in lines if line.startswith("chinchilla"))
    assert "0.340 in" in chin and "0.280 OUT" in chin
    assert "0.348 [0.317, 0.373]" in next(line for line in lines if line.startswith("your fit"))


def test_compare_output_compares_only_what_its_caveats_say(tmp_path, capsys):
    """The caveats say E, A and B are not compared, only the exponents and what they imply. A fit
    that differs from another only in E and in a common factor on A and B leaves
    G = (alpha A / (beta B))^(1 / (alpha + beta)), and so every allocation, unchanged: it must get
    the same comparison, character for character. A different beta must change it, by the
    amounts the formulas give."""
    base = BESIROGLU.law
    alpha, beta = base.alpha, base.beta + 0.05
    laws = {"base": base,   # x16: a power of two, so A/B is the same double and G the same bits
            "rescaled": Law(E=3 * base.E, A=16 * base.A, B=16 * base.B, alpha=base.alpha, beta=base.beta),
            "steeper": Law(E=base.E, A=base.A, B=base.B, alpha=alpha, beta=beta)}
    text, rows = {}, {}
    for name, law in laws.items():
        (tmp_path / name).mkdir()
        path = write_fit(tmp_path / name, law)
        assert main(["compare", str(path)]) == 0
        text[name] = capsys.readouterr().out.split("\n", 1)[1]   # after the line naming the file
        assert main(["compare", str(path), "--json"]) == 0
        rows[name] = json.loads(capsys.readouterr().out)["rows"]
    assert text["rescaled"] == text["base"] and rows["rescaled"] == rows["base"]
    header = next(line for line in text["base"].splitlines() if line.split()[:1] == ["alpha"]).split()
    assert header[:4] == ["alpha", "beta", "a", "b"] and not {"E", "A", "B"} & set(header)
    assert text["steeper"] != text["base"]
    mine = rows["steeper"][0]
    g = (alpha * base.A / (beta * base.B)) ** (1 / (alpha + beta))
    assert mine["a"] == pytest.approx(beta / (alpha + beta), rel=1e-12)
    assert mine["tokens_per_param"] == pytest.approx(   # D/N = G^-2 (C/6)^(b - a) at C = 1e21
        g**-2 * (1e21 / 6) ** ((alpha - beta) / (alpha + beta)), rel=1e-9)
    # The printed caveats are the ones the comparison follows, and the Chinchilla caveat's
    # "tokens-per-parameter ratio that grows with C" holds for its row: x 100^((0.34-0.28)/0.62).
    for caveat in CAVEATS:
        assert f"- {caveat}" in text["base"]
    chin = rows["base"][2]
    assert chin["name"] == "chinchilla"
    assert chin["tokens_per_param_large"] / chin["tokens_per_param"] == pytest.approx(
        100 ** ((0.34 - 0.28) / 0.62), rel=1e-9)


def test_compare_approaches_agreement_rules():
    law = BESIROGLU.law
    agree = {"approach_1": {"a": 0.52, "a_ci": [0.49, 0.55]}, "approach_2": {"a": 0.50, "a_ci": [0.47, 0.53]}}
    rows, warnings = compare_approaches(agree, law, Intervals.from_json(CI))
    assert [r["approach"] for r in rows] == ["approach_1", "approach_2", "approach_3"]
    assert rows[2]["a"] == pytest.approx(law.a) and rows[2]["a_ci"] == (0.48, 0.54)
    assert warnings == []
    apart = {"approach_1": {"a": 0.62, "a_ci": [0.58, 0.66]}, "approach_2": {"a": 0.50, "a_ci": [0.47, 0.53]}}
    _, warnings = compare_approaches(apart, law, Intervals.from_json(CI))
    assert len(warnings) == 2 and all("Approach 1" in w for w in warnings)
    # Overlapping intervals are not agreement: a gap beyond the facing half-widths in quadrature
    # (0.04 and 0.033 here) is a systematic difference, as on tables where Approach 3 sits 0.05 off.
    gap = law.a - 0.46
    assert 0.04 < gap < 0.054
    _, warnings = compare_approaches({"approach_2": {"a": 0.46, "a_ci": [0.42, 0.50]}}, law, Intervals.from_json(CI))
    assert len(warnings) == 1 and "Approach 2" in warnings[0]
    # One interval: the other's point estimate must fall inside it.
    _, warnings = compare_approaches({"approach_1": {"a": 0.6}}, law, Intervals.from_json(CI))
    assert len(warnings) == 1 and "no interval" in warnings[0]
    _, warnings = compare_approaches({"approach_1": {"a": 0.6}}, law, None)
    assert warnings == []  # no interval anywhere: nothing to judge


# ----------------------------------------------------------------------------- CLI

def test_cli_compare_prints_table_caveats_and_approaches(tmp_path, capsys):
    approaches = {"approach_1": {"a": 0.70, "a_ci": None}, "approach_2": {"a": 0.51, "a_ci": [0.47, 0.55]}}
    path = write_fit(tmp_path, approaches=approaches)
    assert main(["compare", str(path)]) == 0
    out = capsys.readouterr().out
    assert "chinchilla" in out and "besiroglu" in out and "kaplan" in out
    assert "not comparable" in out
    assert "Approach 2 (IsoFLOP)" in out and "warning: Approach 1" in out
    assert main(["compare", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rows"][0]["alpha"] == pytest.approx(BESIROGLU.law.alpha)
    assert data["reference_compute"] == 1e21 and len(data["warnings"]) == 2


@pytest.mark.parametrize("flops", [FlopsPerToken(), FlopsPerToken("exact", kappa=0.5, gamma=1.1, max_error=0.01)],
                         ids=["table-6ND", "store-exact"])
def test_cli_compare_names_the_fits_compute_measure_in_every_column_of_c(tmp_path, capsys, flops):
    # A table's fit counts C = 6ND, a run store's exact FLOPs: each D/N column splits C in that count and says
    # which, as the report's comparison does; --json carries the count as `scaling plan --json` does.
    path = write_fit(tmp_path, compute=flops.to_dict())
    assert main(["compare", str(path)]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "D/N at" in line)
    assert header.count("D/N at") == header.count(f"({flops.name})") == 2
    assert main(["compare", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compute_measure"] == flops.to_dict()


def test_cli_compare_bad_file_exits_2(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["compare", str(bad)]) == 2
    assert "bad.json" in capsys.readouterr().err


def plan_json(capsys, *argv):
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("key,law", [("chinchilla", CHINCHILLA.law), ("besiroglu", BESIROGLU.law)])
def test_cli_plan_matches_numerical_minimiser(capsys, key, law):
    out = plan_json(capsys, "--law", key, "--compute", "1e23")
    (entry,) = out["plans"]
    optimum, rule, kaplan = entry["allocations"]
    check = numerical_optimum(law, 1e23)
    assert optimum["method"] == "law"
    assert optimum["n"] == pytest.approx(check.n, rel=1e-6)
    assert optimum["d"] == pytest.approx(check.d, rel=1e-6)
    assert optimum["tokens_per_param"] == pytest.approx(check.d / check.n, rel=1e-6)
    assert optimum["loss"] == pytest.approx(check.loss, rel=1e-9)
    assert rule["n"] == pytest.approx((1e23 / 120) ** 0.5) and rule["tokens_per_param"] == pytest.approx(20)
    assert kaplan["n"] == pytest.approx(1.3e9 * (1e23 / 8.64e19) ** 0.73)
    assert optimum["loss"] < rule["loss"] and optimum["loss"] < kaplan["loss"]


def test_cli_plan_several_budgets_default_law_and_table(capsys):
    out = plan_json(capsys, "--compute", "1e18", "1e21", "1e23")
    assert [p["compute"] for p in out["plans"]] == [1e18, 1e21, 1e23]
    assert out["law"].startswith("chinchilla") and "default" in out["law"]
    assert main(["plan", "--compute", "1e21"]) == 0
    text = capsys.readouterr().out
    assert "law optimum" in text and "20 tokens/param" in text and "kaplan" in text
    assert f"{CHINCHILLA.law.n_opt(1e21):.4g}" in text


def test_cli_plan_kaplan_has_no_loss(capsys):
    out = plan_json(capsys, "--law", "kaplan", "--compute", "1e23")
    methods = [a["method"] for a in out["plans"][0]["allocations"]]
    assert methods == ["20 tokens/param", "kaplan"]
    assert all(a["loss"] is None for a in out["plans"][0]["allocations"])
    assert any("not predicted" in n for n in out["notes"])


def test_cli_plan_with_fit_and_extrapolation_note(tmp_path, capsys):
    law = Law(E=2.0, A=300.0, B=900.0, alpha=0.3, beta=0.33)
    path = write_fit(tmp_path, law=law)
    out = plan_json(capsys, "--fit", str(path), "--compute", "1e17", "1e21")
    assert out["law"] == f"your fit {path}"
    assert out["plans"][1]["allocations"][0]["n"] == pytest.approx(numerical_optimum(law, 1e21).n, rel=1e-6)
    # c_range tops out at 1e19: 1e21 is 2 orders beyond, 1e17 is not.
    extrapolation, no_samples = out["notes"]        # a hand-written fit.json: no bootstrap samples beside it
    assert "2.0 orders of magnitude" in extrapolation and "no bootstrap samples" in no_samples


@pytest.mark.parametrize("argv,message", [
    (["--compute", "0"], "positive"),
    (["--compute", "nan"], "positive, finite"),
    (["--compute", "inf"], "positive, finite"),
    (["--compute=-1e20"], "positive"),
    (["--compute", "1e21", "lots"], "'lots' (not a number)"),
    (["--compute", "1e21", "--law", "gpt"], "unknown law 'gpt'"),
    (["--compute", "1e21", "--law", "chinchilla", "--fit", "x.json"], "not both"),
    (["--compute", "1e21", "--fit", "nowhere.json"], "nowhere.json"),
])
def test_cli_plan_bad_input_exits_2(capsys, argv, message):
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scaling plan: error:") and message in err


def test_cli_plan_rejects_a_file_that_is_not_a_fit(tmp_path, capsys):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "something else"}))
    assert main(["plan", "--compute", "1e21", "--fit", str(other)]) == 2
    assert "other.json" in capsys.readouterr().err


def test_negative_compute_exits_2_whoever_catches_it(capsys):
    # "-5" and "-1e20" alike reach the check that names them (argparse before 3.13 took "-1e20" for an
    # option, "expected at least one argument"), beside a valid budget too.
    for values in (["-5"], ["-1e20"], ["1e21", "-1e20"]):
        assert main(["plan", "--compute", *values]) == 2
        assert f"must be a positive, finite number, got '{values[-1]}'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["plan"])
    assert exc.value.code == 2 and "--compute" in capsys.readouterr().err


def test_python_m_scaling_plan_exit_codes():
    # Both at once: each start imports every command module (~3 s).
    cmd = [sys.executable, "-m", "scaling", "plan"]
    ok = subprocess.Popen(cmd + ["--law", "besiroglu", "--compute", "1e23", "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bad = subprocess.Popen(cmd + ["--compute", "nan"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ok_out, ok_err = ok.communicate(timeout=120)
    _, bad_err = bad.communicate(timeout=120)
    assert ok.returncode == 0, ok_err
    n = json.loads(ok_out)["plans"][0]["allocations"][0]["n"]
    assert n == pytest.approx(numerical_optimum(BESIROGLU.law, 1e23).n, rel=1e-6)
    assert bad.returncode == 2
    assert "positive, finite" in bad_err and "Traceback" not in bad_err


@pytest.mark.parametrize("flops", [FlopsPerToken(), FlopsPerToken("exact", kappa=1.3, gamma=0.97)])
def test_end_to_end_with_a_real_fit_json(tmp_path, capsys, flops):
    # scaling.laws.results.lawfit writes the file; compare and plan read it back. The plan spends C in the fit's
    # own measure: c(N_opt) D_opt = C, at the numerical minimiser's point.
    import numpy as np

    from scaling.laws.analysis import fit_data
    from scaling.laws.fitting.fitdata import FitData
    from scaling.laws.results.fit_file import load_fit, write_fit

    law = BESIROGLU.law
    n, d = (g.ravel() for g in np.meshgrid(np.logspace(7, 9, 6), np.logspace(9, 11, 6)))
    loss = law.loss(n, d) * np.exp(np.random.default_rng(0).normal(0, 0.003, n.size))
    data = FitData(n, d, loss, "synthetic", flops=flops)
    path = write_fit(tmp_path / "fit.json", fit_data(data, bootstrap=30, form="chinchilla", forms=False))
    out = plan_json(capsys, "--fit", str(path), "--compute", "1e22")
    assert out["compute_measure"] == flops.to_dict()
    fitted = Law(**json.loads(path.read_text())["params"], flops=flops)
    (entry,) = out["plans"]
    optimum, intervals = entry["allocations"][0], entry["intervals"]
    # 1e22 lies beyond the points: the law that predicts there, and plans, is the backtest's.
    check = numerical_optimum(load_fit(path).planning_law(1e22), 1e22)
    assert optimum["n"] == pytest.approx(check.n, rel=1e-6) and optimum["d"] == pytest.approx(check.d, rel=1e-6)
    assert float(flops.per_token(optimum["n"])) * optimum["d"] == pytest.approx(1e22, rel=1e-6)
    assert intervals["n"][0] < optimum["n"] < intervals["n"][1]
    assert intervals["d"][0] < optimum["d"] < intervals["d"][1]
    if not flops.is_six_n:
        return                    # the literature's a counts 6 N D: compared on that count only
    assert main(["compare", str(path), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["your fit"]["a"] == pytest.approx(fitted.a)
    assert rows["besiroglu"]["inside"]["a"] is True   # the law the points came from
    assert rows["chinchilla"]["inside"]["a"] is False  # a = 0.452, far below


def test_compare_splits_every_law_in_the_fits_count_of_compute():
    # A run store's law counts C = c(N) D (here 6 x 0.5 N^1.1 D): the comparison's D/N of Kaplan and of the
    # published laws are their splits of C in that count, as `scaling plan --fit` gives them; their
    # exponents stay the published ones. The header names the count.
    law = replace(BESIROGLU.law, flops=FlopsPerToken("exact", kappa=0.5, gamma=1.1))
    rows = {r["name"]: r for r in compare(law, None, 1e21, large_compute=1e22)}
    planned = {a.method: a for a in compare_allocations(law, 1e22)}
    assert rows["kaplan"]["tokens_per_param_large"] == pytest.approx(planned["kaplan"].tokens_per_param, rel=1e-12)
    assert rows["kaplan"]["tokens_per_param_large"] != pytest.approx(kaplan_allocation(1e22).tokens_per_param)
    chin = replace(CHINCHILLA.parametric_law, flops=law.flops)
    assert rows["chinchilla"]["tokens_per_param"] == pytest.approx(float(chin.tokens_per_param(1e21)), rel=1e-12)
    assert rows["chinchilla"]["a"] == pytest.approx(CHINCHILLA.parametric_law.a)
    header, _ = table_cells(list(rows.values()), 1e21, large_compute=1e22, measure="exact FLOPs")
    assert header[-2:] == ["D/N at 1e21 (exact FLOPs)", "D/N at 1e22 (exact FLOPs)"]
