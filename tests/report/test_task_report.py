"""The report's section on metrics beyond the loss, and `scaling fit --metric`, on the micro sweep's
real store: once with its per-token probabilities replaced by a known smooth rise (exact match of 16
tokens is then p^16, sharp), once with the metrics taken out (a store from before they were
recorded), and as trained."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from scaling.cli import main
from scaling.laws.fitting.fitdata import digest_arrays
from scaling.report.report import make_report
from scaling.runs import store
from scaling.train.metrics import TASK_FIELDS


def _run(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _rewrite(sweep_dir, change) -> None:
    """Apply change(summary) to every run's summary.json and rewrite runs.csv, as a sweep would."""
    for run_dir in store.run_dirs(sweep_dir):
        summary = store.read_summary(run_dir)
        change(summary)
        store.write_json(run_dir / store.SUMMARY, summary)
    store.write_table(sweep_dir)


def _copy(micro_sweep, tmp_path, name):
    _, sweep = micro_sweep
    return shutil.copytree(sweep.sweep_dir, tmp_path / name)


def _rows(md: str, header: str) -> list[list[str]]:
    """The cells of each row of the markdown table whose header starts with `header`."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header}"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_exact_match_looks_emergent_while_per_token_accuracy_rises_smoothly(micro_sweep, tmp_path):
    sweep_dir = _copy(micro_sweep, tmp_path, "emergent")
    flops = [store.read_summary(d)["flops_exact"] for d in store.run_dirs(sweep_dir)]
    lo, hi = np.log(min(flops)), np.log(max(flops))

    def smooth(summary):    # per-token probability p: a straight line in log compute; exact match of k: p^k
        p = 0.35 + 0.6 * (np.log(summary["flops_exact"]) - lo) / (hi - lo)
        summary.update(final_token_accuracy=p, final_continuation_logprob=16 * np.log(p),
                       exact_match=[p ** k for k in range(1, 17)],
                       **{f"final_exact_match_{k}": p ** k for k in (1, 4, 16)})

    _rewrite(sweep_dir, smooth)
    make_report(sweep_dir, out=tmp_path / "report", bootstrap=0)
    md = (tmp_path / "report" / "report.md").read_text()
    assert (tmp_path / "report" / "figures" / "task_metrics.png").is_file()
    start = md.index("## Beyond the loss")
    end = md.find("\n## ", start + 1)
    section = md[start:end if end > 0 else None]       # up to the next section, wherever it comes
    rows = {row[0]: row[1:] for row in _rows(section, "metric")}
    assert rows["per-token accuracy"][0] == "smooth" and rows["per-token accuracy"][-1] == "gradual"
    assert rows["exact match, 16 tokens"][0] == "exact match" and rows["exact match, 16 tokens"][-1] == "sharp"
    assert rows["exact match, 1 token"][-1] == "gradual"       # p itself: only long matches jump
    verdict = next(line for line in section.splitlines() if line.startswith("**Looks emergent"))
    emergent, smooth_part = verdict.split("while")
    assert "exact match, 16 tokens" in emergent and "per-token accuracy" not in emergent
    assert "per-token accuracy" in smooth_part and "rise gradually" in smooth_part and "Schaeffer" in smooth_part
    # the hold-out run (the largest compute): p there is 0.95, so exact match of 16 tokens is 0.95^16
    held = {row[1]: row for row in _rows(section, "held-out run")}
    assert set(held) == {"per-token accuracy", *(f"exact match, {k} token{'s' * (k > 1)}" for k in (1, 4, 16))}
    assert float(held["per-token accuracy"][3]) == pytest.approx(0.95, abs=5e-4)
    assert float(held["exact match, 16 tokens"][3]) == pytest.approx(0.95 ** 16, abs=5e-4)
    for row in held.values():                  # a point prediction inside its interval
        point, interval = row[4].split(" ", 1)
        lo, hi = map(float, interval.strip("[]").split(","))
        assert lo - 5e-4 <= float(point) <= hi + 5e-4


def test_the_micro_store_as_trained(micro_sweep, tmp_path):
    """The section on what the runs recorded: observed values are runs.csv's, the prediction's interval
    holds its point, and `scaling fit --metric token_error` fits 1 - accuracy, exactly those numbers."""
    _, sweep = micro_sweep
    table = pd.read_csv(sweep.sweep_dir / store.TABLE)
    rc, out, _ = _run(["fit", str(sweep.sweep_dir), "--metric", "token_error", "--bootstrap", "0",
                       "--out", str(tmp_path / "fit")])
    assert rc == 0 and "fitted to token_error = 1 - per-token top-1 accuracy" in out and "verdict:" in out
    fit = json.loads((tmp_path / "fit" / "fit.json").read_text())
    assert fit["limitations"][0].startswith("fitted to token_error = 1 - per-token top-1 accuracy")
    done = table.assign(error=1 - table.final_token_accuracy).sort_values(["n_params_total", "tokens", "error"])
    assert fit["data"]["digest"] == digest_arrays(done.n_params_total.to_numpy(float), done.tokens.to_numpy(float),
                                                  done.error.to_numpy(float))   # in the fit's canonical order
    rc, out, err = _run(["fit", str(sweep.sweep_dir), "--metric", "exact_match_16", "--out", str(tmp_path / "no")])
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "exact match is bounded" in err
    assert not (tmp_path / "no").exists()


def test_a_store_from_before_the_metrics_still_reads_fits_and_reports(micro_sweep, tmp_path):
    sweep_dir = _copy(micro_sweep, tmp_path, "old")
    _rewrite(sweep_dir, lambda s: [s.pop(key) for key in TASK_FIELDS])
    for col in ("final_token_accuracy", "final_exact_match_16"):
        assert pd.read_csv(sweep_dir / store.TABLE)[col].isna().all()
    rc, _, _ = _run(["fit", str(sweep_dir), "--bootstrap", "0", "--out", str(tmp_path / "fit")])
    assert rc == 0
    rc, _, err = _run(["fit", str(sweep_dir), "--metric", "token_error", "--out", str(tmp_path / "no")])
    assert rc == 2 and "no finished run recorded 'final_token_accuracy'" in err and not (tmp_path / "no").exists()
    make_report(tmp_path / "fit", out=tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Beyond the loss" in md and "retrain them to see the section" in md
    assert not (tmp_path / "report" / "figures" / "task_metrics.png").exists()
