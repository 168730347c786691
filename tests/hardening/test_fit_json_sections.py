"""Issue 53, item 3: fit.json's newer sections (backtest, forms, holdout, repeated) read through the
schema. A hand edit that keeps its side files consistent (re-stamped with the edited text's digest,
as bench/bench_fit_json_fuzz.py does) is refused on load naming the section and field, never met
as a TypeError or ZeroDivisionError in summary, predict, plan or plot."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

import scaling
from scaling.errors import UsageError
from scaling.report.plot import fit_figure

BENCH = Path(__file__).parents[2] / "bench" / "bench_fit_json_fuzz.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_fit_json_fuzz", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


fuzz = _bench()


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """A small table's fit with every section: bootstrap, backtest cuts, forms, hold-out, repeated data."""
    return fuzz.fit_small_table(tmp_path_factory.mktemp("sections"))


def _edited(fitted: Path, tmp: Path, dotted: str, value) -> Path:
    """A copy of the fit with `dotted` ("a.0.b") set to `value`, its side files re-stamped."""
    folder = tmp / "fit"
    folder.mkdir()
    for path in fitted.parent.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    obj = json.loads(fitted.read_text())
    *where, last = [int(k) if k.isdigit() else k for k in dotted.split(".")]
    node = obj
    for key in where:
        node = node[key]
    node[last] = value
    fuzz.restamp(folder / "fit.json", json.dumps(obj))
    return folder / "fit.json"


# (field, value, what the refusal says): each was a traceback past the digest check (issue 53).
EDITS = {
    "a cut's errors null": ("backtest.cuts.0.errors", None, "'backtest.cuts[0].errors' input should be a valid list"),
    "a cut's errors ragged": ("backtest.cuts.0.errors", [0.1, [0.2]], "'backtest.cuts[0].errors[1]'"),
    "a cut's distances short": ("backtest.cuts.0.distances", [0.3],
                                "'backtest.cuts[0]': 'distances' must hold one entry per run of 'errors'"),
    "a made cut without its compute": ("backtest.cuts.0.train_max_compute", None,
                                       "a cut that was made (no 'reason') has its runs' 'errors', 'train_max_compute'"),
    "a covariance not square": ("backtest.covariance", [[1.0, 0.0], [0.0]], "'backtest.covariance'"),
    "a Kaplan form's alpha_D 0": ("forms.entries.2.params.alpha_D", 0.0,
                                  "'forms.entries[2]': the kaplan form's 'params': alpha_D must not be 0"),
    "a Kaplan resample's alpha_D 0": ("forms.entries.2.samples.3.3", 0.0,
                                      "the kaplan form's 'samples[3]': alpha_D must not be 0"),
    "a form's samples ragged": ("forms.entries.1.samples.0", [1.0], "each row of 'samples' must hold the 5 values"),
    "a form's cut errors null": ("forms.entries.1.cuts.0.errors", None, "'forms.entries[1].cuts[0].errors'"),
    "the median's rule text": ("forms.combined.extrapolation.growth", "x", "'forms.combined.extrapolation.growth'"),
    "the data-constrained range empty": ("repeated.unique_range", [], "'repeated.unique_range[0]' is missing"),
    "a hold-out row without its error": ("holdout.rows.0.abs_rel_error", None, "'holdout.rows[0].abs_rel_error'"),
    "intervals without the scatter": ("residual_rms", None, "'residual_rms' must be a number where the file has"),
    "a compute count of 1e-300": ("compute.gamma", 1e-300, "'compute.gamma'"),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_a_consistent_hand_edit_of_a_newer_section_is_refused_on_load(fitted, tmp_path, name):
    dotted, value, expected = EDITS[name]
    with pytest.raises(UsageError) as refused:
        scaling.load(_edited(fitted, tmp_path, dotted, value))
    assert expected in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


def test_the_untouched_fit_loads_whole(fitted):
    fit = scaling.load(fitted)
    assert fit.backtest is not None and fit.forms is not None and fit.holdout is not None and fit.repeated is not None
    assert fit.forms.entry("kaplan").samples and fit.repeated.samples is not None


def test_a_law_written_by_hand_summarises(tmp_path):
    """{"params": ...} alone is a law (docs/fit-json.md): summary printed it with a TypeError, the
    short one (the default) and the full one (verbose) both."""
    (tmp_path / "fit.json").write_text(json.dumps({"params": {"E": 1.7, "A": 400.0, "B": 410.0, "alpha": 0.34,
                                                              "beta": 0.28}}))
    fit = scaling.load(tmp_path)
    assert "alpha = 0.34" in fit.summary()
    assert "alpha  = 0.3400" in fit.summary(verbose=True)


@pytest.mark.parametrize("dotted, value, expected", [
    ("params.beta", 0, "a compute-optimal allocation needs A, B, alpha and beta positive"),
    ("params.B", 1e-300, "the fitted law's allocation G overflows a float"),      # the bench's 5,000 found it
])
def test_plot_refuses_a_law_without_an_optimum_to_draw(fitted, tmp_path, dotted, value, expected):
    fit = scaling.load(_edited(fitted, tmp_path, dotted, value))
    with pytest.raises(UsageError, match=expected):
        fit_figure(fit)


FUZZ = 200           # the bench runs 5,000 (bench/bench_fit_json_fuzz.py)


def test_fuzzed_sections_with_restamped_side_files_never_raise_past_the_schema(fitted, tmp_path):
    tally = fuzz.fuzz(fitted, tmp_path, FUZZ, seed=53, reports=1, plot_every=40)
    assert not tally.failed, tally.failed
    assert 0 < tally.accepted < FUZZ, tally.line()        # mutations both refused and used
