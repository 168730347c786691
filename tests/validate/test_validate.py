"""`scaling validate`: three real micro runs at one compute, stored with their role, resumed,
never fitted; the prediction they are compared with; the refusal of a law that is not identified."""

import json
import math
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import yaml

import scaling
from scaling.cli import main
from scaling.errors import UsageError
from scaling.laws import analysis
from scaling.laws.checks.verdict import Diagnostics
from scaling.laws.design import simulate
from scaling.laws.fitting import readers
from scaling.laws.forms.law import Law
from scaling.laws.results.fit_file import load_fit, write_fit
from scaling.laws.results.fit_sections import DataSummary
from scaling.laws.results.lawfit import LawFit
from scaling.runs import store
from scaling.sweeps.plan import planned_run
from scaling.validation.family import family_of
from scaling.validation.result import Validation, ValidationRun, headline, load_validation
from scaling.validation.run import prepare, recipe, validate
from tests.conftest import MICRO, micro_config
from tests.test_readme_numbers import readme_excerpt

# A known law whose optimum at C = 5e9 (N about 16K) lies among the micro family's sizes, so the
# three runs are micro runs of seconds; its scale is the micro runs' (losses about 5.5).
LAW = Law(E=2.0, A=80.0, B=128.0, alpha=0.4, beta=0.4)
COMPUTE = 5e9


@pytest.fixture(scope="module")
def known_fit(tmp_path_factory):
    """fit.json of an IsoFLOP sweep simulated from LAW (0.5% noise), and the micro config's YAML."""
    runs = simulate.isoflop_grid(np.geomspace(5e8, 4e9, 4), LAW, per_budget=5, span=4.0)
    # forms=True: the tests of validating under another form (`--form kaplan`) read the forms beside it.
    fit = analysis.fit_data(simulate.simulate(LAW, runs, noise=0.005, seed=0), bootstrap=40, forms=True)
    root = tmp_path_factory.mktemp("validate")
    config = root / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    return write_fit(root / "fit", fit), config


def test_validate_trains_three_runs_stores_them_and_resumes(known_fit, tmp_path, cache_dir, capsys):
    fit_path, config = known_fit
    fit = load_fit(fit_path)
    assert fit.diagnostics.verdict != "not identified"
    args = ["validate", str(fit_path), "--compute", "5e9", "--config", str(config), "--runs-dir", str(tmp_path),
            "--cache-dir", str(cache_dir)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "at C = 5e+09 (extrapolation): predicted" in out and "observed" in out
    result = load_validation(fit_path.parent / "validate.json")
    # README.md's excerpt of the demo (bench/readme_numbers.py --readme), remade from validate.json, is
    # the command and lines it printed, in their order.
    quoted = readme_excerpt(capsys, tmp_path, fit_path.parent)[f"$ scaling validate {fit_path.parent} --compute 5e9"]
    assert "predicted" in quoted[-1] and "\n".join(quoted) in out

    # The store: three runs marked as validation runs, planned for this compute, on D = C / 6N.
    sweep_dir = tmp_path / "micro-validate"
    table = pd.read_csv(sweep_dir / "runs.csv")
    assert len(table) == 3 and (table.role == "validation").all() and (table.budget == COMPUTE).all()
    family = family_of(micro_config())
    for run in result.runs:
        summary = store.read_summary(sweep_dir / run.run_id)
        assert summary["role"] == "validation" and summary["status"] == run.status == "finished"
        assert run.observed == summary["final_val_loss"] and run.context_use == summary["final_context_use"]
        assert abs(run.d - COMPUTE / (6 * run.n)) <= micro_config().train.batch_tokens / 2
        # beyond the data the prediction is the backtest's (the law less under-trained runs, moved by its bias)
        assert run.predicted == pytest.approx(fit.expected_loss(run.n, run.d), rel=1e-12)
        assert run.interval[0] < run.interval[1]
        assert run.inside == (run.interval[0] <= run.observed <= run.interval[1])
    # The optimum run is the family's shape nearest the law's N_opt; the neighbours straddle it.
    n_opt = float(fit.law.n_opt(COMPUTE))
    nearest = min((family.n_params(s) for s in family.candidates(4 * n_opt)), key=lambda n: abs(math.log(n / n_opt)))
    assert result.run("optimum").n == nearest
    assert result.run("smaller").n < nearest < result.run("larger").n
    observed = {r.position: r.observed for r in result.runs}
    assert result.optimum_holds == (observed["optimum"] < min(observed["smaller"], observed["larger"]))

    # The report beside the fit shows it: the table, the headline and the figure.
    assert main(["report", str(fit_path.parent), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Validation: the recommended model, trained" in text and headline(result) in text
    assert (tmp_path / "report" / "figures" / "validation.png").is_file()

    # A second validation trains nothing and finds the same.
    stamps = {p: p.stat().st_mtime_ns for p in sweep_dir.glob("*/summary.json")}
    again = validate(fit, micro_config(), COMPUTE, runs_dir=tmp_path, cache_dir=cache_dir, fit_path=str(fit_path))
    assert again.to_json() == result.to_json()
    # scaling.validate, given the fit's folder, is the same call.
    same = scaling.validate(fit_path.parent, COMPUTE, config=config, runs_dir=tmp_path, cache_dir=cache_dir)
    assert same.to_json() == result.to_json()
    assert {p: p.stat().st_mtime_ns for p in sweep_dir.glob("*/summary.json")} == stamps

    # Its dry run on a copy of the store reuses the three runs as they ended: nothing to train.
    copy = tmp_path / "copy"
    shutil.copytree(sweep_dir, copy / sweep_dir.name)
    dry = [*args[:-4], "--runs-dir", str(copy), "--dry-run"]
    capsys.readouterr()
    assert main(dry) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-2:] == [headline(result), "0 of 3 runs to train; 3 ended in the store, reused (3 finished): "
                                            "est. wall 0 s, nothing to train"]
    shutil.rmtree(copy / sweep_dir.name / result.run("optimum").run_id)   # one run left: only it counts
    assert main([*dry, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(r["status"], r["observed"]) for r in shown["runs"]] == [
        ("would train", None) if r.position == "optimum" else ("finished", r.observed) for r in result.runs]
    assert (shown["runs_reused"], shown["runs_to_train"], shown["runs_resumed"]) == (2, 1, 0)
    assert [r["est_wall_s"] > 0 for r in shown["runs"]] == [False, True, False]
    assert shown["est_wall_s"] == shown["runs"][1]["est_wall_s"]

    # Never fitted: a validation run copied into a sweep's store is left out, and says why.
    mixed = tmp_path / "mixed"
    shutil.copytree(sweep_dir, mixed)
    shutil.rmtree(mixed / result.run("optimum").run_id)
    for position in ("smaller", "larger"):   # made a fit point: the same run without its role
        path = mixed / result.run(position).run_id / store.SUMMARY
        summary = json.loads(path.read_text())
        del summary["role"]
        path.write_text(json.dumps(summary))
    shutil.copytree(sweep_dir / result.run("optimum").run_id, mixed / result.run("optimum").run_id)
    data = readers.from_runs(mixed)
    assert len(data) == 2 and result.run("optimum").run_id not in data.ids
    assert [d.reason for d in data.dropped] == ["a validation run: it checks a fit, and is never fitted"]


def test_a_fit_that_is_not_identified_is_refused_unless_forced(known_fit, tmp_path, capsys):
    fit_path, config = known_fit
    fit = load_fit(fit_path)
    doubtful = replace(fit, diagnostics=Diagnostics(fit.diagnostics.checks, "not identified",
                                                    ("tokens per parameter's interval spans x40",)))
    path = write_fit(tmp_path / "doubtful", doubtful)
    args = ["validate", str(path), "--compute", "5e9", "--config", str(config), "--runs-dir", str(tmp_path / "runs")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "verdict is 'not identified' (tokens per parameter's interval spans x40)" in err and "--force" in err
    assert not (tmp_path / "runs").exists()
    assert main([*args, "--force", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "validated anyway (--force)" in out and out.count("would train") == 4   # three runs and the headline
    assert not (tmp_path / "runs").exists() and sorted(p.name for p in (tmp_path / "doubtful").iterdir()) == [
        "fit.bootstrap.csv", "fit.json", "fit.points.csv"]


def test_dry_run_json_is_the_planned_validation_and_trains_nothing(known_fit, tmp_path, capsys):
    fit_path, config = known_fit
    assert main(["validate", str(fit_path), "--compute", "5e9", "--config", str(config), "--runs-dir", str(tmp_path),
                 "--out", str(tmp_path / "out"), "--dry-run", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    _, _, planned = prepare(load_fit(fit_path), micro_config(), COMPUTE, runs_dir=tmp_path, fit_path=str(fit_path))
    added = ("runs", "wall_basis", "workers", "est_wall_s", "runs_reused", "runs_to_train", "runs_resumed")
    assert {k: v for k, v in shown.items() if k not in added} == {
        k: v for k, v in json.loads(json.dumps(planned.to_json())).items() if k != "runs"}
    assert [r["run_id"] for r in shown["runs"]] == [r.run_id for r in planned.runs]
    assert [r["predicted"] for r in shown["runs"]] == [r.predicted for r in planned.runs]
    assert all(r["status"] == "would train" and r["observed"] is None and r["est_wall_s"] > 0 for r in shown["runs"])
    assert shown["est_wall_s"] >= max(r["est_wall_s"] for r in shown["runs"]) and shown["workers"] >= 1
    assert (shown["runs_reused"], shown["runs_to_train"], shown["runs_resumed"]) == (0, 3, 0)
    assert list(tmp_path.iterdir()) == []     # neither the runs nor validate.json


def test_a_compute_inside_the_sweep_is_an_interpolation(known_fit, tmp_path):
    fit = load_fit(known_fit[0])
    _, _, planned = prepare(fit, micro_config(), 2e9, runs_dir=tmp_path)
    assert planned.kind == "interpolation" and planned.largest_fit_compute >= 2e9
    assert all(r.status == "planned" and r.observed is None for r in planned.runs)


@pytest.mark.parametrize("form", ["kaplan", "farseer"])
def test_under_a_form_the_runs_validated_are_about_the_optimum_plan_recommends(known_fit, tmp_path, form):
    # `--form kaplan` plans by the Kaplan form's optimum (`scaling plan --fit`): the three runs are about
    # it, and the N_opt, D_opt recorded are its, with its predictions; here the Chinchilla form's
    # optimum (which they were planned about) lies at another of the family's sizes.
    fit = replace(load_fit(known_fit[0]), form=form)
    vcfg, _, planned = prepare(fit, micro_config(), COMPUTE, runs_dir=tmp_path)
    best, family = fit.plan(COMPUTE), family_of(vcfg, fit.data.param_convention or "non_embedding")
    assert (planned.n_opt, planned.d_opt) == (pytest.approx(best.n, rel=1e-12), pytest.approx(best.d, rel=1e-12))
    optimum = next(r for r in planned.runs if r.position == "optimum")
    assert optimum.n == family.n_params(family.shape_near(best.n))
    assert optimum.n != family.n_params(family.shape_near(fit.law.n_opt(COMPUTE)))
    assert optimum.predicted == pytest.approx(fit.expected_loss(optimum.n, optimum.d), rel=1e-12)


def test_the_recipe_read_back_from_a_store_gives_the_sweep_its_run_ids(micro_sweep):
    cfg, sweep = micro_sweep
    fit = LawFit(law=LAW, data=DataSummary(source=f"runs {sweep.sweep_dir}"))
    read = recipe(fit, None)
    assert read.name == cfg.name and read.train == cfg.train and read.model == cfg.model
    for row in sweep.table.itertuples():
        shape = next(s for s in read.grid.models if (s.d_model, s.n_layers) == (row.d_model, row.n_layers))
        assert planned_run(read, shape, int(row.tokens), shape.lr).run_id == row.run_id
    with pytest.raises(UsageError, match="give the sweep's config$"):
        recipe(replace(fit, data=DataSummary(source="table runs.csv")), None)


def test_a_family_of_one_depth_is_extended_in_width_at_that_depth():
    """Every sweep shape two layers deep: the validation's shapes keep two layers at any size (the
    aspect-ratio rule would deepen them, another family than the law's); mixed depths keep the rule."""
    two_layers = [{"d_model": d, "n_layers": 2, "n_heads": d // 16} for d in (32, 48, 64)]
    family = family_of(micro_config(grid={**MICRO["grid"], "models": two_layers}))
    assert family.depth == 2
    shapes = family.candidates(5e6)
    assert {s.n_layers for s in shapes} == {2} and [s.d_model for s in shapes[:3]] == [16, 32, 48]
    assert family.shape_near(2e6).n_layers == 2
    mixed = family_of(micro_config())      # d16/L1 and d32/L2
    assert mixed.depth is None and len({s.n_layers for s in mixed.candidates(5e6)}) > 1


def validation_with(context_uses, fitted=(-0.068, -0.015)) -> Validation:
    """The demo's validation at 6e12 as measured (losses, context use of each run; README)."""
    runs = tuple(ValidationRun(p, f"run-{p}", 48, 2, 3, 4e-3, n, d, predicted, (predicted - 0.04, predicted + 0.04),
                               "finished", observed, use)
                 for p, n, d, predicted, observed, use in zip(
                     ("smaller", "optimum", "larger"), (5.6e4, 1.5e5, 4.4e5), (7.75e6, 3.62e6, 1.39e6),
                     (3.742, 3.699, 3.770), (3.498, 3.488, 3.769), context_uses))
    return Validation(6e12, 2e12, 1.5e5, 3.6e6, 0.95, runs, "use with caution", False, "runs/tiny-validate",
                      "fits/tiny/fit.json", LAW.to_dict(), fitted)


def test_runs_that_leave_the_fitted_runs_regime_of_context_use_are_named():
    """The demo's miss: the two runs 6% below their intervals used their context beyond every
    fitted run; the one inside its interval did not. Named in the headline and validate.json."""
    moved = validation_with((0.089, 0.083, -0.062))
    assert [r.position for r in moved.new_regime] == ["smaller", "optimum"]
    assert "the smaller and optimum runs used their context (smaller +0.089, optimum +0.083 nats) beyond every " \
           "fitted run (at most -0.015)" in headline(moved)
    assert moved.to_json()["new_regime"] == ["smaller", "optimum"]
    assert Validation.from_json(json.loads(json.dumps(moved.to_json()))) == moved
    within = validation_with((0.01, 0.02, -0.05))              # within 0.04 nats of the fitted runs
    assert within.new_regime == () and "context" not in headline(within)
    unknown = validation_with((0.089, 0.083, -0.062), fitted=None)   # runs from before it was recorded
    assert unknown.new_regime == () and "context" not in headline(unknown)
    old = json.loads(json.dumps(moved.to_json()))             # a validate.json from before: still read
    del old["fit_context_use"]
    for run in old["runs"]:
        del run["context_use"]
    assert Validation.from_json(old).new_regime == ()


def test_the_fitted_runs_context_use_is_recorded_in_fit_json_and_planned_with(micro_sweep, known_fit, tmp_path):
    _, sweep = micro_sweep
    points = readers.from_runs(sweep.sweep_dir)
    uses = pd.read_csv(sweep.sweep_dir / "runs.csv").set_index("run_id").loc[list(points.ids), "final_context_use"]
    assert uses.notna().all()
    fit = load_fit(write_fit(tmp_path / "fit", analysis.fit_data(points, bootstrap=20, backtest=False)))
    assert fit.data.context_use == [uses.min(), uses.max()]
    table_fit = load_fit(known_fit[0])                          # a table records none
    assert table_fit.data.context_use is None
    _, _, planned = prepare(replace(table_fit, data=replace(table_fit.data, context_use=[-0.05, -0.01])),
                            micro_config(), COMPUTE, runs_dir=tmp_path)
    assert planned.fit_context_use == (-0.05, -0.01)
