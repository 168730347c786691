"""Issue 53, item 7: a refit inside a fit (a backtest cut's, the hold-out's) could end with an
exponent past what fit.json holds (+-25, scaling/schemas/laws.py): `fit` wrote it, and then `load`,
`plan` and `report` refused the whole fit. Such a refit is now not identified: its cut is dropped
with the reason, and the fit reads back."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import scaling
from scaling.errors import UsageError
from scaling.laws.fitting.fit import fit_law
from scaling.laws.results import fit_file
from scaling.schemas.laws import LARGEST_EXPONENT


def runaway_table() -> pd.DataFrame:
    """12 runs clustered within 1.1x of N = 1e7 whose loss falls as N^-30 there (a steep wiggle),
    and 9 larger runs, 30x and more beyond in compute, on a plain law: the fit itself stays within
    the bound, but a backtest cut that keeps only the cluster refits to alpha 27.5-28."""
    grid = np.meshgrid([1e7, 1.03e7, 1.06e7, 1.1e7], [1e9, 1.1e9, 1.2e9], indexing="ij")
    large = np.meshgrid([1e8, 3e8, 1e9], [2e10, 5e10, 1e11], indexing="ij")
    n, d = (np.concatenate([small.ravel(), big.ravel()]) for small, big in zip(grid, large))
    loss = 1.8 + 400 / n ** 0.34 + 410 / d ** 0.28 + np.where(n < 5e7, (n / 1e7) ** -30, 0.0)
    return pd.DataFrame({"N": n, "D": d, "loss": loss})


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The fit, written. Its runaway refits also overflowed numpy ("warning: overflow encountered in
    power" on the command line, issue 53 item 8): none is raised now."""
    folder = tmp_path_factory.mktemp("runaway") / "fit"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fit_file.write_fit(folder, scaling.fit(runaway_table(), bootstrap=10))
    return folder


def test_a_cut_whose_refit_runs_off_is_not_identified():
    table = runaway_table()
    below = (6 * table.N * table.D < 6 * table.N.max() * table.D.max() / 30).to_numpy()
    with pytest.raises(UsageError, match=f"alpha = 2[6-9].* less than or equal to {LARGEST_EXPONENT:g}"):
        fit_law(table.N[below].to_numpy(), table.D[below].to_numpy(), table.loss[below].to_numpy())


def test_the_fit_drops_the_runaway_cuts_with_their_reason_and_reads_back(written):
    fit = scaling.load(written)               # was: 'backtest.cuts[0].params.alpha' ... less than or equal to 25
    dropped = [cut for cut in fit.backtest.cuts if not cut.made and "not identified" in cut.reason]
    assert dropped                            # each a cut whose refit ran off, with why
    assert all(abs(cut.law.alpha) <= LARGEST_EXPONENT for cut in fit.backtest.cuts if cut.law is not None)
    assert "runs off to alpha" in fit.summary(verbose=True)


def test_plan_and_report_read_the_fit(written, capsys):
    from scaling.cli import main
    assert main(["plan", "--fit", str(written), "--compute", "1e20"]) == 0
    assert main(["report", str(written), "--out", str(written.parent / "report")]) == 0
    assert "error" not in capsys.readouterr().err
