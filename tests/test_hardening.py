"""Issue 29, hardening round three: a fit's files that cannot disagree, bounded memory, stores by
absolute path, side files that are not regular files, and garbage refused in one line, exit 2.

Each test runs the real command (through `scaling.cli.main`) or the real library function on
real files; none mocks this package's code.
"""

import json
import os
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from scaling.cli import main
from scaling.errors import UsageError
from scaling.laws.checks import diagnostics
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.forms.references import reference
from scaling.laws.results import fit_file
from scaling.runs import store
from scaling.validation.result import Validation, ValidationRun, load_validation, write_validation
from tests.hardening.helpers import deadline, refused

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny.yaml"
POINTS = "N,D,loss\n" + "".join(f"{n},{d},{2 + 1e3 / n ** 0.3 + 1e3 / d ** 0.3}\n"
                                for n in (1e6, 1e7, 1e8) for d in (1e8, 1e9))


def fit_points(tmp: Path, name: str, scale: float = 1.0, bootstrap: int = 0) -> Path:
    """`scaling fit` of a small cross grid (losses times `scale`); the fit.json path."""
    table = tmp / f"{name}.csv"
    lines = POINTS.splitlines()
    table.write_text("\n".join([lines[0]] + [f"{ln.rsplit(',', 1)[0]},{float(ln.rsplit(',', 1)[1]) * scale}"
                                             for ln in lines[1:]]) + "\n")
    assert main(["fit", "--csv", str(table), "--n-col", "N", "--d-col", "D", "--loss-col", "loss",
                 "--bootstrap", str(bootstrap), "--out", str(tmp / name)]) == 0
    return tmp / name / "fit.json"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """Three fits made once: "plain" (no bootstrap), "boot" and "other" (20 resamples each,
    "other" of losses 1.3 times higher)."""
    tmp = tmp_path_factory.mktemp("fits")
    fit_points(tmp, "plain")
    fit_points(tmp, "boot", bootstrap=20)
    fit_points(tmp, "other", scale=1.3, bootstrap=20)
    return tmp


def copy_fit(fitted: Path, name: str, tmp: Path) -> Path:
    """A copy of one of the module's fits, to edit; its fit.json path."""
    shutil.copytree(fitted / name, tmp / name)
    return tmp / name / "fit.json"


def edit_fit(path: Path, **changes) -> Path:
    obj = json.loads(path.read_text())
    for key, value in changes.items():      # "params.alpha" edits one entry of a section
        section, _, entry = key.partition(".")
        if entry:
            obj[section] = {**obj[section], entry: value}
        else:
            obj[section] = value
    path.write_text(json.dumps(obj))
    return path


# --------------------------------------------------------------------------------------------
# 1. A fit's files as one unit


@pytest.mark.parametrize("site", ["write:fit.json", "write:fit.bootstrap.csv"])
def test_a_fit_cut_short_never_pairs_its_numbers_with_another_fits_intervals(fitted, tmp_path, monkeypatch, site):
    # The case 1: a full disk while `scaling fit` writes. Whichever file the disk fills
    # on, what load_fit returns afterwards is one fit's law with that fit's samples, or a refusal.
    old = fit_file.load_fit(copy_fit(fitted, "boot", tmp_path))
    new = fit_file.load_fit(fitted / "other")
    assert not np.array_equal(old.resampled, new.resampled)
    monkeypatch.setenv("SCALING_FAULT", f"oserror_at={site}:1,errno=ENOSPC")
    with pytest.raises(OSError):
        fit_file.write_fit(tmp_path / "boot", new)
    monkeypatch.delenv("SCALING_FAULT")
    try:
        loaded = fit_file.load_fit(tmp_path / "boot")
    except UsageError as exc:
        assert "fit.bootstrap.csv belongs to another fit" in str(exc)
        return
    pair = next(f for f in (old, new) if f.law == loaded.law)
    assert np.array_equal(loaded.resampled, pair.resampled)


def test_plan_refuses_the_samples_of_another_fit_naming_the_file(fitted, tmp_path, capsys):
    fit = copy_fit(fitted, "boot", tmp_path)
    shutil.copy(fitted / "other" / "fit.bootstrap.csv", fit.with_name("fit.bootstrap.csv"))
    refused(["plan", "--fit", fit, "--compute", "1e21"], capsys, "boot/fit.bootstrap.csv belongs to another fit")


def test_a_refit_without_bootstrap_removes_the_old_samples(fitted, tmp_path):
    fit = copy_fit(fitted, "boot", tmp_path)
    fit_file.write_fit(fit, fit_file.load_fit(fitted / "plain"))
    assert not fit.with_name("fit.bootstrap.csv").exists()
    assert fit_file.load_fit(fit).law == fit_file.load_fit(fitted / "plain").law


@pytest.mark.parametrize("column, value", [(0, "-1.0"), (1, "-2.0"), (2, "-inf"), (3, "nan")])
def test_impossible_bootstrap_constants_are_refused(fitted, tmp_path, capsys, column, value):
    # A hand edit that keeps the digest line: the values themselves are checked.
    path = copy_fit(fitted, "boot", tmp_path).with_name("fit.bootstrap.csv")
    lines = path.read_text().splitlines()
    cells = lines[3].split(",")
    lines[3] = ",".join(cells[:column] + [value] + cells[column + 1:])
    path.write_text("\n".join(lines) + "\n")
    refused(["plan", "--fit", path.parent, "--compute", "1e21"], capsys, "fit.bootstrap.csv: row 2 holds")


# --------------------------------------------------------------------------------------------
# 2. Memory: the bracketing check without an n x n matrix


def pairwise_share(data, law) -> float:
    """The check as it was: every pair of points compared (n x n)."""
    log_c = np.log10(data.compute)
    n_opt = np.asarray(law.n_opt(data.compute), dtype=float)
    near = np.abs(log_c[:, None] - log_c[None, :]) <= diagnostics.THRESHOLDS["compute_neighbourhood"]
    below = (near & (data.n[None, :] <= n_opt[:, None])).any(axis=1)
    above = (near & (data.n[None, :] >= n_opt[:, None])).any(axis=1)
    return float(np.mean(below & above))


def test_bracketed_share_equals_the_pairwise_answer():
    law = reference("chinchilla").law
    width = diagnostics.THRESHOLDS["compute_neighbourhood"]
    rng = np.random.default_rng(0)
    shares = set()
    for trial in range(300):
        k = int(rng.integers(1, 80))
        if trial % 2:   # budgets on a lattice of half the width: many pairs exactly `width` apart
            log_c = 18 + width / 2 * rng.integers(0, 12, k)
            n = 10 ** rng.uniform(6, 10, k)
            d = 10 ** log_c / (6 * n)
        else:
            n, d = 10 ** rng.uniform(6, 10, k), 10 ** rng.uniform(8, 12, k)
        data = FitData(n=n, d=d, loss=np.full(k, 3.0), source="random")
        share = diagnostics.bracketed_share(data, law)
        assert share == pairwise_share(data, law), trial
        shares.add(share)
    assert len(shares) > 20          # the cases are not all 0 or all 1


def test_bracketed_share_of_100k_points_takes_megabytes_not_gigabytes():
    rng = np.random.default_rng(1)
    n, d = 10 ** rng.uniform(6, 10, 100_000), 10 ** rng.uniform(8, 12, 100_000)
    data = FitData(n=n, d=d, loss=np.full(n.size, 3.0), source="random")
    tracemalloc.start()
    try:
        share = diagnostics.bracketed_share(data, reference("chinchilla").law)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0 < share <= 1
    assert peak < 50e6, peak          # pairwise: 100k x 100k booleans alone are 10 GB


# --------------------------------------------------------------------------------------------
# 3. The run store by absolute path and digest


def test_validate_and_report_read_the_fits_store_from_any_folder_and_refuse_it_changed(
        tmp_path, micro_sweep, monkeypatch, capsys):
    from scaling.report.inputs import load_inputs
    from scaling.validation.run import fit_store

    _, result = micro_sweep
    runs = tmp_path / "work" / "runs"
    shutil.copytree(result.sweep_dir, runs / "micro", ignore=shutil.ignore_patterns(store.LOCK, store.TABLE_LOCK))
    monkeypatch.chdir(tmp_path / "work")
    assert main(["fit", "runs/micro", "--bootstrap", "0", "--out", "fit"]) == 0
    fit_path = tmp_path / "work" / "fit" / "fit.json"
    recorded = json.loads(fit_path.read_text())["data"]["store"]
    assert recorded["path"] == str((runs / "micro").resolve())
    # Elsewhere, with a different store at the same relative path: the fit's own store is read.
    (tmp_path / "elsewhere" / "runs" / "micro").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere")
    fit = fit_file.load_fit(fit_path)
    assert fit_store(fit) == (runs / "micro").resolve()
    assert load_inputs(fit_path).runs_dir == (runs / "micro").resolve()
    # One run's loss edited since the fit: refused, naming the store.
    summary = next((runs / "micro").glob(f"*/{store.SUMMARY}"))
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "final_val_loss": 9.5}))
    with pytest.raises(UsageError, match="has changed since the fit"):
        load_inputs(fit_path)
    refused(["validate", fit_path, "--compute", "1e12", "--dry-run"], capsys, "has changed since the fit")


# --------------------------------------------------------------------------------------------
# 4. Side files that are not regular files: refused, never read forever


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_a_side_file_that_is_a_device_or_fifo_is_refused(fitted, tmp_path, capsys, kind):
    side = copy_fit(fitted, "boot", tmp_path).with_name("fit.bootstrap.csv")
    side.unlink()
    os.symlink("/dev/zero", side) if kind == "/dev/zero" else os.mkfifo(side)
    # a link (here to /dev/zero) is refused as a link before its target is looked at; a FIFO as not a regular file
    expected = "is a link: a fit's files are plain files in its folder" if kind == "/dev/zero" else "not a regular file"
    with deadline(30):
        refused(["plan", "--fit", side.parent, "--compute", "1e21"], capsys, expected)
        refused(["cost", "inference-aware", "--fit", side.parent, "--loss", "3", "--inference-tokens", "0"],
                capsys, expected)


def test_a_config_or_fit_that_is_a_fifo_is_refused(tmp_path, capsys):
    os.mkfifo(tmp_path / "sweep.yaml")
    os.mkfifo(tmp_path / "fit.json")
    os.mkfifo(tmp_path / "points.csv")
    with deadline(30):
        refused(["fit", "--csv", tmp_path / "points.csv", "--out", tmp_path / "fit"], capsys, "not a regular file")
        refused(["sweep", tmp_path / "sweep.yaml", "--dry-run", "--runs-dir", tmp_path / "runs"], capsys,
                "not a regular file")
        refused(["design", "--prior", tmp_path / "fit.json", TINY], capsys, "not a regular file")
        refused(["validate", tmp_path / "fit.json", "--compute", "1e15", "--dry-run"], capsys, "not a regular file")


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_a_runs_metrics_or_a_validate_json_that_is_a_device_or_fifo_is_refused(fitted, tmp_path, micro_sweep,
                                                                                capsys, kind):
    # A run's metrics.jsonl (the fit reads the store's curves) hung `fit` as a FIFO and raised a
    # MemoryError as /dev/zero; a validate.json that was not a regular file was left out of the
    # report without a word.
    _, result = micro_sweep
    runs = tmp_path / "runs" / "micro"
    shutil.copytree(result.sweep_dir, runs, ignore=shutil.ignore_patterns(store.LOCK, store.TABLE_LOCK))
    validation = copy_fit(fitted, "plain", tmp_path).with_name("validate.json")
    for side in (next(runs.glob(f"*/{store.METRICS}")), validation):
        side.unlink(missing_ok=True)
        os.symlink("/dev/zero", side) if kind == "/dev/zero" else os.mkfifo(side)
    with deadline(60):
        refused(["fit", runs, "--bootstrap", "0", "--out", tmp_path / "fit"], capsys, "not a regular file")
        refused(["report", validation.parent, "--out", tmp_path / "report"], capsys, "not a regular file")


# --------------------------------------------------------------------------------------------
# 5 and 7. Tracebacks and garbage: one line, exit 2


@pytest.mark.parametrize("alpha, beta", [(0, 0.3), (0.3, -0.2), (0, 0), (-0.3, 0.3)])
def test_a_law_without_an_allocation_is_refused_by_every_command(fitted, tmp_path, capsys, alpha, beta):
    fit = edit_fit(copy_fit(fitted, "plain", tmp_path), **{"params.alpha": alpha, "params.beta": beta})
    expected = "a compute-optimal allocation needs A, B, alpha and beta positive"
    refused(["plan", "--fit", fit, "--compute", "1e21"], capsys, expected)
    refused(["compare", fit], capsys, expected)
    refused(["validate", fit, "--compute", "1e15", "--dry-run", "--config", TINY], capsys, expected)
    refused(["design", "--prior", fit, TINY], capsys, expected)


@pytest.mark.parametrize("changes, expected", [
    ({"ci": {"level": 5, "n_resamples": 20}}, "'ci.level' input should be less than 1, got 5"),
    ({"ci": {"level": -0.5, "n_resamples": 20}}, "'ci.level' input should be greater than 0, got -0.5"),
    ({"ci": {"level": 0.95, "n_resamples": 20, "alpha": 0.3}}, "'ci.alpha' input should be a valid tuple, got 0.3"),
    ({"residual_rms": -1}, "'residual_rms' must be >= 0"),
    ({"data.c_range": "abc"}, "'data.c_range' must be a list [lo, hi] of positive numbers"),
    ({"data.source": 5}, "'data.source' must be str or null, got 5"),
    ({"repeated": {"ci": [1, 2]}}, "'repeated.params' is missing"),     # the first of its fields refused
    ({"data.store": {"path": 3}}, "'data.store' must be"),
    ({"data.provenance": {"kind": "web", "location": "x"}}, "'data.provenance' must be {\"kind\": \"runs\""),
    ({"data.context_use": [0.1, -0.1]}, "'data.context_use' must be a list [lowest, highest] of numbers"),
    ({"holdout": {"fraction": 0.2}}, "'holdout.n_points' is missing"),
])
def test_a_malformed_fit_json_is_refused_in_one_line(fitted, tmp_path, capsys, changes, expected):
    fit = edit_fit(copy_fit(fitted, "plain", tmp_path), **changes)
    argv = (["validate", fit, "--compute", "1e15", "--dry-run"] if "store" in str(changes)
            else ["plan", "--fit", fit, "--compute", "1e21"])
    refused(argv, capsys, expected)


def test_validate_beyond_the_familys_shape_limits_is_refused(fitted, capsys):
    refused(["validate", fitted / "plain" / "fit.json", "--compute", "1e28", "--dry-run", "--config", TINY],
            capsys, "its shapes stop below d_model")


def test_cost_inference_aware_with_extreme_constants_is_refused(fitted, tmp_path, capsys):
    extreme = {"E": 1.0, "A": 1e300, "B": 1e300, "alpha": 1e-3, "beta": 1e-3}
    fit = edit_fit(copy_fit(fitted, "plain", tmp_path), params=extreme)
    refused(["cost", "inference-aware", "--fit", fit, "--compute", "1e21", "--inference-tokens", "1e12"], capsys,
            "lies beyond a float's range")


def test_plan_and_design_refuse_impossible_numbers(tmp_path, capsys):
    refused(["plan", "--compute", "1e21", "--unique-tokens", "1e-300"], capsys, "unique tokens must be at least 1")
    refused(["design", "--bootstrap", "100001", TINY], capsys,
            "--bootstrap must be a whole number >= 10 and <= 100,000; got 100001")


def good_validation() -> Validation:
    runs = tuple(ValidationRun(position=p, run_id=f"r{i}", d_model=32, n_layers=2, n_heads=2, lr=1e-3, n=1e5 * (i + 1),
                               d=1e7, predicted=3.0, interval=(2.9, 3.1), status="finished", observed=3.0 + i / 10)
                 for i, p in enumerate(("smaller", "optimum", "larger")))
    return Validation(compute=1e15, largest_fit_compute=1e14, n_opt=2e5, d_opt=1e7, level=0.95, runs=runs,
                      fit_verdict="trustworthy", forced=False, store="runs/x-validate", fit="fit.json",
                      law={"E": 1.8, "A": 400.0, "B": 400.0, "alpha": 0.34, "beta": 0.28})


@pytest.mark.parametrize("edit, expected", [
    (lambda v: v.update(compute=-1), "'compute' must be a positive number, got -1"),
    (lambda v: v.update(level=5), "'level' must be a number in (0, 1)"),
    (lambda v: v.update(runs=v["runs"][:2]), "'runs' must be a list of 3 runs"),
    (lambda v: v["runs"][0].update(interval="wide"), "'runs[0].interval'"),
    (lambda v: v["runs"][1].update(observed=float("inf")), "'runs[1].observed' must be a loss from 0 to 10000 nats"),
    (lambda v: v["runs"][2].update(position="optimum"), "one run at each of smaller, optimum, larger"),
    (lambda v: v["law"].update(alpha="x"), "'law' must be the constants"),
    (lambda v: v.update(forced="no"), "'forced' must be true or false"),
    (lambda v: v.update(fit_context_use=[0.1]), "'fit_context_use' must be [lowest, highest] or null"),
    (lambda v: v["runs"][0].update(context_use="high"), "'runs[0].context_use' must be a finite number or null"),
])
def test_a_malformed_validate_json_is_refused_naming_it(tmp_path, edit, expected):
    path = write_validation(tmp_path, good_validation())
    assert load_validation(path) == good_validation()
    obj = json.loads(path.read_text())
    edit(obj)
    path.write_text(json.dumps(obj).replace("Infinity", "1e999"))
    with pytest.raises(UsageError) as exc:
        load_validation(path)
    assert str(path) in str(exc.value) and expected in str(exc.value)


# --------------------------------------------------------------------------------------------
# 5. Figures, reports and tune's files: written atomically, a link replaced, not written through


def test_a_figure_replaces_a_symlink_and_a_full_disk_leaves_the_old_file(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from scaling.report.style import save

    outside = tmp_path / "precious.txt"
    outside.write_text("a user's file")
    os.symlink(outside, tmp_path / "tune.png")
    fig = Figure()
    fig.add_subplot().plot([1, 2], [3, 4])
    save(fig, tmp_path, "tune")
    assert outside.read_text() == "a user's file" and not (tmp_path / "tune.png").is_symlink()
    before = (tmp_path / "tune.svg").read_bytes()
    fig.axes[0].plot([1, 2], [4, 3])
    monkeypatch.setenv("SCALING_FAULT", "oserror_at=write:tune.svg:1,errno=ENOSPC")
    with pytest.raises(OSError, match="tune.svg"):
        save(fig, tmp_path, "tune")
    assert (tmp_path / "tune.svg").read_bytes() == before


@pytest.mark.parametrize("content, expected", [
    ("sweep: micro\nseed: 0\n", "is not a run's config (no corpus, tokenizer, model"),
    (b"sweep: caf\xe9\n", "not UTF-8 text"),
])
def test_validate_refuses_a_hand_edited_run_config_in_one_line(tmp_path, micro_sweep, capsys, content, expected):
    _, result = micro_sweep
    runs = tmp_path / "runs" / "micro"
    shutil.copytree(result.sweep_dir, runs, ignore=shutil.ignore_patterns(store.LOCK, store.TABLE_LOCK))
    assert main(["fit", str(runs), "--bootstrap", "0", "--out", str(tmp_path / "fit")]) == 0
    config = next(runs.glob(f"*/{store.CONFIG}"))
    config.write_bytes(content if isinstance(content, bytes) else content.encode())
    refused(["validate", tmp_path / "fit" / "fit.json", "--compute", "1e12", "--dry-run"], capsys, expected)
