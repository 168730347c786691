"""Issue 53, item 8 (small flags) and item 6 (seeds): each refused in one line naming the option
and what is wrong, exit code 2 (or the package's UsageError from Python), before any fitting."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import scaling
from scaling.errors import UsageError
from tests.hardening.helpers import POINTS, refused

# Six points of a known law with a fixed 0.5-1% scatter: exact points would make every resample's
# refit the same law, and its "interval" the optimiser's rounding about the estimate.
SCATTER = (1.01, 0.99, 0.995, 1.005, 1.0, 0.99)
FRAME = pd.DataFrame([(n, d, 2 + 1e3 / n ** 0.3 + 1e3 / d ** 0.3) for n in (1e6, 1e7, 1e8) for d in (1e8, 1e9)],
                     columns=["N", "D", "loss"]).assign(loss=lambda t: t.loss * np.array(SCATTER))


@pytest.fixture(scope="module")
def small():
    """Six points fitted with the fewest resamples a fit takes (intervals: predict and plan use the seed)."""
    return scaling.fit(FRAME, bootstrap=10, form="chinchilla")


def fit_args(tmp_path, *flags) -> list:
    table = tmp_path / "points.csv"
    table.write_text(POINTS)
    return ["fit", "--csv", table, "--n-col", "N", "--d-col", "D", "--loss-col", "loss", *flags,
            "--out", tmp_path / "fit"]


@pytest.mark.parametrize("count", [1, 3, 9])
def test_a_bootstrap_too_small_for_an_interval_is_refused(tmp_path, capsys, count):
    """--bootstrap 1 printed a "95% interval" that was one refit, beside the estimate it bounds."""
    refused(fit_args(tmp_path, "--bootstrap", count), capsys, f"--bootstrap must be 0 (no intervals) or at least 10; "
                                                              f"got {count}")
    assert not (tmp_path / "fit").exists()


@pytest.mark.parametrize("count", [1, 9, True, 10.0, "20"])
def test_the_api_refuses_a_bootstrap_too_small_or_not_a_count(count):
    with pytest.raises(UsageError, match="the number of bootstrap resamples must be"):
        scaling.fit(FRAME, bootstrap=count)


def test_the_fewest_resamples_give_an_interval_about_the_estimate(small):
    lo, hi = small.interval("alpha")
    assert small.ci.n_resamples == 10 and lo <= small.alpha <= hi


SEEDS = ["x", -1, 1.5, True, None]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("call", ["predict", "plan", "loss_interval", "api plan", "fit"])
def test_a_seed_that_is_no_whole_number_is_named_at_the_boundary(small, call, seed):
    calls = {"predict": lambda: small.predict(1e8, 1e9, seed=seed), "plan": lambda: small.plan(1e19, seed=seed),
             "loss_interval": lambda: small.loss_interval(1e8, 1e9, seed=seed),
             "api plan": lambda: scaling.plan(1e19, law=small, seed=seed),
             "fit": lambda: scaling.fit(FRAME, bootstrap=0, seed=seed)}
    with pytest.raises(UsageError, match=re.escape(f"the seed must be a whole number >= 0; got {seed!r}")):
        calls[call]()


def test_a_design_seed_that_is_no_whole_number_is_named(tmp_path):
    with pytest.raises(UsageError, match=re.escape("--seed must be a whole number >= 0; got 'x'")):
        scaling.design("configs/tiny.yaml", seed="x")


@pytest.mark.parametrize("flags, named", [(["--budget", "loss"], "'loss' is named for both loss and compute budget"),
                                          (["--budget", "N"], "'N' is named for both N and compute budget"),
                                          (["--unique", "D"], "'D' is named for both D and unique tokens")])
def test_a_column_named_for_two_roles_is_refused(tmp_path, capsys, flags, named):
    """--budget loss was taken: the fit grouped its IsoFLOP profiles by each run's loss."""
    refused(fit_args(tmp_path, *flags, "--bootstrap", "0"), capsys, named)
    assert not (tmp_path / "fit").exists()


@pytest.mark.parametrize("prior", ["1.5,1e-300", "1.5,1e-7", "1.5,0"])
def test_a_prior_on_E_too_narrow_names_the_option_not_the_data(tmp_path, capsys, prior):
    """--E-prior 1.5,1e-300 ended in "the fit failed from every start; check the data"."""
    err = refused(fit_args(tmp_path, "--E-prior", prior, "--bootstrap", "0"), capsys, "--E-prior")
    assert "check the data" not in err


def test_the_api_refuses_a_prior_on_E_too_narrow():
    with pytest.raises(UsageError, match="the prior's standard deviation for E, 1e-300, is too small"):
        scaling.fit(FRAME, E_prior=(1.5, 1e-300), bootstrap=0)



@pytest.mark.parametrize("path", ["/nonexistent/fit", "/dev/zero", "/etc/hostname"])
@pytest.mark.parametrize("reader", [scaling.load, scaling.compare])
def test_a_fit_path_that_is_no_fit_folder_is_refused(reader, path):
    """Found by bench/hostile_boundary.py: a missing path not ending in .json, or a file that is no
    folder, raised KeyError from the reader of the fit's set."""
    with pytest.raises(UsageError, match="fit.json"):
        reader(path)
