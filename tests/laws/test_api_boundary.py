"""Issue 53, item 6: the public functions check their arguments where they come in and raise the
package's UsageError naming the argument (as scikit-learn's estimators do), never an OverflowError
from numpy, a TypeError from pathlib or a silent cast (a bool taken as N = 1, complex losses cast
to their real part, a count of 1e-300 predicting a loss of 9e104)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import scaling
from scaling.errors import UsageError
from scaling.laws.api import E_prior_from
from scaling.laws.results.fit_file import DIGEST_LINE, fit_digest

FRAME = pd.DataFrame([(n, d, 2 + 1e3 / n ** 0.3 + 1e3 / d ** 0.3) for n in (1e6, 1e7, 1e8) for d in (1e8, 1e9)],
                     columns=["N", "D", "loss"])


@pytest.fixture(scope="module")
def small():
    """Six points fitted with a small bootstrap (intervals, so predict and plan take every path)."""
    return scaling.fit(FRAME, bootstrap=20, form="chinchilla")


CALLS = {
    "predict N past a float": (lambda f: f.predict(10**400, 1e9),
                               "N (parameters) must be at most 1e+30, got a number past a float's range"),
    "plan past a float": (lambda f: f.plan(10**400), "compute must be at most 1e+30 FLOPs"),
    "predict ragged": (lambda f: f.predict([1e9, [1e9, 2e9]], 1e10), "N (parameters) [1000000000.0, [1000000000.0"),
    "plan ragged": (lambda f: f.plan([1e20, [1e21]]), "compute [1e+20, [1e+21]] are not all numbers"),
    "predict a bool": (lambda f: f.predict(True, 1e9), "N (parameters) True is not a number: True or False"),
    "plan a bool": (lambda f: f.plan(True), "compute True is not a number"),
    "predict below one": (lambda f: f.predict(1e-300, 1e9), "N (parameters) must be a positive, finite number, "
                                                             "got 1e-300 (a count: at least 1)"),
    "predict complex": (lambda f: f.predict(1e9 + 1j, 1e9), "a complex number is not a count"),
    "load None": (lambda f: scaling.load(None), "path must be a fit directory or its fit.json"),
    "compare 3": (lambda f: scaling.compare(3), "fit must be a LawFit, a fit directory or its fit.json; got 3"),
    "fit delta text": (lambda f: scaling.fit(FRAME, delta="x"), "delta must be the Huber loss's threshold"),
    "fit fixed_E a list": (lambda f: scaling.fit(FRAME, fixed_E=[1, 2]), "fixed_E must be E held fixed"),
    "fit form 3": (lambda f: scaling.fit(FRAME, form=3), "form must be a form's name (median, chinchilla"),
    "fit seed text": (lambda f: scaling.fit(FRAME, seed="x"), "the seed must be a whole number >= 0; got 'x'"),
    "fit seed -1": (lambda f: scaling.fit(FRAME, seed=-1), "the seed must be a whole number >= 0; got -1"),
    "fit reference compute text": (lambda f: scaling.fit(FRAME, reference_compute="1e20"),
                                   "reference_compute must be a number of FLOPs, or None; got '1e20'"),
    "fit complex losses": (lambda f: scaling.fit(FRAME.assign(loss=FRAME.loss + 0j)),
                           "the DataFrame's column(s) 'loss' hold complex numbers"),
    "fit reference compute 1e300": (lambda f: scaling.fit(FRAME, reference_compute=1e300),
                                    "the reference compute must be at most 1e+30 FLOPs"),
    "fit E prior of text": (lambda f: scaling.fit(FRAME, E_prior=("1", "2")), "E_prior must be (mean, sd), two "
                                                                              "numbers"),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_misused_argument_is_named_at_the_boundary(small, name):
    call, message = CALLS[name]
    with pytest.raises(UsageError, match=re.escape(message)):
        call(small)


def test_counts_from_one_to_1e30_are_taken(small):
    assert small.predict(1, 1e9).loss > 0 and small.predict([1, 1e30], 1e9).loss.shape == (2,)


def test_E_prior_from_a_fit_with_a_zero_width_interval_is_refused(small, tmp_path):
    folder = tmp_path / "fit"
    scaling.laws.results.fit_file.write_fit(folder, small)
    obj = json.loads((folder / "fit.json").read_text())
    obj["ci"]["E"] = [2.0, 2.0]
    text = json.dumps(obj)
    (folder / "fit.json").write_text(text)
    side = folder / "fit.bootstrap.csv"          # re-stamped: the edit reaches E_prior_from, not the digest check
    side.write_text(f"{DIGEST_LINE}{fit_digest(text)}\n" + side.read_text().partition("\n")[2])
    with pytest.raises(UsageError, match="its fit has no interval for E"):
        E_prior_from(folder)


def test_plot_of_a_fit_whose_interval_lies_beside_its_centre_draws(small):
    """Issue 53, item 8: with one resample (a fit of --bootstrap 1, when it was taken) the loss's
    interval lay beside its centre, and the figure raised "'yerr' must not contain negative values".
    That fit's one resample was the estimate itself (these points lie on the law)."""
    import matplotlib.pyplot as plt
    law = small.law
    estimate = np.array([[law.E, law.A, law.B, law.alpha, law.beta]])
    plt.close(scaling.fit_figure(replace(small, resampled=estimate)))
