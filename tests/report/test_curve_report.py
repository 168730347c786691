"""`scaling report`'s curve section: the micro sweep fitted with `scaling fit --curves`, reported
from its fit.json (the numbers are fit.json's "curves"), and the store reported with `--curves`
(the same fit made once: the fit.json beside the report is `scaling fit --curves`'s)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from scaling.cli import main
from tests.report.test_report import _interval, _number, _table_row

BOOT = "12"


def _run(argv) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return main(argv)


@pytest.fixture(scope="module")
def curve_fit_dir(micro_sweep, tmp_path_factory):
    _, sweep = micro_sweep
    out = tmp_path_factory.mktemp("curve-fit")
    assert _run(["fit", str(sweep.sweep_dir), "--curves", "--bootstrap", BOOT, "--out", str(out)]) == 0
    return out


def _curve_rows(md: str, curves: dict) -> None:
    """The side-by-side table's curve column and the leave-one-run-out table are fit.json's."""
    section = md[md.index("## The law from the training curves"):]
    for label, value, key in (("a", curves["allocation"]["a"], "a"),
                              ("tokens per parameter", curves["tokens_per_param_at_reference"], "tokens_per_param")):
        mine = _table_row(section, label)[2]
        _number(mine.split(" ")[0], value)
        if None in curves["ci"][key]:         # resamples of a micro sweep's 2 sizes: no allocation in some
            assert mine.endswith(" -")
        else:
            _interval(mine[mine.index("["):], curves["ci"][key])
    for row in curves["leave_one_run_out"]["runs"]:
        cells = _table_row(section, row["run_id"])
        _number(cells[4], row["predicted"])
        assert cells[5] == f"{100 * row['error']:+.2f}%"


def test_report_of_a_curve_fit_shows_its_curves_beside_the_final_loss_fit(curve_fit_dir, tmp_path):
    out = tmp_path / "report"
    assert _run(["report", str(curve_fit_dir), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    curves = json.loads((curve_fit_dir / "fit.json").read_text())["curves"]
    _curve_rows(md, curves)
    final = _table_row(md[md.index("## The law from the training curves"):], "a")[1]
    _number(final.split(" ")[0], curves["final_loss_fit"]["a"])
    for name in ("curve_laws", "two_fits"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 10_000
        assert f"(figures/{name}.png)" in md
    assert "made for this report" not in md


def test_a_store_reported_with_curves_is_fitted_once_as_scaling_fit_curves_fits_it(micro_sweep, curve_fit_dir,
                                                                                   tmp_path):
    _, sweep = micro_sweep
    out = tmp_path / "report"
    assert _run(["report", str(sweep.sweep_dir), "--curves", "--bootstrap", BOOT, "--out", str(out)]) == 0
    assert (out / "fit.json").read_bytes() == (curve_fit_dir / "fit.json").read_bytes()
    md = (out / "report.md").read_text()
    _curve_rows(md, json.loads((curve_fit_dir / "fit.json").read_text())["curves"])
    assert f"scaling fit {sweep.sweep_dir} --bootstrap {BOOT} --seed 0 --curves" in md


def test_curves_apply_to_a_store_fitted_here(curve_fit_dir, tmp_path, capsys):
    assert main(["report", str(curve_fit_dir), "--curves", "--out", str(tmp_path / "r")]) == 2
    assert "the curves apply to a fit made here from a run store" in capsys.readouterr().err
    assert main(["report", "--dataset", "chinchilla", "--curves", "--out", str(tmp_path / "r")]) == 2
    assert "the curves apply to a run store" in capsys.readouterr().err
