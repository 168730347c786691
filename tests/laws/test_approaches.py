"""Approaches 1 (envelope) and 2 (IsoFLOP) on data from a known law, and on Hoffmann's points."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scaling.errors import UsageError
from scaling.laws.curves.store import curves_from_store
from scaling.laws.forms.references import BESIROGLU, CHINCHILLA
from scaling.laws.optimal.approaches import envelope, fit_power_law, group_by_exact_budget, isoflop
from scaling.runs import store

LAWS = pytest.mark.parametrize("law", [CHINCHILLA.law, BESIROGLU.law], ids=["chinchilla", "besiroglu"])
HOFFMANN_BUDGETS = (6e18, 1e19, 3e19, 6e19, 1e20, 3e20, 6e20, 1e21, 3e21)


BUDGETS, SIZES = np.logspace(18, 21, 7), np.logspace(6, 11, 26)


def budget_grid(law, budgets=BUDGETS, sizes=SIZES, span=6.0):
    """A sweep laid out on budgets: a fixed ladder of model sizes, at each budget those within
    a factor `span` of the law's optimum, trained on D = C / (6 N)."""
    n, d = [], []
    for c in budgets:
        n_opt = law.n_opt(c)
        for size in sizes[(sizes > n_opt / span) & (sizes < n_opt * span)]:
            n.append(size)
            d.append(c / (6 * size))
    return np.array(n), np.array(d)


def test_fit_power_law_recovers_exponent_and_interval():
    x = np.logspace(0, 4, 9)
    fit = fit_power_law(x, 3.0 * x**0.7)
    assert fit.exponent == pytest.approx(0.7, abs=1e-12)
    assert fit.coefficient == pytest.approx(3.0, rel=1e-10)
    rng = np.random.default_rng(1)
    noisy = fit_power_law(x, 3.0 * x**0.7 * np.exp(rng.normal(0, 0.1, x.size)))
    assert noisy.ci[0] < noisy.exponent < noisy.ci[1]
    assert fit_power_law([1, 10], [2, 20]).ci is None  # 2 points: no degrees of freedom left


@LAWS
def test_isoflop_recovers_a_on_a_budget_grid(law):
    n, d = budget_grid(law)
    result = isoflop(n, d, law.loss(n, d))
    assert result.grouping.startswith("exact budgets")
    assert len(result.usable) == 7 and not result.excluded
    assert result.a == pytest.approx(law.a, abs=0.02)
    assert result.a == pytest.approx(law.a, abs=0.002)  # in fact far closer on clean data
    assert result.b == pytest.approx(1 - result.a, abs=1e-9)  # D_opt = C / (6 N_opt)
    for m in result.usable:  # each minimum within 10% of the law's own optimum
        assert m.n_opt == pytest.approx(law.n_opt(m.compute), rel=0.1)


def test_isoflop_interval_covers_the_truth_about_95_percent():
    law = CHINCHILLA.law
    n, d = budget_grid(law)
    clean = law.loss(n, d)
    covered = total = 0
    for seed in range(200):
        noisy = clean * np.exp(np.random.default_rng(seed).normal(0, 0.005, clean.size))
        result = isoflop(n, d, noisy)
        if result.a is not None:
            total += 1
            covered += result.a_ci[0] <= law.a <= result.a_ci[1]
    assert total >= 190
    assert 0.88 <= covered / total <= 0.995


def test_isoflop_leaves_out_minima_outside_the_sampled_range():
    law = CHINCHILLA.law
    n, d = budget_grid(law, budgets=np.logspace(18, 20, 5))
    # A budget whose sizes all lie below its optimum: the parabola bottoms out beyond them.
    c_off = 1e21
    sizes = law.n_opt(c_off) / np.array([40.0, 20.0, 10.0, 5.0])
    n = np.concatenate([n, sizes])
    d = np.concatenate([d, c_off / (6 * sizes)])
    result = isoflop(n, d, law.loss(n, d))
    off = [m for m in result.budgets if m.compute == pytest.approx(c_off, rel=1e-3)]
    assert len(off) == 1 and not off[0].usable
    assert "above the largest sampled N" in off[0].status
    assert len(result.usable) == 5
    assert result.a == pytest.approx(law.a, abs=0.02)


def test_isoflop_reason_when_fewer_than_two_budgets():
    law = CHINCHILLA.law
    n, d = budget_grid(law, budgets=[1e19])
    result = isoflop(n, d, law.loss(n, d))
    assert result.a is None and result.a_ci is None
    assert "need at least 2" in result.reason
    two_sizes = isoflop([1e8, 2e8, 1e9, 2e9], [1e10, 5e9, 1e10, 5e9], [3.0, 2.9, 2.5, 2.4])
    assert two_sizes.a is None
    assert all("distinct model sizes" in m.status for m in two_sizes.budgets)


def test_isoflop_groups_scattered_points_on_given_budgets():
    law = BESIROGLU.law
    budgets = np.logspace(18, 21, 7)
    n, d = budget_grid(law, budgets=budgets)
    rng = np.random.default_rng(3)
    d_scattered = d * np.exp(rng.uniform(-0.15, 0.15, d.size))  # recorded C off by up to 16%
    auto = isoflop(n, d_scattered, law.loss(n, d))
    assert auto.grouping.startswith("log-spaced bins")
    given = isoflop(n, d_scattered, law.loss(n, d), budgets=budgets)
    assert given.grouping.startswith("given budgets") and len(given.usable) == 7
    assert given.a == pytest.approx(law.a, abs=0.002)  # loss was computed at the true budgets


def test_group_by_exact_budget():
    labels = group_by_exact_budget([1e18, 1.0005e18, 3e18, 1e18, 2.9999e18], rtol=1e-3)
    assert labels.tolist() == [0, 0, 1, 0, 1]


def test_isoflop_rejects_bad_input():
    with pytest.raises(UsageError, match="positive"):
        isoflop([1e8, -1], [1e9, 1e9], [3.0, 3.0])
    with pytest.raises(UsageError, match="values"):
        isoflop([1e8, 2e8], [1e9], [3.0, 3.0])


def chinchilla_points():
    df = pd.read_csv(Path(__file__).resolve().parents[2] / "scaling" / "laws" / "datasets" / "chinchilla.csv")
    n = df["Model Size"].to_numpy()
    return n, df["Training FLOP"].to_numpy() / (6 * n), df["loss"].to_numpy()


def hand_isoflop(n, d, loss, budgets, ratio=2.0):
    """Approach 2 as Hoffmann et al. describe it, by hand: each run joins the budget nearest in
    log C (C = 6 N D) unless more than `ratio` off; per budget, a parabola of loss in ln N
    (numpy.polyfit) whose vertex is ln N_opt when it lies inside the sampled sizes; then a line
    through (ln C, ln N_opt). Returns (a, its 95% Student-t interval, budgets used, runs left out)."""
    log_c = np.log(6 * n * d)
    dist = np.abs(log_c[:, None] - np.log(budgets)[None, :])
    nearest, left_out = dist.argmin(axis=1), int((dist.min(axis=1) > np.log(ratio)).sum())
    xs, ys = [], []
    for k, budget in enumerate(budgets):
        mine = (nearest == k) & (dist.min(axis=1) <= np.log(ratio))
        p2, p1, _ = np.polyfit(np.log(n[mine]), loss[mine], 2)
        vertex = -p1 / (2 * p2)
        if p2 > 0 and np.log(n[mine]).min() <= vertex <= np.log(n[mine]).max():
            xs.append(np.log(budget))
            ys.append(vertex)
    (a, _), cov = np.polyfit(xs, ys, 1, cov=True)    # cov scaled by the residuals, n - 2 dof
    half = stats.t.ppf(0.975, len(xs) - 2) * np.sqrt(cov[0, 0])
    return a, (a - half, a + half), len(xs), left_out


def test_isoflop_on_hoffmann_points():
    n, d, loss = chinchilla_points()
    result = isoflop(n, d, loss, budgets=HOFFMANN_BUDGETS, window=None)   # every size, as the hand fit
    a, ci, used, left_out = hand_isoflop(n, d, loss, np.array(HOFFMANN_BUDGETS))
    assert len(result.usable) == used == 9 and result.n_left_out_runs == left_out
    assert result.a == pytest.approx(a, rel=1e-9)
    assert result.a_ci == pytest.approx(ci, rel=1e-9)
    # Hoffmann et al. report a = 0.49 (0.462, 0.534) from their own runs; the extracted points agree.
    assert 0.4 < result.a < 0.6
    assert result.a_ci[0] < 0.49 < result.a_ci[1]
    assert result.b == pytest.approx(1 - result.a, abs=1e-9)


def test_isoflop_recovers_a_exactly_from_parabolic_profiles():
    # Loss exactly quadratic in ln N along each budget, vertex at ln N_opt = a ln C + k: the
    # parabola fits are exact, so Approach 2 must return this a (and b = 1 - a) to rounding.
    a_true, k = 0.4321, -3.0
    budgets = np.logspace(18, 22, 5)
    n, d, loss = [], [], []
    for c in budgets:
        log_n_opt = a_true * np.log(c) + k
        for u in np.linspace(-1.5, 1.2, 7):      # sizes around the optimum, asymmetric
            size = np.exp(log_n_opt + u)
            n.append(size)
            d.append(c / (6 * size))
            loss.append(2.0 + 0.03 * u**2 - 0.1 * np.log(c / 1e18))
    result = isoflop(np.array(n), np.array(d), np.array(loss))
    assert len(result.usable) == 5
    assert result.a == pytest.approx(a_true, rel=1e-9)
    assert result.b == pytest.approx(1 - a_true, rel=1e-9)
    for m in result.usable:
        assert m.n_opt == pytest.approx(np.exp(a_true * np.log(m.compute) + k), rel=1e-8)


CURVE_SIZES, CURVE_TOKENS = np.logspace(7, 10, 31), np.logspace(8, 12.5, 80)


def law_curves(law, sizes=CURVE_SIZES, tokens=CURVE_TOKENS):
    rows = [(f"r{i}", size, t, float(law.loss(size, t)))
            for i, size in enumerate(sizes) for t in tokens]
    return pd.DataFrame(rows, columns=["run_id", "n", "tokens", "loss"])


@LAWS
def test_envelope_recovers_a_from_training_curves(law):
    result = envelope(law_curves(law))
    assert result.a == pytest.approx(law.a, abs=0.01)
    assert result.b == pytest.approx(law.b, abs=0.01)
    assert result.n_winning_sizes >= 20 and result.n_unbracketed > 0
    # Every frontier point: the winner's loss is within the grid resolution of the law's optimum.
    f = result.frontier
    assert np.all(f.loss >= law.optimal_loss(f.compute) - 1e-9)
    assert np.all(f.loss <= law.optimal_loss(f.compute) + 0.01)
    assert np.allclose(6 * f.n * f.d, f.compute)


def test_envelope_drops_unbracketed_winners():
    law = CHINCHILLA.law
    # Sizes all far below the optimum at every FLOP count: the largest always wins, never bracketed.
    result = envelope(law_curves(law, sizes=np.logspace(4, 5, 5), tokens=np.logspace(11, 13, 20)))
    assert result.a is None and "need at least 3" in result.reason
    assert result.n_unbracketed > 0


def test_envelope_input_checks():
    with pytest.raises(UsageError, match="tokens"):
        envelope(pd.DataFrame({"run_id": ["a"], "n": [1.0], "loss": [1.0]}))
    few = envelope(law_curves(CHINCHILLA.law, sizes=[1e8, 1e9]))
    assert few.a is None and "need at least 3" in few.reason


def test_curves_from_store(tmp_path):
    sweep = tmp_path / "runs" / "s"
    for run_id, status, n in (("a", "finished", 1e6), ("b", "finished", 2e6), ("c", None, 4e6)):
        run = sweep / run_id
        run.mkdir(parents=True)
        (run / store.CONFIG).write_text("{}\n")
        if status:
            store.write_json(run / store.SUMMARY, {"run_id": run_id, "status": status,
                                                   "n_params_non_embedding": n, "n_params_total": 2 * n})
        for step in (1, 2, 3):
            store.append_jsonl(run / store.METRICS, {"step": step, "tokens": 1000 * step,
                                                     "train_loss": 5.0 / step})
            store.append_jsonl(run / store.METRICS, {"step": step, "tokens": 1000 * step,
                                                     "val_loss": 4.0 / step})
    with open(sweep / "b" / store.METRICS, "a") as f:
        f.write('{"step": 4, "tokens": 40')  # torn last line
    with pytest.warns(UserWarning, match="torn"):
        curves = curves_from_store(sweep)
    assert sorted(curves.run_id.unique()) == ["a", "b"]  # "c" has no summary: not finished
    assert len(curves) == 6 and curves.loss.tolist()[:3] == pytest.approx([4.0, 2.0, 4.0 / 3])
    assert set(curves.n) == {1e6, 2e6}
    with pytest.warns(UserWarning, match="torn"):
        assert set(curves_from_store(sweep, param_convention="total").n) == {2e6, 4e6}
    with pytest.raises(UsageError, match="param_convention"):
        curves_from_store(sweep, param_convention="embedding")
    with pytest.raises(UsageError, match="no run store"):
        curves_from_store(tmp_path / "missing")


def test_curves_from_a_real_sweep(micro_sweep):
    # The trainer's own metrics.jsonl (conftest's micro sweep), not a hand-made imitation.
    _, result = micro_sweep
    table = store.read_runs(result.sweep_dir)
    finished = table[table.status == "finished"]
    curves = curves_from_store(result.sweep_dir)
    assert len(finished) >= 2 and set(curves.run_id) == set(finished.run_id)
    for run in finished.itertuples():
        curve = curves[curves.run_id == run.run_id]
        assert len(curve) >= 2 and (curve.n == run.n_params_non_embedding).all()
        assert curve.tokens.is_monotonic_increasing and curve.tokens.max() <= run.tokens
        assert np.all(np.isfinite(curve.loss)) and curve.loss.iloc[-1] < curve.loss.iloc[0]

# ----------------------------------------------------------------------------- Kaplan's laws

from scaling.laws.optimal.kaplan import compute_frontier, fit_kaplan, fit_kaplan_table  # noqa: E402

A_N, A_D, N_C, D_C = 0.076, 0.095, 8.8e13, 5.4e13  # Kaplan et al. 2020, eqs. 1.1-1.2


def kaplan_loss(n, d):
    """Kaplan's eq. 1.5, L(N, D) = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D."""
    return ((N_C / n) ** (A_N / A_D) + D_C / d) ** A_D


def test_kaplan_single_laws_exact_on_power_law_data():
    sizes, budgets = np.logspace(5, 9, 9), np.logspace(7, 11, 9)
    n, d = (g.ravel() for g in np.meshgrid(sizes, budgets))
    # Loss is exactly (N_c/N)^alpha_N at the largest D of each size, higher at smaller D ...
    loss_n = (N_C / n) ** A_N * (1 + 0.01 * np.log(budgets.max() / d))
    fit = fit_kaplan(n, d, loss_n)
    assert fit.L_N.alpha == pytest.approx(A_N, rel=1e-9)
    assert fit.L_N.x_c == pytest.approx(N_C, rel=1e-6)
    assert fit.L_N.n_points == 9
    # ... and likewise (D_c/D)^alpha_D at the largest N of each budget.
    loss_d = (D_C / d) ** A_D * (1 + 0.01 * np.log(sizes.max() / n))
    fit = fit_kaplan(n, d, loss_d)
    assert fit.L_D.alpha == pytest.approx(A_D, rel=1e-9)
    assert fit.L_D.x_c == pytest.approx(D_C, rel=1e-6)


def test_compute_frontier_keeps_only_new_lows():
    c = np.array([1e18, 2e18, 4e18, 3e18, 8e18, 8e18])
    loss = np.array([3.0, 3.2, 2.5, 2.8, 2.6, 2.4])
    fc, fl = compute_frontier(c, loss)
    assert fc.tolist() == [1e18, 3e18, 4e18, 8e18] and fl.tolist() == [3.0, 2.8, 2.5, 2.4]
    # Exact power law on the frontier, dominated points above it: exact recovery of alpha_C.
    cs = np.logspace(17, 21, 9)
    frontier = (3.1e8 * 8.64e19 / cs) ** 0.05
    n = np.concatenate([np.full(9, 1e8), np.full(9, 1e8)])
    d = np.concatenate([cs, cs * 1.5]) / (6 * n)
    fit = fit_kaplan(n, d, np.concatenate([frontier, frontier * 1.2]))
    assert fit.L_C.n_points == 9
    assert fit.L_C.alpha == pytest.approx(0.05, rel=1e-9)
    assert fit.L_C.x_c == pytest.approx(3.1e8 * 8.64e19, rel=1e-6)


def test_kaplan_laws_from_kaplans_joint_law():
    # L(N) read off the largest-D runs approaches alpha_N when D is large enough ...
    n, d = (g.ravel() for g in np.meshgrid(np.logspace(5, 9, 17), np.logspace(7, 15, 33)))
    fit = fit_kaplan(n, d, kaplan_loss(n, d))
    assert fit.L_N.alpha == pytest.approx(A_N, abs=0.001)
    n, d = (g.ravel() for g in np.meshgrid(np.logspace(5, 13, 33), np.logspace(7, 14, 29)))
    fit = fit_kaplan(n, d, kaplan_loss(n, d))
    # ... and along the frontier, minimising the joint law with C = 6ND gives, analytically,
    # L ~ C^-(alpha_N / (1 + alpha_N/alpha_D)) = C^-0.0422: a second route to the same exponent.
    assert fit.L_C.alpha == pytest.approx(A_N / (1 + A_N / A_D), abs=0.001)
    n, d = (g.ravel() for g in np.meshgrid(np.logspace(14, 16, 9), np.logspace(7, 11, 17)))
    fit = fit_kaplan(n, d, kaplan_loss(n, d))
    assert fit.L_D.alpha == pytest.approx(A_D, abs=0.001)


def test_kaplan_table_uses_finished_non_embedding_runs():
    n = np.array([1e6, 1e6, 4e6, 4e6, 1.6e7, 1.6e7])
    d = np.array([1e8, 4e8, 1e8, 4e8, 1e8, 4e8])
    table = pd.DataFrame({
        "status": ["finished"] * 6 + ["failed"],
        "n_params_non_embedding": np.append(n, 1e9), "n_params_total": np.append(n, 1e9) * 3,
        "tokens": np.append(d, 1e8), "final_val_loss": np.append(kaplan_loss(n, d), 0.1),
        "flops_6nd": np.append(6 * n * d, 6e17)})
    fit = fit_kaplan_table(table)
    assert fit.param_convention == "non_embedding"
    assert fit.L_N.n_points == 3 and max(fit.L_N.x) == 1.6e7  # the failed 1e9 run is not used
    direct = fit_kaplan(n, d, kaplan_loss(n, d))
    assert fit.L_N.alpha == pytest.approx(direct.L_N.alpha)


def test_kaplan_reasons_when_too_few_points():
    fit = fit_kaplan([1e6, 1e6], [1e8, 2e8], [4.0, 3.9])
    assert fit.L_N is None and any("L(N)" in r for r in fit.reasons)
    assert fit.L_D is not None  # two budgets, one size each


def test_kaplan_laws_say_which_runs_they_used_and_when_the_design_is_not_theirs():
    # A cross grid: every size has the same largest D, so L(N) is read at one D (Kaplan's design).
    sizes, budgets = np.geomspace(1e6, 1e8, 5), np.geomspace(1e8, 1e10, 4)
    n, d = (v.ravel() for v in np.meshgrid(sizes, budgets))
    loss = BESIROGLU.law.loss(n, d)
    cross = fit_kaplan(n, d, loss)
    assert cross.L_N.used == "the largest-D run of each model size" and cross.L_N.caveat is None
    assert cross.L_D.caveat is None
    # An IsoFLOP design: each size's largest D differs (D = C / 6N), so L(N) mixes N with D.
    c = np.repeat(np.geomspace(1e16, 1e18, 3), 5)
    n = np.tile(np.geomspace(1e6, 1e8, 5), 3)
    iso = fit_kaplan(n, c / (6 * n), BESIROGLU.law.loss(n, c / (6 * n)))
    assert "mixes the effects of N and D" in iso.L_N.caveat and "ranges from" in iso.L_N.caveat
    assert iso.to_dict()["L_N"]["caveat"] == iso.L_N.caveat


def test_isoflop_window_leaves_a_within_its_interval_on_hoffmann_points():
    # Hoffmann et al.'s IsoFLOP profiles span 1.5-2 decades of N. Halving or doubling the window
    # around each budget's lowest loss moves a by far less than its interval (measured: 0.5134 at
    # 1 decade, 0.5125 with every size).
    n, d, loss = chinchilla_points()
    by_window = {w: isoflop(n, d, loss, budgets=HOFFMANN_BUDGETS, window=w) for w in (0.5, 1.0, 2.0)}
    default = by_window[1.0]
    half_width = (default.a_ci[1] - default.a_ci[0]) / 2
    for w, result in by_window.items():
        assert len(result.usable) >= 7, w
        assert abs(result.a - default.a) < half_width / 2, (w, result.a, default.a)


def test_isoflop_window_removes_the_bias_of_far_points():
    # Along each budget the loss is a parabola in ln N near its bottom and rises faster far from it
    # (a quartic wall, as real profiles do where a model is far too small or too large). Sizes
    # 100x off bend an all-points parabola; the window fits near the bottom and finds the vertex.
    a_true, k = 0.45, -2.0
    n, d, loss = [], [], []
    for i, c in enumerate(np.logspace(18, 21, 4)):
        centre = a_true * np.log(c) + k
        for u in np.linspace(-2.5 - i, 2.0, 15):       # a ladder reaching further down at each budget
            n.append(np.exp(centre + u))
            d.append(c / (6 * n[-1]))
            loss.append(2.0 + 0.05 * u**2 + 0.02 * u**4 * (u < -2.3))
    n, d, loss = np.array(n), np.array(d), np.array(loss)
    windowed = isoflop(n, d, loss, window=1.0)
    everything = isoflop(n, d, loss, window=None)
    assert windowed.a == pytest.approx(a_true, abs=1e-6)
    assert abs(everything.a - a_true) > 10 * abs(windowed.a - a_true)


def test_isoflop_groups_by_planned_budget_in_another_measure():
    # A store planned in 6N non-embedding: its runs' exact FLOPs differ within a budget, so the
    # budgets only label which runs belong together; each budget's C is the mean of its runs'.
    law = CHINCHILLA.law
    n, d = budget_grid(law, budgets=np.logspace(18, 21, 4))
    labels = np.round(np.log10(6 * n * d), 3)
    exact = 6 * n * d * (1 + 2e5 / n) ** 0.5           # a count that grows faster for small models
    result = isoflop(n, d, law.loss(n, d), compute=exact, groups=labels)
    assert len(result.budgets) == 4 and result.grouping.startswith("planned budgets")
    for budget, profile in zip(result.budgets, result.profiles):
        mine = exact[profile.index]
        assert budget.compute == pytest.approx(float(np.exp(np.log(mine).mean())), rel=1e-12)
