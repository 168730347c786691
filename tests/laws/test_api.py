"""`scaling.fit`, `scaling.load` and the LawFit's notebook view: the same fit as `scaling fit`,
its numbers by name, a plan and a prediction with intervals that hold the truth, a short repr."""

import doctest
import importlib
import inspect
import json
import math
import re
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

import scaling
from scaling.cli import main
from scaling.errors import UsageError
from scaling.formats import json_safe
from scaling.laws import api
from scaling.laws.design.simulate import isoflop_grid, simulate
from scaling.laws.fitting import readers
from scaling.laws.fitting.bootstrap import spread
from scaling.laws.forms.law import Law
from scaling.laws.results import fit_file
from scaling.laws.results import lawfit as results

DOCS = Path(__file__).resolve().parents[2] / "docs"
CHINCHILLA_CSV = readers.data_file("chinchilla.csv")
TRUTH = Law(E=1.9, A=400.0, B=1500.0, alpha=0.33, beta=0.30)


@pytest.fixture(scope="module")
def chinchilla():
    return scaling.fit(CHINCHILLA_CSV, drop_highest_loss=5, bootstrap=200)


def test_fit_of_a_table_is_besiroglu_refit_by_name(chinchilla):
    f = chinchilla
    assert round(f.alpha, 4) == 0.3473 and round(f.beta, 4) == 0.3672 and round(f.E, 4) == 1.8172
    assert (f.A, f.B, f.alpha) == (f.law.A, f.law.B, f.law.alpha)
    assert f.verdict == "use with caution" and f.reasons == f.diagnostics.reasons and f.reasons
    assert set(f.intervals) == {"E", "A", "B", "alpha", "beta", "a", "b", "G", "tokens_per_param"}
    lo, hi = f.interval("alpha")
    assert f.intervals["alpha"] == (lo, hi)
    assert lo < f.alpha < hi
    assert f.data.n_points == 240 and len(f.data.dropped) == 5


def test_fit_is_the_command_line_fit_byte_for_byte(chinchilla, tmp_path, capsys):
    # scaling fit calls scaling.fit: the same options give the same fit.json, and the same summary.
    assert main(["fit", "--csv", str(CHINCHILLA_CSV), "--drop-highest-loss", "5", "--bootstrap", "200",
                 "--out", str(tmp_path / "cli")]) == 0
    printed = capsys.readouterr().out
    mine = fit_file.write_fit(tmp_path / "api", chinchilla)
    assert mine.read_bytes() == (tmp_path / "cli" / "fit.json").read_bytes()
    assert printed.startswith(chinchilla.summary() + "\n")


def test_a_dataset_name_a_frame_and_a_path_give_the_same_points():
    frame = pd.read_csv(CHINCHILLA_CSV)
    kinds = [api.kind_of(s) for s in ("chinchilla", frame, CHINCHILLA_CSV, CHINCHILLA_CSV.parent)]
    assert kinds == ["dataset", "frame", "table", "store"]
    digests = {api.points(s).digest for s in ("chinchilla", frame, CHINCHILLA_CSV)}
    assert digests == {readers.from_dataset("chinchilla").digest}


def test_plan_and_predict_cover_the_truth_of_a_simulated_sweep():
    # A sweep simulated from a known law, with 1% scatter: the 95% intervals hold the truth.
    data = simulate(TRUTH, isoflop_grid(np.geomspace(1e17, 1e20, 4), TRUTH, per_budget=6), noise=0.01, seed=3)
    frame = pd.DataFrame({"N": data.n, "D": data.d, "loss": data.loss})
    f = scaling.fit(frame, n="N", d="D", loss="loss", bootstrap=200)
    plan = f.plan(1e21)
    lo, hi = plan.intervals.n
    assert lo < TRUTH.n_opt(1e21) < hi and lo < plan.n < hi
    assert math.isclose(plan.tokens_per_param, plan.d / plan.n)
    p = f.predict(1e9, 2e10)          # 1.2e20 FLOPs: 1.2x beyond the sweep's largest run
    assert p.interval[0] < TRUTH.loss(1e9, 2e10) < p.interval[1] and p.level == 0.95
    assert p.beyond == pytest.approx(1.2) and p.loss == pytest.approx(f.expected_loss(1e9, 2e10))
    inside = f.predict(1e8, 2e10)     # inside the sweep: the fitted law itself, which predicts and plans by default
    assert inside.beyond == 1.0 and inside.loss == float(f.law.loss(1e8, 2e10))
    assert f.form == "chinchilla" and inside.law == plan.law == "the chinchilla form's law"


def test_load_gives_back_the_numbers_and_intervals(chinchilla, tmp_path):
    fit_file.write_fit(tmp_path, chinchilla)
    g = scaling.load(tmp_path)
    assert (g.alpha, g.verdict, g.reasons, g.intervals) == (chinchilla.alpha, chinchilla.verdict,
                                                            chinchilla.reasons, chinchilla.intervals)
    assert g.plan(1e24).intervals == chinchilla.plan(1e24).intervals
    assert g.summary() == chinchilla.summary()


def test_a_frame_without_bootstrap_fits_the_same_law_with_no_intervals(chinchilla):
    f = scaling.fit(pd.read_csv(CHINCHILLA_CSV), bootstrap=0, drop_highest_loss=5)
    assert f.law == chinchilla.law and f.data.source == "a DataFrame"
    assert set(f.intervals) == set(chinchilla.intervals) and set(f.intervals.values()) == {None}
    assert f.interval("a") is None and f.plan(1e24).intervals is None and f.predict(1e9, 1e10).interval is None
    assert "no bootstrap" in f.summary()


def test_repr_is_short(chinchilla):
    text = repr(chinchilla)
    assert len(text.splitlines()) <= 3 and len(text) < 250
    assert "0.3473" in text and "use with caution" in text
    assert len(repr(chinchilla.plan(1e24)).splitlines()) == 1


@pytest.mark.parametrize("call, message", [
    (lambda f: f.plan(-1), "compute must be a positive"),
    (lambda f: f.predict(0, 1e10), "N (parameters) must be a positive"),
    (lambda f: f.predict(1e9, "many"), "D (tokens) 'many' is not a number"),
])
def test_bad_numbers_are_named(chinchilla, call, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        call(chinchilla)


@pytest.mark.parametrize("source, options, message", [
    ("chinchilla", {"n": "N"}, "column options (n) apply to a table or a DataFrame"),
    (CHINCHILLA_CSV, {"compute_measure": "exact"}, "the compute measure applies to a run store"),
    (42, {}, "the points must be a DataFrame"),
    ("no/such.csv", {}, "no/such.csv"),
])
def test_bad_sources_are_named(source, options, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        scaling.fit(source, bootstrap=0, **options)


def test_options_are_keywords_of_their_own():
    # Every option is a named keyword: a misspelt one is Python's TypeError, before any reading.
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        scaling.fit(CHINCHILLA_CSV, colour="N")
    for function in (scaling.fit, api.points):
        params = inspect.signature(function).parameters
        assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
        assert {"n", "d", "c", "loss", "embedding", "budget", "unique", "param_convention"} <= set(params)


def test_a_library_error_names_options_in_words_and_the_command_line_its_flags(capsys):
    with pytest.raises(UsageError) as caught:
        scaling.fit("chinchilla", curves=True, bootstrap=0)
    assert "--" not in str(caught.value) and caught.value.options == ("curves", "metric")
    assert main(["fit", "--dataset", "chinchilla", "--curves"]) == 2
    assert capsys.readouterr().err.rstrip().endswith(f"{caught.value} (--curves, --metric)")


def test_sweep_and_validate_are_the_stages_functions_beside_their_packages():
    # Importing a module of the packages must not rebind the functions' names.
    plan = importlib.import_module("scaling.sweeps.plan")
    run = importlib.import_module("scaling.validation.run")
    assert scaling.sweeps.plan is plan and scaling.validation.run is run
    assert scaling.sweep is importlib.import_module("scaling.sweeps.driver").sweep
    assert scaling.validate is run.validate_fit


def test_tune_and_design_are_the_commands_functions_beside_their_packages():
    # The tuning stage's package is `scaling.tuning`: a subpackage `scaling.tune`, once imported, would
    # rebind the name `scaling.tune` to itself.
    importlib.import_module("scaling.tuning.shapes"), importlib.import_module("scaling.laws.design.sweep")
    assert scaling.tune is importlib.import_module("scaling.tuning.run").tune
    assert scaling.design is importlib.import_module("scaling.laws.design.outlooks").design


def test_scaling_design_is_the_commands_outlook(chinchilla, tmp_path, capsys):
    # A fit of the Chinchilla table as the prior of configs/tiny.yaml: the function's result is the
    # command's --json, to the bit; the LawFit itself (not its folder) gives the same outlooks.
    fit_file.write_fit(tmp_path, chinchilla)
    config = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"
    options = {"sims": 1, "bootstrap": 10, "seed": 3}
    assert main(["design", str(config), "--fit", str(tmp_path), "--sims", "1", "--bootstrap", "10", "--seed", "3",
                 "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    designs = scaling.design(config, fit=tmp_path, **options)
    assert json.loads(json.dumps(json_safe(designs.to_json()))) == printed
    assert designs.configs == (str(config),) and designs.outlooks[0].n_runs == printed["designs"][0]["n_runs"] > 6
    assert scaling.design([config], fit=chinchilla, **options).outlooks == designs.outlooks
    with pytest.raises(UsageError, match="--anneal and --run-noise apply to --curves"):
        scaling.design(config, law="besiroglu", anneal=0.03)


def test_the_api_page_runs():
    # docs/api.md's examples are doctests: they run as written, and their output is checked.
    failures, tried = doctest.testfile(str(DOCS / "api.md"), module_relative=False,
                                       optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert tried > 5 and failures == 0


# --------------------------------------------------------------------------------------------
# Arrays, one spelling of an interval, a plot


def test_predict_and_plan_broadcast_as_their_calls_one_value_at_a_time(chinchilla):
    # Each element of a broadcast call is, to the bit, the scalar call's (intervals too: the
    # fit's intervals are widened, so the column-wise spread is checked as well).
    assert chinchilla.ci.widened_by > 1
    n, d = np.array([[1e8], [1e9], [7e10]]), np.array([2e10, 1.4e12])
    p = chinchilla.predict(n, d)
    assert p.loss.shape == p.interval[0].shape == p.interval[1].shape == (3, 2)
    for i, j in np.ndindex(3, 2):
        one = chinchilla.predict(float(n[i, 0]), float(d[j]))
        assert (p.n[i, j], p.d[i, j], p.loss[i, j]) == (one.n, one.d, one.loss)
        assert (p.interval[0][i, j], p.interval[1][i, j]) == one.interval
    budgets = [1e20, 1e21, 1e24]
    plan = chinchilla.plan(budgets)
    assert plan.n.shape == plan.intervals.n[0].shape == (3,)
    for i, c in enumerate(budgets):
        one = chinchilla.plan(c)
        assert (plan.compute[i], plan.n[i], plan.d[i], plan.loss[i]) == (one.compute, one.n, one.d, one.loss)
        for name in ("n", "d", "tokens_per_param", "loss"):
            assert tuple(b[i] for b in getattr(plan.intervals, name)) == getattr(one.intervals, name)
    assert isinstance(chinchilla.plan(1e21).n, float) and isinstance(chinchilla.predict(1e9, 2e10).loss, float)
    assert repr(plan).startswith("Plan(C=[1e+20, 1e+21, 1e+24]: n=[8.55e+08 [")
    assert repr(chinchilla.predict(np.array([1e8, 1e9]), 2e10)).startswith(
        "Prediction(N=[1e+08, 1e+09], D=[2e+10, 2e+10]: loss [2.9669 [")


@pytest.mark.parametrize("call, message", [
    (lambda f: f.plan([1e21, -1]), "compute must be positive, finite numbers of FLOPs, got -1.0"),
    (lambda f: f.predict([1e9, 2e9, 3e9], [1e10, 2e10]), "N and D do not broadcast together"),
    (lambda f: f.interval("gamma"), "no interval named 'gamma'"),
])
def test_bad_arrays_and_names_are_named(chinchilla, call, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        call(chinchilla)


def test_an_interval_has_one_spelling_and_none_means_none(chinchilla):
    assert chinchilla.intervals == {k: chinchilla.interval(k) for k in chinchilla.intervals}
    with pytest.warns(DeprecationWarning, match="LawFit.interval"):
        assert chinchilla.ci.get("a") == chinchilla.interval("a")
    with pytest.warns(DeprecationWarning, match="LawFit.intervals"):
        assert chinchilla.ci.bounds is chinchilla.ci.stored
    undefined = replace(chinchilla, ci=results.Intervals(0.95, 10, {"a": [None, 0.6], "b": [0.4, math.nan]}))
    assert undefined.interval("a") is None and undefined.interval("b") is None and undefined.interval("E") is None


def test_a_widened_constant_past_the_float_range_is_inf_without_a_warning():
    # The notebook's "RuntimeWarning: overflow encountered in exp": a resample's A near 1e300,
    # moved 1.7x further from the median in log, is beyond a float: inf, as percentile_intervals expects.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        moved = spread([1e300, 10.0, 100.0, np.inf], 1.7)
    assert moved[0] == np.inf and moved[3] == np.inf and moved[1] < 10.0


def test_scaling_plan_is_the_allocation_and_plan_sweep_the_sweeps_runs(chinchilla, tmp_path):
    from scaling.laws.forms.references import CHINCHILLA

    p = scaling.plan(1e21)
    assert p.n == pytest.approx(CHINCHILLA.law.n_opt(1e21), rel=1e-12) and p.intervals is None
    fit_file.write_fit(tmp_path, chinchilla)
    loaded, fresh = scaling.plan([1e21, 1e22], law=tmp_path).intervals.n, chinchilla.plan([1e21, 1e22]).intervals.n
    assert all(np.array_equal(a, b) for a, b in zip(loaded, fresh))
    with pytest.raises(UsageError, match="kaplan publishes no L"):
        scaling.plan(1e21, law="kaplan")
    assert scaling.plan_sweep is importlib.import_module("scaling.sweeps.plan").plan


def _drawn(fig) -> dict:
    """What a fit's figure holds: its axes, lines and bands, and the PNG Jupyter would show."""
    return {"axes": len(fig.axes), "lines": sum(len(a.lines) for a in fig.axes),
            "bands": sum(isinstance(c, PolyCollection) for a in fig.axes for c in a.collections),
            "png": fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"}


def test_plot_draws_a_fresh_fit_and_the_same_fit_loaded(chinchilla, tmp_path):
    fig = scaling.fit_figure(chinchilla)
    assert isinstance(fig, Figure)
    drawn = _drawn(fig)
    # Four panels (and their colour bars); every point of the fit is drawn; N_opt's band.
    assert drawn["axes"] >= 4 and drawn["bands"] == 1 and drawn["png"]
    points = sum(len(line.get_xdata()) for a in fig.axes[:1] for line in a.lines if line.get_linestyle() == "None")
    scattered = sum(len(c.get_offsets()) for c in fig.axes[0].collections)
    assert points + scattered == chinchilla.data.n_points
    fit_file.write_fit(tmp_path, chinchilla)
    loaded = scaling.load(tmp_path)
    assert loaded.points.digest == chinchilla.data.digest
    assert np.array_equal(loaded.points.compute, chinchilla.points.compute)
    assert _drawn(scaling.fit_figure(loaded)) == drawn


def test_a_fit_without_its_points_says_so(chinchilla, tmp_path):
    path = fit_file.write_fit(tmp_path, replace(chinchilla, points=None))
    assert not path.with_name("fit.points.csv").exists()
    with pytest.raises(UsageError, match="no points to draw"):
        scaling.fit_figure(scaling.load(tmp_path))


def test_the_points_file_is_tied_to_the_fitted_points_not_to_the_constants(chinchilla, tmp_path):
    path = fit_file.write_fit(tmp_path, replace(chinchilla, resampled=None, ci=None))
    edited = json.loads(path.read_text())
    edited["params"]["E"] = 1.5                       # constants edited by hand: the same points draw
    path.write_text(json.dumps(edited))
    assert scaling.load(tmp_path).points.digest == chinchilla.data.digest
    side = path.with_name("fit.points.csv")
    side.write_text("".join(side.read_text().splitlines(keepends=True)[:-1]))   # one point short
    with pytest.raises(UsageError, match="holds other points than those"):
        scaling.load(tmp_path)
