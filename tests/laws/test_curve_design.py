"""`scaling design --curves`: the same planned runs fitted from their whole curves and from their
final losses, at equal FLOPs (scaling.laws.design.curves)."""

import json

import numpy as np
import pytest

from scaling.cli import main
from scaling.config import TrainConfig
from scaling.laws.curves.law import RunSchedule
from scaling.laws.curves.simulate import PlannedCurve, simulate_schedules
from scaling.laws.design.curves import curve_outlook
from scaling.laws.forms.law import Law

LAW = Law(E=1.8, A=400.0, B=2000.0, alpha=0.34, beta=0.37)
TRAIN = TrainConfig(batch_tokens=16384)
GRID = {"log_e": (0.0, 0.5), "log_a": (5.0, 10.0), "log_b": (5.0, 10.0), "alpha": (0.3, 0.6), "beta": (0.3, 0.6)}


def test_a_curve_design_is_predicted_tighter_than_the_final_loss_design_of_the_same_runs():
    """5 sizes x 3 cosine budgets (bench_curve_fit's sweep): the curves give the narrower tokens-per-
    parameter interval, and both intervals of a hold the truth."""
    planned = [PlannedCurve(n, RunSchedule(steps=int(d // TRAIN.batch_tokens), lr=1e-3, train=TRAIN))
               for n in np.geomspace(1e6, 1.6e7, 5) for d in (2e7, 8e7, 3.2e8)]
    outlook = curve_outlook(LAW, planned, anneal=1.0, decay=0.99, noise=0.005, run_noise=0.003, n_sims=2,
                            resamples=20, grid=GRID)
    assert outlook.n_runs == outlook.n_points == 15 and outlook.n_sims == 2
    assert 1 < outlook.tpp_ratio["curves"] < outlook.tpp_ratio["final"], outlook.tpp_ratio
    assert outlook.a_coverage == {"curves": 1.0, "final": 1.0}
    assert outlook.loo_error < 0.01


def test_a_wsd_branch_logs_only_after_its_branch_step_and_a_stable_run_has_no_final_loss():
    stable = RunSchedule(steps=1000, lr=1e-3, train=TrainConfig(batch_tokens=1024, schedule="wsd"), warmup=50,
                         constant=True)
    branch = RunSchedule(steps=800, lr=1e-3, train=stable.train, warmup=50)
    runs = simulate_schedules(LAW, [PlannedCurve(1e6, stable), PlannedCurve(1e6, branch, start=720)],
                              anneal=1.0, decay=0.99, noise=0.0)
    stable_id, branch_id = runs.schedules
    logged = runs.evaluations.groupby("run_id").step.apply(list)
    assert logged[stable_id] == list(range(100, 1001, 100)) and logged[branch_id] == [800]
    assert list(runs.final) == [branch_id]


def test_scaling_design_curves_compares_both_fits_of_a_wsd_plan(capsys):
    args = ["design", "configs/tiny_wsd.yaml", "--law", "chinchilla", "--curves", "--anneal", "0.03",
            "--sims", "1", "--bootstrap", "10"]
    assert main([*args, "--json"]) == 0
    design, = json.loads(capsys.readouterr().out)["designs"]
    assert design["n_runs"] == 25 and design["n_points"] == 20          # 5 stable runs and 20 branches
    assert set(design["tpp_ratio"]) == {"curves", "final"}
    assert all(r > 1 for r in design["tpp_ratio"].values())
    assert main(args) == 0
    assert "D/N hi/lo curves" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [([], "--anneal C"), (["--anneal", "-1"], "--anneal must be"),
                                            (["--anneal", "0.03", "--run-noise", "0.5"], "--run-noise must be")])
def test_scaling_design_curves_refuses_a_missing_or_bad_schedule_effect(extra, message, capsys):
    assert main(["design", "configs/tiny.yaml", "--law", "chinchilla", "--curves", "--noise", "0.01", *extra]) == 2
    assert message in capsys.readouterr().err


def test_the_curve_flags_need_curves(capsys):
    assert main(["design", "configs/tiny.yaml", "--law", "chinchilla", "--anneal", "0.03"]) == 2
    assert "apply to --curves" in capsys.readouterr().err


def test_a_prior_fitted_with_curves_gives_the_schedule_effect(micro_sweep, tmp_path, capsys):
    """The annealing weight and momentum are the prior's curve laws' (median C), not a flag's."""
    _, sweep = micro_sweep
    assert main(["fit", str(sweep.sweep_dir), "--curves", "--bootstrap", "10", "--out", str(tmp_path)]) == 0
    curves = json.loads((tmp_path / "fit.json").read_text())["curves"]
    capsys.readouterr()
    # 3 simulations: under this micro sweep's prior a simulated sweep's fit can run off past what fit.json
    # holds (not identified, left out of the medians), and one simulation alone may be that one.
    assert main(["design", "configs/tiny.yaml", "--prior", str(tmp_path), "--curves", "--sims", "3",
                 "--bootstrap", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["anneal"] == pytest.approx(max(np.median([s["law"]["C"] for s in curves["sizes"]]), 0.0))
    assert out["decay"] == curves["decay"] and out["run_noise"] == pytest.approx(out["noise"] / np.sqrt(2))
