"""bench/readme_numbers.py on the shared micro sweep: the numbers it prints are the store's and
the fit's (what docs/ quote from a fresh `make demo` comes from the same code), and README.md's
excerpt of the demo is what `scaling fit` printed (its validation's part: tests/validate), quoted in
README.md under the Makefile's commands."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
from pathlib import Path

import pytest

from scaling.cli import main
from tests.conftest import MICRO_RUNS

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "bench" / "readme_numbers.py"


def load_script():
    spec = importlib.util.spec_from_file_location("readme_numbers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_excerpt(capsys, runs_dir: Path, fit_dir: Path) -> dict[str, list[str]]:
    """The script's README excerpt: each command's prompt and the lines under it (its indent checked)."""
    capsys.readouterr()
    assert load_script().main([str(runs_dir), str(fit_dir), "--readme"]) == 0
    block = capsys.readouterr().out.splitlines()
    assert all(line.startswith("    ") or not line for line in block)   # a Markdown code block
    parts: dict[str, list[str]] = {}
    for line in (line[4:] for line in block if line):
        if line.startswith("$ "):
            parts[line] = printed = []
        else:
            printed.append(line)
    return parts


@pytest.fixture(scope="module")
def micro_fit(micro_sweep, tmp_path_factory):
    """(run store, fit folder, what `scaling fit` printed) of the shared micro sweep: one fit for this file."""
    _, sweep = micro_sweep
    fit_dir = tmp_path_factory.mktemp("readme") / "fit"
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["fit", str(sweep.sweep_dir), "--bootstrap", "10", "--out", str(fit_dir)]) == 0
    return sweep.sweep_dir, fit_dir, out.getvalue()


def test_readme_numbers_prints_the_store_s_and_the_fit_s(micro_fit, capsys):
    runs_dir, fit_dir, _ = micro_fit
    fit = json.loads((fit_dir / "fit.json").read_text())
    capsys.readouterr()
    assert load_script().main([str(runs_dir), str(fit_dir)]) == 0
    out = capsys.readouterr().out
    assert f"runs: {MICRO_RUNS} finished of {MICRO_RUNS}" in out
    assert f"fit: {fit['data']['n_points']} points; verdict {fit['verdict']['verdict']}" in out
    assert f"a = {fit['allocation']['a']:.2f}" in out
    assert f"residual RMS {100 * fit['residual_rms']:.2f}%" in out
    assert "per-token accuracy:" in out


def test_readme_excerpt_of_the_fit_is_what_scaling_fit_printed(micro_fit, capsys):
    # Remade from fit.json, the excerpt must be lines the command printed, in their order, from the verdict
    # on: README.md cannot quote what `make demo` no longer prints. No validate.json: no validation part.
    runs_dir, fit_dir, printed = micro_fit
    parts = readme_excerpt(capsys, runs_dir, fit_dir)
    assert list(parts) == [f"$ scaling fit {runs_dir}"]
    lines = parts[f"$ scaling fit {runs_dir}"]
    assert lines[0].startswith("verdict: ") and "\n".join(lines) in printed


def test_readme_quotes_make_demo_s_commands_in_the_script_s_form():
    # The excerpt in README.md is pasted from `--readme`: its prompts are the Makefile's fit and validation
    # (the same store, fit and compute), each followed by what the script prints under it.
    readme = (ROOT / "README.md").read_text().split("After the sweep's progress it prints", 1)[1]
    block = re.search(r"\n\n((?:    .*\n|\n)+)", readme).group(1).splitlines()
    prompts = [i for i, line in enumerate(block) if line.startswith("    $ ")]
    makefile = (ROOT / "Makefile").read_text()
    fit = re.search(r"scaling (fit \S+)", makefile).group(1)
    validate = re.search(r"scaling (validate \S+ --compute \S+)", makefile).group(1)
    assert [block[i] for i in prompts] == [f"    $ scaling {fit}", f"    $ scaling {validate}"]
    headline = [line for line in block if line.strip()][-1]
    assert block[prompts[0] + 1].startswith("    verdict: ") and headline.startswith("    at C = ")
