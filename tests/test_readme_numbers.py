"""bench/readme_numbers.py on the shared micro sweep: the numbers it prints are the store's and
the fit's (what docs/ quote from a fresh `make demo` comes from the same code)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from scaling.cli import main
from tests.conftest import MICRO_RUNS

SCRIPT = Path(__file__).parents[1] / "bench" / "readme_numbers.py"


def test_readme_numbers_prints_the_store_s_and_the_fit_s(micro_sweep, tmp_path, capsys):
    _, sweep = micro_sweep
    assert main(["fit", str(sweep.sweep_dir), "--bootstrap", "10", "--out", str(tmp_path / "fit")]) == 0
    fit = json.loads((tmp_path / "fit" / "fit.json").read_text())
    spec = importlib.util.spec_from_file_location("readme_numbers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    capsys.readouterr()
    assert module.main([str(sweep.sweep_dir), str(tmp_path / "fit")]) == 0
    out = capsys.readouterr().out
    assert f"runs: {MICRO_RUNS} finished of {MICRO_RUNS}" in out
    assert f"fit: {fit['data']['n_points']} points; verdict {fit['verdict']['verdict']}" in out
    assert f"a = {fit['allocation']['a']:.2f}" in out
    assert f"residual RMS {100 * fit['residual_rms']:.2f}%" in out
    assert "per-token accuracy:" in out
