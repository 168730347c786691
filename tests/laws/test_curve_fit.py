"""The curve law (Tissue et al. 2024) and the law fitted from training curves (`scaling fit --curves`):
on curves simulated from a known law and schedule effect, and on a real micro sweep's store."""

import json
import subprocess
import sys

import numpy as np
import pytest

from scaling.cli import main
from scaling.config import TrainConfig
from scaling.laws.curves.fit import SPAN, fit_curves, fitted_decay, leave_one_run_out
from scaling.laws.curves.law import DECAY, DECAYS, RunSchedule, areas, fit_curve_law
from scaling.laws.curves.runs import read_curve_runs
from scaling.laws.curves.simulate import PlannedCurve, simulate_curves, simulate_schedules
from scaling.laws.design.simulate import cross_grid
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting.fit import fit_law
from scaling.laws.forms.law import Law
from scaling.laws.results import fit_file
from scaling.laws.results import lawfit as results
from scaling.runs import store
from tests.conftest import MICRO, micro_config

LAW = Law(E=1.8, A=400.0, B=2000.0, alpha=0.34, beta=0.37)
TRAIN = TrainConfig(batch_tokens=16384)
SIM = {"train": TRAIN, "lr": 1e-3, "anneal": 1.0, "decay": 0.99}
GRID = {"log_e": (0.0, 0.5), "log_a": (5.0, 10.0), "log_b": (5.0, 10.0), "alpha": (0.3, 0.6), "beta": (0.3, 0.6)}
SIZES, TOKENS = np.geomspace(1e6, 1.6e7, 5), (2e7, 8e7, 3.2e8)


def test_areas_follow_tissue_et_al_definitions():
    lrs = np.array([0.5, 1.0, 1.0, 0.6, 0.2])           # a warmup step, then two drops of 0.4
    s1, s2 = areas(lrs, decay=0.5)
    assert s1 == pytest.approx(np.cumsum(lrs))
    # momentum m: 0, 0, 0, 0.4, 0.5 * 0.4 + 0.4 = 0.6: the warmup's rise is no annealing
    assert s2 == pytest.approx([0.0, 0.0, 0.0, 0.4, 1.0])
    cosine = RunSchedule(steps=1000, lr=1e-3, train=TRAIN).lrs()
    assert cosine[-1] == pytest.approx(1e-4) and cosine.max() == pytest.approx(1e-3)


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_the_curve_law_of_noiseless_curves_predicts_another_budget_exactly(schedule):
    """Two runs of one size: the fitted law has the truth's exponent and annealing weight, and
    predicts the final loss of a third budget it never saw (the schedule re-scaled to it)."""
    sim = {**SIM, "train": TrainConfig(batch_tokens=16384, schedule=schedule)}
    runs = simulate_curves(LAW, cross_grid([4e6], [2e7, 8e7]), noise=0.0, **sim)
    sched = {r: s.areas(SIM["decay"]) for r, s in runs.schedules.items()}
    ev = runs.evaluations
    s1 = np.array([sched[r][0][s - 1] for r, s in zip(ev.run_id, ev.step)])
    s2 = np.array([sched[r][1][s - 1] for r, s in zip(ev.run_id, ev.step)])
    law = fit_curve_law(s1, s2, ev.loss, decay=SIM["decay"])
    assert law.alpha == pytest.approx(LAW.beta, rel=1e-3) and law.C == pytest.approx(1.0, rel=1e-3)
    other = simulate_curves(LAW, cross_grid([4e6], [4.5e7]), noise=0.0, **sim)
    (_, d, truth), = other.final.values()
    assert law.final_loss(next(iter(runs.schedules.values())).rescaled(d)) == pytest.approx(truth, rel=1e-6)
    assert leave_one_run_out(runs, decay=SIM["decay"])["max_abs_error"] < 1e-6


@pytest.mark.parametrize("decay", [0.0, 0.99])
def test_the_annealing_momentum_is_fitted(decay):
    """Noiseless curves of three budgets: the fit finds the lambda they were made with, where its
    curve laws fit exactly, and fit_curves records it with its profile."""
    runs = simulate_curves(LAW, cross_grid([1e6, 4e6], [2e7, 5e7, 8e7]), noise=0.0, **{**SIM, "decay": decay})
    chosen, profile = fitted_decay(runs)
    assert chosen == decay and list(profile) == list(DECAYS)
    assert profile[decay] < 1e-6 and 3 * profile[decay] < min(v for k, v in profile.items() if k != decay)
    fit = fit_curves(runs, resamples=0, grid=GRID)
    assert fit.decay == decay and fit.to_json()["decay_profile"] == [[k, v] for k, v in profile.items()]
    assert fit.leave_one_out["max_abs_error"] < 1e-6
    assert fit_curves(runs, resamples=0, grid=GRID, decay=DECAY).decay_profile == {}   # fixed: no profile


def test_a_size_s_law_is_used_only_where_its_curves_were_fitted():
    """Runs that warm up over 400 of their 1,000-2,000 steps: the law of each size is fitted past
    step 400, so its final losses are taken only at D's whose summed rate its evaluations reach
    (a one-run size's law once gave 194 nats at D/8, below its warmup)."""
    planned = [PlannedCurve(n, RunSchedule(steps=steps, lr=SIM["lr"], train=TRAIN, warmup=400))
               for n in SIZES[:3] for steps in (1000, 2000)]
    runs = simulate_schedules(LAW, planned, anneal=1.0, decay=0.99, noise=0.002)
    fit = fit_curves(runs, resamples=0, grid=GRID, decay=0.99)
    template = RunSchedule(steps=2000, lr=SIM["lr"], train=TRAIN, warmup=400)
    first = template.areas(0.99)[0][400]                  # the summed rate at the first fitted evaluation
    for size in fit.sizes.values():
        assert min(size["d"]) > 2000 * TRAIN.batch_tokens / SPAN        # the grid was cut below
        assert all(template.rescaled(d).areas(0.99)[0][-1] >= first for d in size["d"])


def test_curve_fit_recovers_a_and_is_tighter_than_the_final_loss_fit():
    """One simulated sweep (5 sizes x 3 budgets, per-evaluation and per-run scatter), fitted both ways
    at equal FLOPs; bench/bench_curve_fit.py repeats this 50 times for the coverage rate."""
    runs = simulate_curves(LAW, cross_grid(SIZES, TOKENS), noise=0.005, run_noise=0.003, seed=0, **SIM)
    points = runs.final_points()
    reference = float((6.0 * points.n * points.d).max())
    curves = fit_curves(runs, resamples=20, seed=0, reference_compute=reference, decay=SIM["decay"], grid=GRID)
    lo, hi = curves.ci["a"]
    assert lo <= LAW.a <= hi and hi - lo < 0.3
    final = fit_law(points.n, points.d, points.loss, grid=GRID)
    boot = resampling.bootstrap(points.n, points.d, points.loss, n_resamples=20, seed=0,
                                reference_compute=reference, full_fit=final)
    width = {k: ci[1] / ci[0] for k, ci in (("curves", curves.ci["tokens_per_param"]),
                                           ("final", boot.intervals["tokens_per_param"]))}
    assert width["curves"] < width["final"], width
    loo = curves.leave_one_out
    assert loo["n_runs"] == 15 and loo["mean_abs_error"] < 0.01        # the scatter is 0.6%
    # Each size's longest run is predicted beyond the reach of its other two runs' curves.
    assert [r["beyond_reach"] for r in loo["runs"]] == [False, False, True] * 5
    assert (loo["by_reach"]["within"]["n_runs"], loo["by_reach"]["beyond"]["n_runs"]) == (10, 5)
    assert curves.n_resamples + curves.n_failed == 20


def test_the_curve_law_module_does_not_load_torch():
    code = "import sys, scaling.laws.curves.fit, scaling.train.schedule; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_fit_curves_of_a_real_micro_sweep(micro_sweep, tmp_path, capsys):
    _, sweep = micro_sweep
    out = tmp_path / "fit"
    assert main(["fit", str(sweep.sweep_dir), "--curves", "--bootstrap", "10", "--out", str(out), "--verbose"]) == 0
    printed = capsys.readouterr().out
    assert "fitted to the training curves" in printed and "leave one run out" in printed
    fit = json.loads((out / "fit.json").read_text())
    section = fit["curves"]
    sizes = len(MICRO["grid"]["models"])
    assert len(section["sizes"]) == sizes and all(len(s["runs"]) == 3 for s in section["sizes"])
    assert section["ci"]["resampled"] == "whole runs" and section["reference_compute"] == fit["reference_compute"]
    assert section["leave_one_run_out"]["n_runs"] == 6
    # Each run warms up over 5% of its own steps, so a size's runs do not share one warmup: said so.
    assert all(s["warmup_steps"][0] < s["warmup_steps"][1] for s in section["sizes"])
    assert f"warning: {sizes} of {sizes} sizes' runs warm up over different numbers of steps" in printed
    assert fit_file.load_fit(out / "fit.json").curves == section
    # The numbers, not only the keys. Each size's curve law, at its own runs' budgets, lands on their
    # final losses (runs.csv, a second source) within a few times its residual.
    final = store.read_runs(sweep.sweep_dir).set_index("run_id")
    for size in section["sizes"]:
        at = dict((d, loss) for d, loss in size["points"])
        for run_id in size["runs"]:
            observed = final.loc[run_id]
            assert at[observed.tokens] == pytest.approx(observed.final_val_loss, rel=5 * size["law"]["rms"] + 0.01)
    # Leave one run out: the observed loss is the store's, the error is predicted/observed - 1, the mean
    # is theirs, and each prediction comes from the size's other runs only: it is not the size's own
    # law (fitted with the run) at the run's budget.
    loo = section["leave_one_run_out"]
    for row in loo["runs"]:
        assert row["loss"] == final.loc[row["run_id"]].final_val_loss
        assert row["error"] == pytest.approx(row["predicted"] / row["loss"] - 1, rel=1e-12)
        own = next(s for s in section["sizes"] if row["run_id"] in s["runs"])
        assert abs(row["predicted"] / dict((d, v) for d, v in own["points"])[row["d"]] - 1) > 1e-6
    assert loo["mean_abs_error"] == pytest.approx(np.mean([abs(r["error"]) for r in loo["runs"]]), rel=1e-12)
    # The final-loss fit's interval of a, as fit.json's ci has it ([None, None] there is no interval: None).
    assert section["final_loss_fit"]["a_ci"] == (None if None in fit["ci"]["a"] else fit["ci"]["a"])
    # Without --curves there is no such section: tests/cli/test_cli_fit.py holds fit.json to its schema.
    assert "curves" not in results.LawFit.from_json({k: v for k, v in fit.items() if k != "curves"}).to_json()


def test_a_store_with_one_warmup_per_shape_gives_its_curves_the_schedules_they_trained(tmp_path, cache_dir, capsys):
    """train.warmup_tokens_per_param: the schedules rebuilt from the runs' config.yaml files follow
    the learning rates the runs logged, warmup included (they once fell back to warmup_fraction),
    and a size's runs share their warmup, so fit --curves does not warn."""
    from scaling.sweeps.driver import run_sweep

    train = {**MICRO["train"], "warmup_tokens_per_param": 0.2}
    sweep = run_sweep(micro_config(train=train), tmp_path / "runs", cache_dir)
    runs = read_curve_runs(sweep.sweep_dir)
    assert len(runs.schedules) == len(MICRO["grid"]["models"]) * len(MICRO["grid"]["tokens"])
    for run_id, schedule in runs.schedules.items():
        logged = [json.loads(line) for line in (sweep.sweep_dir / run_id / store.METRICS).read_text().splitlines()]
        steps = np.array([row["step"] for row in logged if "lr" in row])
        assert schedule.lrs()[steps - 1] == pytest.approx([row["lr"] for row in logged if "lr" in row], rel=1e-9)
        warmup = -(-0.2 * runs.final[run_id][0] // MICRO["train"]["batch_tokens"])
        assert schedule.first_decay_step() == min(warmup, schedule.steps - 1)
    assert main(["fit", str(sweep.sweep_dir), "--curves", "--bootstrap", "10", "--out", str(tmp_path / "fit")]) == 0
    assert "warm up over different numbers of steps" not in capsys.readouterr().out
    # Each size's law is used only where its curves were fitted (past the warmup): no point of it
    # lies above the uniform loss (an extrapolation below a long warmup once gave 194 nats).
    sizes = json.loads((tmp_path / "fit" / "fit.json").read_text())["curves"]["sizes"]
    assert all(0 < loss < np.log(MICRO["tokenizer"]["vocab_size"]) for s in sizes for _, loss in s["points"])


@pytest.mark.parametrize("argv", [["fit", "--dataset", "chinchilla", "--curves"],
                                  ["fit", "runs/x", "--curves", "--metric", "accuracy"]])
def test_curves_need_a_store_and_the_loss(argv, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    assert "fitting the training curves needs a run store and the loss" in (err := capsys.readouterr().err)
    assert err.rstrip().endswith("(--curves, --metric)")
    assert not (tmp_path / "o").exists()
