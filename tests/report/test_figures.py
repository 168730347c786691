"""What the figures draw: the arrays on their axes against the law's closed forms (Hoffmann et al.
2022, eq. 4: N_opt = G (C/6)^a, G = (alpha A / (beta B))^(1/(alpha+beta)), a = beta/(alpha+beta)),
written out here from the five constants rather than taken from `Law`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaling.laws.checks.verdict import THRESHOLDS
from scaling.laws.forms.law import Law
from scaling.laws.optimal import approaches
from scaling.report import figures
from scaling.report.frontiers import frontiers
from scaling.report.style import SizeColours

LAW = Law(E=1.8172, A=482.01, B=2085.43, alpha=0.3478, beta=0.3658)     # Besiroglu et al.'s refit
CHINCHILLA = Law(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)


def n_opt(law: Law, c):
    g = (law.alpha * law.A / (law.beta * law.B)) ** (1 / (law.alpha + law.beta))
    return g * (np.asarray(c) / 6) ** (law.beta / (law.alpha + law.beta))


def loss(law: Law, n, d):
    return law.E + law.A * np.asarray(n, dtype=float) ** -law.alpha + law.B * np.asarray(d, dtype=float) ** -law.beta


def lines(ax) -> dict:
    return {line.get_label(): line for line in ax.get_lines()}


def test_frontiers_draw_the_closed_form_optima_and_their_contours():
    c_runs = np.array([1e18, 3e18, 1e19])
    n_runs = n_opt(LAW, c_runs)
    fig = frontiers(LAW, n_runs, c_runs, SizeColours(n_runs), c_max=1e24, budgets=(1e21,),
                    references={"chinchilla": CHINCHILLA.n_opt})
    ax = fig.axes[0]
    drawn = lines(ax)
    a = LAW.beta / (LAW.alpha + LAW.beta)
    measured, beyond = drawn[f"your fit, a = {a:.3f} (measured range)"], drawn["your fit, extrapolated"]
    for line in (measured, beyond):
        c, n = line.get_data()
        assert np.allclose(n, n_opt(LAW, c), rtol=1e-12)
    assert measured.get_xdata().max() <= 1e19 <= beyond.get_xdata().min() * 1.1
    assert beyond.get_xdata().max() == pytest.approx(1e24)
    c, n = next(line for label, line in drawn.items() if label.startswith("Chinchilla")).get_data()
    assert np.allclose(n, n_opt(CHINCHILLA, c), rtol=1e-12)
    # One iso-loss contour per decade of C (1e17 .. 1e24), each at the optimal loss of its decade.
    decades = 10.0 ** np.arange(17, 25)
    optimal = loss(LAW, n_opt(LAW, decades), decades / (6 * n_opt(LAW, decades)))
    contours = next(c for c in ax.collections if hasattr(c, "levels"))
    assert np.allclose(np.sort(contours.levels), np.sort(np.round(optimal, 6)), atol=1e-9)


def test_isoflop_draws_each_budget_its_law_and_the_optima():
    budgets = np.array([1e18, 1e19, 1e20])
    n = np.concatenate([n_opt(LAW, c) * np.geomspace(0.2, 5, 7) for c in budgets])
    d = np.repeat(budgets, 7) / (6 * n)
    observed = loss(LAW, n, d)
    iso = approaches.isoflop(n, d, observed)
    fig = figures.isoflop(iso, n, observed, LAW)
    left, right = fig.axes[0], fig.axes[1]
    # Each budget's points, by ascending N, are the runs given for it.
    points = [line for line in left.get_lines() if line.get_marker() == "o"]
    assert len(points) == 3
    for k, (line, c) in enumerate(zip(points, budgets)):
        x, y = line.get_data()
        assert np.array_equal(x, np.sort(n[7 * k:7 * (k + 1)]))
        assert np.allclose(y, loss(LAW, x, c / (6 * x)), rtol=1e-12)
    # The law along each budget (dotted) is L(N, C/6N); its star sits at the closed-form optimum.
    dotted = [line for line in left.get_lines() if line.get_linestyle() == ":"]
    stars = [line for line in left.get_lines() if line.get_marker() == "*"]
    assert len(dotted) == len(stars) == 3
    for line, star, c in zip(dotted, stars, budgets):
        x, y = line.get_data()
        assert np.allclose(y, loss(LAW, x, c / (6 * x)), rtol=1e-12)
        assert star.get_xdata()[0] == pytest.approx(n_opt(LAW, c), rel=1e-12)
    # The parabola minima (Approach 2) land near the law's optimum on points made from it.
    minima = [line for line in left.get_lines() if line.get_marker() == "D"]
    assert len(minima) == 3
    for line, c in zip(minima, budgets):
        assert line.get_xdata()[0] == pytest.approx(n_opt(LAW, c), rel=0.05)
    c_grid, n_line = lines(right)[f"fitted law (Approach 3), a = {LAW.a:.3f}"].get_data()
    assert np.allclose(n_line, n_opt(LAW, c_grid), rtol=1e-12)
    # Approach 2's power law through the minima has the law's exponent, to the parabolas' accuracy.
    assert iso.a == pytest.approx(LAW.beta / (LAW.alpha + LAW.beta), abs=0.01)


def test_final_loss_draws_the_law_at_each_grid_value():
    n = np.repeat([1e6, 1e7, 1e8], 3)
    d = np.tile([1e8, 1e9, 1e10], 3)
    fig = figures.final_loss(n, d, loss(LAW, n, d), LAW, SizeColours(n), title="the law")
    left, right = fig.axes[0], fig.axes[1]
    curves = [line for line in left.get_lines() if line.get_marker() in ("None", "", None)]
    assert len(curves) == 3
    for line, dv in zip(curves, (1e8, 1e9, 1e10)):
        x, y = line.get_data()
        assert np.allclose(y, loss(LAW, x, dv), rtol=1e-12)
    curves = [line for line in right.get_lines() if line.get_marker() in ("None", "", None)]
    assert len(curves) == 3
    for line, nv in zip(curves, (1e6, 1e7, 1e8)):
        x, y = line.get_data()
        assert np.allclose(y, loss(LAW, nv, x), rtol=1e-12)


def test_loss_curves_draw_each_run_as_recorded():
    curves = pd.DataFrame({"run_id": ["a"] * 3 + ["b"] * 2, "n": [1e6] * 3 + [2e6] * 2,
                           "tokens": [300.0, 100.0, 200.0, 100.0, 200.0], "loss": [3.0, 5.0, 4.0, 4.5, 3.5],
                           "status": ["finished"] * 3 + ["failed"] * 2})
    ax = figures.loss_curves(curves, SizeColours(curves.n)).axes[0]
    runs = [line for line in ax.get_lines() if len(line.get_xdata()) > 1]
    assert [line.get_xdata().tolist() for line in runs] == [[100.0, 200.0, 300.0], [100.0, 200.0]]
    assert [line.get_ydata().tolist() for line in runs] == [[5.0, 4.0, 3.0], [4.5, 3.5]]
    assert [line.get_linestyle() for line in runs] == ["-", "--"]          # the failed run is dashed


def test_context_curves_draw_each_run_and_the_line_past_which_a_run_uses_its_context():
    curves = pd.DataFrame({"run_id": ["a"] * 3, "n": [1e6] * 3, "tokens": [1e6, 2e6, 4e6],
                           "loss": [-0.03, -0.01, 0.08], "status": ["finished"] * 3})
    ax = figures.context_curves(curves, SizeColours(curves.n)).axes[0]
    (run,) = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
    assert run.get_ydata().tolist() == [-0.03, -0.01, 0.08]
    levels = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_xdata()[0] == 0)
    assert levels == [0.0, THRESHOLDS["context_use"]]
