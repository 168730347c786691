"""README.md's Python, run as written: the "From Python" block on a table of nine runs (a few
seconds), so that the first code a newcomer copies cannot drift from the API. docs/api.md's
examples are doctests of their own (tests/laws/test_api.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from scaling.cli import main
from scaling.laws.results.fit_file import write_fit

README = Path(__file__).resolve().parents[1] / "README.md"
# Nine runs of three sizes on three token counts (docs/api.md's table), under the README's column names.
RUNS = pd.DataFrame({"N": [1e7, 1e7, 1e7, 3e7, 3e7, 3e7, 1e8, 1e8, 1e8], "D": [2e8, 6e8, 2e9] * 3,
                     "loss": [3.90, 3.71, 3.60, 3.62, 3.41, 3.29, 3.46, 3.23, 3.10]})


def python_block(heading: str) -> str:
    """The indented code block that follows `heading` in README.md."""
    text = README.read_text()
    section = text[text.index(heading):]
    block = re.search(r"\n\n((?:    .*\n)+)", section)
    assert block is not None, f"no indented code block under {heading!r}"
    return "\n".join(line[4:] for line in block.group(1).splitlines())


def test_the_readme_s_python_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    RUNS.to_csv("points.csv", index=False)
    code = python_block("## From Python")
    assert 'scaling.fit("points.csv"' in code
    names: dict = {}
    exec(compile(code, "README.md", "exec"), names)
    out = capsys.readouterr().out
    f = names["f"]
    assert out.startswith(f"verdict: {f.verdict.upper()}") and "(9 points; C = 6ND); predicts and plans by" in out
    lo, hi = f.interval("alpha")
    assert lo < f.alpha < hi and f.plan(1e24).intervals is not None and f.predict(1e9, 2e10).interval is not None
    # scaling.compare is `scaling compare`: the same rows, as its --json prints them
    write_fit(tmp_path / "fit", f)
    assert main(["compare", str(tmp_path / "fit"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["rows"]
    rows = names["scaling"].compare(f)
    assert [r["name"] for r in printed] == [r["name"] for r in rows]
    assert [r["a"] for r in printed] == [r["a"] for r in rows] and rows[0]["name"] == "your fit"
