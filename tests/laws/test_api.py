"""`scaling.fit`, `scaling.load` and the LawFit's notebook view: the same fit as `scaling fit`,
its numbers by name, a plan and a prediction with intervals that hold the truth, a short repr."""

import doctest
import importlib
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import scaling
from scaling.cli import main
from scaling.errors import UsageError
from scaling.laws import api
from scaling.laws.design.simulate import isoflop_grid, simulate
from scaling.laws.fitting import readers
from scaling.laws.forms.law import Law
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
    lo, hi = f.intervals["alpha"]
    assert lo < f.alpha < hi
    assert f.data.n_points == 240 and len(f.data.dropped) == 5


def test_fit_is_the_command_line_fit_byte_for_byte(chinchilla, tmp_path, capsys):
    # scaling fit calls scaling.fit: the same options give the same fit.json, and the same summary.
    assert main(["fit", "--csv", str(CHINCHILLA_CSV), "--drop-highest-loss", "5", "--bootstrap", "200",
                 "--out", str(tmp_path / "cli")]) == 0
    printed = capsys.readouterr().out
    mine = results.write_fit(tmp_path / "api", chinchilla)
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
    p = f.predict(1e9, 2e10)
    assert p.interval[0] < TRUTH.loss(1e9, 2e10) < p.interval[1] and p.level == 0.95
    assert p.loss == pytest.approx(float(f.law.loss(1e9, 2e10)))


def test_load_gives_back_the_numbers_and_intervals(chinchilla, tmp_path):
    results.write_fit(tmp_path, chinchilla)
    g = scaling.load(tmp_path)
    assert (g.alpha, g.verdict, g.reasons, g.intervals) == (chinchilla.alpha, chinchilla.verdict,
                                                            chinchilla.reasons, chinchilla.intervals)
    assert g.plan(1e24).intervals == chinchilla.plan(1e24).intervals
    assert g.summary() == chinchilla.summary()


def test_a_frame_without_bootstrap_fits_the_same_law_with_no_intervals(chinchilla):
    f = scaling.fit(pd.read_csv(CHINCHILLA_CSV), bootstrap=0, drop_highest_loss=5)
    assert f.law == chinchilla.law and f.data.source == "a DataFrame"
    assert f.intervals == {} and f.plan(1e24).intervals is None and f.predict(1e9, 1e10).interval is None
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
    ("chinchilla", {"n": "N"}, "column options (n_col) apply to a table or a DataFrame"),
    (CHINCHILLA_CSV, {"compute_measure": "exact"}, "the compute measure applies to a run store"),
    (CHINCHILLA_CSV, {"colour": "N"}, "unknown option(s) colour"),
    (42, {}, "the points must be a DataFrame"),
    ("no/such.csv", {}, "no/such.csv"),
])
def test_bad_sources_are_named(source, options, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        scaling.fit(source, bootstrap=0, **options)


def test_sweep_and_validate_are_callable_stages_that_keep_their_modules():
    assert callable(scaling.sweep) and callable(scaling.validate)
    plan = importlib.import_module("scaling.sweep.plan")
    assert callable(scaling.sweep) and scaling.sweep.plan is plan


def test_the_api_page_runs():
    # docs/api.md's examples are doctests: they run as written, and their output is checked.
    failures, tried = doctest.testfile(str(DOCS / "api.md"), module_relative=False,
                                       optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert tried > 5 and failures == 0
