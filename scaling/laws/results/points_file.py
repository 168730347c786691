"""The fitted points beside fit.json, fit.points.csv, so that a fit read back can be drawn.

    text = format_points(fit.points)                                # by `write_fit`, beside fit.json
    points = read_points(text, path, fit.data, fit.law.flops)      # by `load_fit`, the file's text

fit.json keeps what was computed from the points (their digest, ranges, what was left out), not
the points; `LawFit.plot` and Approach 2's profiles need them. They go in a side file, as the
bootstrap's constants do (fit.bootstrap.csv), so fit.json's bytes stay what they were. Its table:
one row a point, columns id, n, d, loss, compute (C in the fit's compute measure), and where the
source planned the runs' budgets, "budget" (in that measure: Approach 2 groups by value) or
"group" (in another measure: a label saying which runs belong together). Floats are written by
repr, so the points read back are the fitted ones to the bit, and what ties the file to its fit
is that: their digest must be fit.json's data.digest (`FitData.digest`). A fit.json whose
constants were edited by hand still draws its points; points of other data are refused.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scaling.errors import UsageError
from scaling.laws.fitting.fitdata import FitData
from scaling.train.compute import FlopsPerToken

if TYPE_CHECKING:
    from scaling.laws.results.fit_sections import DataSummary

COLUMNS = ("id", "n", "d", "loss", "compute")
BUDGET_COLUMNS = ("budget", "group")     # a budget in the fit's measure, or a label in another


def format_points(data: FitData) -> str:
    """fit.points.csv's text: the points, one row each (see the module doc)."""
    budget = [] if data.budgets is None else ["budget" if data.budgets_in_measure else "group"]
    columns = [data.n, data.d, data.loss, data.compute] + ([] if data.budgets is None else [data.budgets])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*COLUMNS, *budget])
    for i, row in enumerate(zip(*columns)):
        writer.writerow([data.ids[i], *(repr(float(v)) for v in row)])
    return out.getvalue()


def read_points(text: str | None, path: Path, summary: DataSummary, flops: FlopsPerToken) -> FitData | None:
    """The points in `text`, the file `path`, as a FitData, with `summary`'s (fit.json's "data")
    source, convention, filters and left-out points; None where there is no such file (`text`
    None), or fit.json records no digest of its points to check them by; UsageError for points
    that are not the fit's."""
    if summary.digest is None or text is None:
        return None
    rows = list(csv.reader(io.StringIO(text)))
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    if tuple(header[:5]) != COLUMNS or len(header) > 6 or (len(header) == 6 and header[5] not in BUDGET_COLUMNS):
        raise UsageError(f"{path}: expected the columns {', '.join(COLUMNS)} (and budget or group); found "
                         f"{', '.join(header) or 'none'}")
    try:
        values = np.array([[float(v) for v in row[1:]] for row in body], dtype=float).reshape(len(body), -1)
    except ValueError as exc:
        raise UsageError(f"{path} is not a table of fitted points ({exc})") from None
    if values.shape[1] != len(header) - 1:
        raise UsageError(f"{path}: a row does not have the {len(header)} columns of its header")
    budgets = values[:, 4] if len(header) == 6 else None
    data = FitData(values[:, 0], values[:, 1], values[:, 2], source=summary.source or str(path),
                   ids=tuple(row[0] for row in body), dropped=summary.dropped,
                   param_convention=summary.param_convention, filters=dict(summary.filters), budgets=budgets,
                   flops=flops, spent=values[:, 3], provenance=summary.provenance,
                   budget_measure=None if budgets is None else (flops.measure if header[5] == "budget" else "planned"))
    if data.digest != summary.digest:
        raise UsageError(f"{path} holds other points than those {path.with_name('fit.json')} was fitted to (its "
                         "data.digest differs: a write was cut short, or one file was replaced); rerun `scaling fit`")
    return data
