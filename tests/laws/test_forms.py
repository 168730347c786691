"""The law forms beside the Chinchilla form: gradients, known answers, optima, the cross-check's caution."""

from __future__ import annotations

import math
import typing

import numpy as np
import pandas as pd
import pytest

from scaling.cli import main
from scaling.laws import analysis
from scaling.laws.checks import cross_forms
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting import readers
from scaling.laws.fitting.forms import bootstrap_form, fit_form, form_objective
from scaling.laws.forms import catalog
from scaling.laws.forms.farseer import FarseerLaw
from scaling.laws.forms.form import optimum
from scaling.laws.forms.kaplan_nd import KaplanLaw
from scaling.laws.forms.law import PARAM_NAMES, Law
from scaling.laws.results.fit_file import load_fit
from scaling.schemas.beyond import FORM_NAMES

# Each form's constants as published or typical of a language-model sweep (theta, the fitter's vector).
TRUTHS = {
    "chinchilla": (math.log(1.8), math.log(480.0), math.log(2100.0), 0.34, 0.37),
    "tied": (math.log(1.8), math.log(480.0), math.log(2100.0), 0.35),
    "kaplan": (math.log(8.8e13), math.log(5.4e13), 0.076 / 0.095, 0.095),     # Kaplan et al.'s eq. 1.5 constants
    "fixed-E": (math.log(480.0), math.log(2100.0), 0.34, 0.37),
    "farseer": (math.log(1.8), math.log(480.0), math.log(2100.0), 0.34, 0.37, 0.02),
}
E_PINNED = 1.8


def grid_points() -> tuple[np.ndarray, np.ndarray]:
    """8 sizes from 2e7 to 2e9, each on 6 token counts from 5 to 160 tokens per parameter."""
    n = np.repeat(np.geomspace(2e7, 2e9, 8), 6)
    return n, n * np.tile(np.geomspace(5.0, 160.0, 6), 8)


def form(name: str):
    return catalog.get(name, E=E_PINNED)


@pytest.mark.parametrize("name", list(TRUTHS))
def test_the_analytic_gradient_matches_finite_differences(name):
    n, d = grid_points()
    f = form(name)
    rng = np.random.default_rng(1)
    loss = f.law(TRUTHS[name]).loss(n, d) * np.exp(0.003 * rng.standard_normal(n.size))
    args = (np.log(n), np.log(d), np.log(loss))
    theta = np.array(TRUTHS[name]) + 0.01 * rng.standard_normal(len(TRUTHS[name]))
    weights = rng.exponential(size=(1, n.size))
    _, grad = form_objective(f, theta[None], *args, weights=weights)
    h = 1e-6
    numeric = [(form_objective(f, (theta + e)[None], *args, weights=weights)[0][0]
                - form_objective(f, (theta - e)[None], *args, weights=weights)[0][0]) / (2 * h)
               for e in np.eye(theta.size) * h]
    assert grad[0] == pytest.approx(numeric, rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("name", list(TRUTHS))
def test_each_form_recovers_the_law_it_was_simulated_from(name):
    n, d = grid_points()
    f = form(name)
    truth = f.law(TRUTHS[name])
    loss = truth.loss(n, d) * np.exp(0.001 * np.random.default_rng(0).standard_normal(n.size))
    result = fit_form(f, n, d, loss)
    assert result.converged and result.residual_rms < 0.0015
    # The law, not only the points: its loss far beyond them (100x the largest compute) within 1%.
    big_n, big_d = 10 * n.max(), 10 * d.max()
    assert float(result.law.loss(big_n, big_d)) == pytest.approx(float(truth.loss(big_n, big_d)), rel=0.01)
    fitted, true = result.law.to_dict(), truth.to_dict()
    for key in ("alpha", "beta", "alpha_N", "alpha_D", "beta_0"):
        if key in true:
            assert fitted[key] == pytest.approx(true[key], rel=0.1), key
    if "beta_1" in true:
        assert fitted["beta_1"] == pytest.approx(true["beta_1"], abs=0.005)
    # The bootstrap's constants scatter about the fit's (every resample refitted, none lost).
    thetas = bootstrap_form(result, n, d, loss, n_resamples=20, seed=0)
    assert thetas.shape == (20, f.n_theta) and np.all(np.isfinite(thetas))
    assert np.median(thetas, axis=0) == pytest.approx(np.array(result.theta), rel=0.05, abs=0.05)


def test_the_chinchilla_form_finds_the_fast_path_s_optimum():
    n, d = grid_points()
    loss = Law(E=1.8, A=480.0, B=2100.0, alpha=0.34, beta=0.37).loss(n, d)
    loss = loss * np.exp(0.01 * np.random.default_rng(3).standard_normal(n.size))   # noisy: an optimum off the truth
    fast = fitting.fit_law(n, d, loss)
    generic = fit_form(catalog.get("chinchilla"), n, d, loss)
    assert generic.objective == pytest.approx(fast.objective, rel=1e-6)
    assert np.array(generic.theta) == pytest.approx(np.array(fast.theta), rel=1e-3, abs=1e-3)


def test_numeric_optima_match_the_closed_forms():
    kaplan = KaplanLaw(N_c=8.8e13, D_c=5.4e13, alpha_N=0.076, alpha_D=0.095)
    r = kaplan.alpha_N / kaplan.alpha_D
    for c in (1e19, 1e22, 1e25):
        n, d, loss = optimum(kaplan, c)
        assert n == pytest.approx((r * kaplan.N_c ** r * c / (6 * kaplan.D_c)) ** (1 / (1 + r)), rel=1e-6)
        assert 6 * n * d == pytest.approx(c) and loss == pytest.approx(float(kaplan.loss(n, d)))
        # A Farseer-like law with beta_1 = 0 is the Chinchilla form: its numeric optimum is the closed form's.
        law = Law(E=1.8, A=480.0, B=2100.0, alpha=0.34, beta=0.37)
        n2, _, _ = optimum(FarseerLaw(1.8, 480.0, 2100.0, 0.34, 0.37, 0.0), c)
        assert n2 == pytest.approx(float(law.n_opt(c)), rel=1e-6)
    with pytest.raises(ValueError, match="no compute-optimal"):
        optimum(KaplanLaw(1e13, 1e13, -0.1, 0.1), 1e21)
    # A fit that does not identify its exponents can put the closed form's optimum below one
    # parameter (a micro sweep's tied form: N 2e-12, D/N 3e32); the forms table says "no optimum".
    law = Law(E=1.0, A=1e-6, B=1e6, alpha=0.9, beta=0.1)
    assert float(law.n_opt(1e12)) < 1.0
    with pytest.raises(ValueError, match="below one parameter"):
        optimum(law, 1e12)
    # Exponents near 0 (a flat table's fit): G = (alpha A / (beta B))^(1 / (alpha + beta)) passes a
    # float, an OverflowError that escaped `scaling fit` as a traceback; now no optimum, said so.
    with pytest.raises(ValueError, match="lies beyond a float"):
        optimum(Law(E=1.0, A=10.0, B=1.0, alpha=1e-4, beta=1e-4), 1e21)


def test_the_schema_knows_every_form():
    assert set(typing.get_args(FORM_NAMES)) == set(catalog.FORMS)


def _table(truth, budgets, seed=0, noise=0.003):
    """An IsoFLOP sweep of `truth` (7 sizes a budget, 4 to 100 tokens per parameter) with its budgets."""
    rng = np.random.default_rng(seed)
    rows = [(n, c / (6 * n), c) for c in budgets for n in np.sqrt(c / 120.0) * np.geomspace(0.45, 2.2, 7)]
    n, d, c = (np.array(v) for v in zip(*rows))
    frame = pd.DataFrame({"N": n, "D": d, "loss": truth(n, d) * np.exp(noise * rng.standard_normal(n.size)),
                          "budget": c})
    return readers.from_frame(frame, source="simulated", n_col="N", d_col="D", loss_col="loss", budget_col="budget")


def _cross_check(data, target):
    result = fitting.fit_law(data.n, data.d, data.loss, grid=fitting.grid_from_axes(cross_forms.bt.COARSE_GRID))
    boot = resampling.bootstrap(data.n, data.d, data.loss, n_resamples=20, full_fit=result)
    samples = np.column_stack([boot.samples[k] for k in PARAM_NAMES])
    future = cross_forms.bt.backtest(data, result)
    return cross_forms.cross_check(data, result, samples, future, target_compute=target, resamples=20)


BUDGETS = 1e18 * 3.0 ** np.arange(5)


def test_the_forms_agree_on_a_clean_table_at_its_own_compute():
    # The runs' usual scatter (1%): at the sweep's own largest budget every form describes them, Kaplan's
    # without E too, within the prediction intervals that scatter gives.
    law = Law(E=1.8, A=480.0, B=2100.0, alpha=0.34, beta=0.37)
    data = _table(law.loss, BUDGETS, noise=0.01)
    forms = _cross_check(data, float(data.compute.max()))
    check = cross_forms.forms_check(forms)
    assert check.status == "pass" and check.value < 0.02, check.reason
    assert {e.name for e in forms.entries} == set(catalog.FORMS)
    again = cross_forms.Forms.from_json(forms.to_json())
    head = cross_forms.format_forms(forms)[0]
    assert again == forms and head.startswith("forms at C =") and "at least 5 tokens per parameter" in head


def test_the_caution_fires_where_the_forms_truly_disagree():
    # The data exponent grows with model size (a Farseer-like truth): the forms with E describe the sweep
    # within 1.5x of each other's residual RMS, but 1,000x beyond it they part by more than their
    # intervals allow. Kaplan's form, without E, misfits the sweep and is not compared.
    # E low (0.8), so that the data term the forms disagree on is a large share of the loss far out.
    def truth(n, d):
        return 0.8 + 480.0 / n ** 0.34 + 2100.0 / d ** (0.37 + 0.05 * np.log(n / 1e8))

    data = _table(truth, BUDGETS, noise=0.002)
    forms = _cross_check(data, 1000.0 * float(data.compute.max()))
    check = cross_forms.forms_check(forms)
    assert check.status == "caution" and "farseer" in check.reason and "kaplan" not in check.reason, check.reason
    assert "fixed-E" not in check.reason                  # at the full table's E: an oracle, not a rival
    assert forms.entry("kaplan").residual_rms > cross_forms.DESCRIBES_RATIO * forms.entry("chinchilla").residual_rms
    # The true form's prediction is the right one (the Chinchilla form's is 16% high).
    farseer = forms.entry("farseer").prediction["loss"]
    assert farseer == pytest.approx(float(truth(forms.target["n"], forms.target["d"])), rel=0.03)


def test_form_round_trips_through_fit_json_to_plan_and_predict(tmp_path, capsys):
    # `scaling fit --form tied`: fit.json records the form and its resamples; the fit read back predicts
    # and plans as the one in memory, and `scaling plan --fit` plans with the tied law.
    law = Law(E=1.8, A=480.0, B=2100.0, alpha=0.35, beta=0.35)
    data = _table(law.loss, BUDGETS, noise=0.003)
    pd.DataFrame({"N": data.n, "D": data.d, "loss": data.loss, "budget": data.budgets}).to_csv(
        tmp_path / "pts.csv", index=False)
    out = tmp_path / "fit"
    assert main(["fit", "--csv", str(tmp_path / "pts.csv"), "--budget", "budget", "--form", "tied",
                 "--bootstrap", "10", "--out", str(out)]) == 0
    assert "predicts and plans by the tied form's law" in capsys.readouterr().out
    fit = load_fit(out)
    entry = fit.form_entry
    assert fit.form == "tied" and entry is not None and entry.n_resamples == len(entry.samples) == 10
    assert entry.params["alpha"] == entry.params["beta"] == pytest.approx(0.35, rel=0.05)
    c = 100 * float(data.compute.max())
    plan = fit.plan(c)
    tied = entry.law
    assert plan.n == pytest.approx(float(tied.n_opt(c)), rel=1e-6)       # the tied law's closed form
    assert plan.intervals is not None and plan.intervals.n[0] < plan.n < plan.intervals.n[1]
    p = fit.predict(plan.n, plan.d)
    assert p.interval[0] < p.loss < p.interval[1] and p.beyond == pytest.approx(100.0, rel=1e-6)
    assert main(["plan", "--fit", str(out), "--compute", f"{c:g}"]) == 0
    printed = capsys.readouterr().out
    assert "the tied form" in printed and f"{plan.n:.4g}" in printed
    assert main(["fit", "--csv", str(tmp_path / "pts.csv"), "--form", "fixed-E", "--out", str(out)]) == 2
    assert "--E" in capsys.readouterr().err


def test_a_forms_plan_over_an_array_of_budgets_has_each_budgets_intervals():
    # `LawFit.plan` and `optimum_at` over budgets inside and beyond the runs, for a form chosen by --form:
    # each budget's allocation, loss and intervals as the one-budget plan gives them (Kaplan's form: its
    # optimum numeric, from each resample's law).
    law = Law(E=1.8, A=480.0, B=2100.0, alpha=0.34, beta=0.37)
    data = _table(law.loss, BUDGETS, noise=0.01)
    fit = analysis.fit_data(data, bootstrap=10, form="kaplan")
    top = float(data.compute.max())
    budgets = np.array([[top / 10, top], [10 * top, 1000 * top]])
    plan = fit.plan(budgets)
    assert plan.intervals is not None and np.shape(plan.intervals.loss[0]) == budgets.shape
    again = fit.optimum_at(budgets)
    assert again is not None and all(np.array_equal(getattr(again, part), getattr(plan.intervals, part))
                                     for part in ("compute", "n", "d", "tokens_per_param", "loss"))
    for k in np.ndindex(budgets.shape):
        one = fit.plan(budgets[k])
        assert one.intervals is not None and one.intervals.n_undefined == 0
        assert (plan.n[k], plan.d[k], plan.loss[k]) == (one.n, one.d, one.loss)
        for part in ("n", "d", "tokens_per_param", "loss"):
            assert tuple(bound[k] for bound in getattr(plan.intervals, part)) == getattr(one.intervals, part), part
        assert plan.intervals.compute[k] == one.intervals.compute
    assert plan.intervals.loss[0][1, 1] < plan.loss[1, 1] < plan.intervals.loss[1][1, 1]
