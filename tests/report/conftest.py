"""The report tests' shared fit: one `scaling fit` of the micro sweep and one report of it, made
once a session for test_report.py and test_report_consistency.py (which only read them)."""

from __future__ import annotations

import collections

import pytest

from tests.report.test_report import BOOT, _count_optimiser_calls, _run


@pytest.fixture(scope="session")
def counted_fit(micro_sweep, tmp_path_factory):
    """`scaling fit` of the micro sweep, with the optimiser calls it made (counted, still computed):
    (fit folder, calls). One fit for the report tests and for the check that a report fits as it does."""
    _, sweep = micro_sweep
    out = tmp_path_factory.mktemp("fit")
    with pytest.MonkeyPatch.context() as patch:
        calls = _count_optimiser_calls(patch)
        rc, _ = _run(["fit", str(sweep.sweep_dir), "--bootstrap", BOOT, "--out", str(out)])
    assert rc == 0
    return out, collections.Counter(calls)


@pytest.fixture(scope="session")
def fit_dir(counted_fit):
    """`scaling fit` of the micro sweep: the fit.json the report reads."""
    return counted_fit[0]


@pytest.fixture(scope="session")
def from_fit(fit_dir, tmp_path_factory):
    """`scaling report FIT_DIR`: (stdout, report folder)."""
    out = tmp_path_factory.mktemp("report-a")
    rc, stdout = _run(["report", str(fit_dir), "--out", str(out)])
    assert rc == 0
    return stdout, out
