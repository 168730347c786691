"""fit.json's additions for a report that refits nothing: the one hold-out refit (the verdict's and
the report's), and typed provenance; on the Chinchilla table, written and read back."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scaling.laws import analysis
from scaling.laws.checks import stability
from scaling.laws.checks.holdout import holdout, holdout_split
from scaling.laws.fitting import readers, selection
from scaling.laws.fitting.provenance import Provenance
from scaling.laws.results import fit_file
from scaling.report.inputs import load_inputs
from scaling.report.page import Report


@pytest.fixture(scope="module")
def chinchilla(tmp_path_factory):
    """Besiroglu et al.'s 240 points fitted with a small bootstrap, and its fit.json's folder."""
    data = selection.apply_filters(readers.from_dataset("chinchilla"), drop_highest_loss=5)
    fit = analysis.fit_data(data, bootstrap=50, backtest=False)     # the hold-out and provenance: no backtest
    out = tmp_path_factory.mktemp("chinchilla")
    fit_file.write_fit(out, fit)
    return fit, out


def test_the_verdict_and_the_report_judge_one_hold_out_refit(chinchilla):
    """The holdout_stability check is the judgement of the refit the report prints: judged again
    from fit.holdout it is the same check, and the report of the written file shows that refit,
    bit for bit, on the top 20% of points by compute."""
    fit, out = chinchilla
    verdicts = {c.name: c for c in fit.diagnostics.checks}
    assert stability.holdout_check(fit.holdout, fit.boot, fit.reference_compute) == verdicts["holdout_stability"]
    refit = fit.holdout.law
    assert f"a {refit.a:.3g} outside" in verdicts["holdout_stability"].reason     # a moves on these points
    shown = Report.start(load_inputs(out)).holdout
    assert shown == fit.holdout and shown.law == refit
    data = fit.points
    held = holdout_split(data.compute, fit.holdout.fraction)[1]
    assert sorted(row.id for row in shown.rows) == sorted(str(data.ids[i]) for i in held) and len(held) == 48
    # The same function at the same fraction and starts, called again: the same refit.
    again = holdout(data, fit.law, fraction=fit.holdout.fraction, delta=fit.optimum.delta,
                    starts=fit.optimum.end_points)
    assert again == fit.holdout


def test_provenance_is_typed_in_fit_json_and_read_from_an_older_files_words(chinchilla, tmp_path):
    fit, out = chinchilla
    obj = json.loads((out / "fit.json").read_text())
    assert obj["data"]["provenance"] == {"kind": "dataset", "location": "chinchilla"}
    assert fit_file.load_fit(out).data.provenance == Provenance("dataset", "chinchilla") == fit.data.provenance
    del obj["data"]["provenance"]                        # as written before provenance was recorded
    (tmp_path / "fit.json").write_text(json.dumps(obj))
    assert fit_file.load_fit(tmp_path).data.provenance == Provenance("dataset", "chinchilla")
    assert Provenance.from_source("runs runs/tiny") == Provenance("runs", "runs/tiny")
    assert Provenance.from_source("table /data/points.csv") == Provenance("table", "/data/points.csv")
    assert Provenance.from_source("synthetic (cross, seed 0)") is None and Provenance.from_source(None) is None
    inputs = load_inputs(tmp_path)                       # the points are found again from the words
    assert np.array_equal(inputs.data.loss, fit.points.loss)
