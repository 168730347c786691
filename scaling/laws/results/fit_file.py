"""fit.json and its side files on disk: written as one unit, read back through the schema.

    write_fit("fits/mine", fit)                     # fit.json, fit.bootstrap.csv, fit.points.csv, ...
    fit = load_fit("fits/mine/fit.json")            # the same LawFit, less what is held in memory only
    text = dumps_fit(fit)                           # fit.json's text, as written

The `LawFit` itself, pure, is `scaling.laws.results.lawfit`; the checks of the dict read back
`scaling.laws.results.fit_schema`; the format docs/fit-json.md. The same inputs and seed give a
byte-identical file (keys sorted, floats written in full by repr, no timestamps or timings) on the
same machine and library versions. Beside fit.json: the bootstrap's constants (fit.bootstrap.csv,
fit.repeated.csv for the data-constrained law), each stamped with fit.json's sha256 on its first
line, and the fitted points (fit.points.csv, `points_file`, checked against data.digest): plain
files in fit.json's folder, never links. A read renames and deletes nothing: a write a kill cut
short after its commit is read through its journal (`scaling.runs.journal.read_set`), and only
the next `write_fit` finishes it. `check_fit_out` refuses, before the fit, an output it could not write.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.errors import UsageError
from scaling.laws.forms.law import PARAM_NAMES
from scaling.laws.repeated import SAMPLE_NAMES
from scaling.laws.results.lawfit import LawFit
from scaling.laws.results.points_file import format_points, read_points
from scaling.reading import parse_json, read_bounded
from scaling.runs.journal import check_journals, read_set, replace_files
from scaling.runs.outputs import check_not_runs
from scaling.runs.store import check_output

FILENAME = "fit.json"

# The side CSVs' first line: the sha256 of the fit.json text they belong to. A fit's files are
# written as one unit (journal.replace_files: old set or new, whatever a kill interrupts); a side
# file copied in from another fit, or edited, has a digest that is not its fit.json's, and the
# reader refuses it rather than pair one fit's numbers with another's intervals.
DIGEST_LINE = "# fit.json sha256 "
SIDE_KINDS = ("bootstrap", "repeated")
# Every file beside fit.json that a fit writes: the samples and the fitted points (fit.points.csv).
FIT_SIDE_FILES = tuple(f"fit.{kind}.csv" for kind in (*SIDE_KINDS, "points"))


def fit_digest(text: str | bytes) -> str:
    """The sha256 of fit.json's text, as its side files record it."""
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def samples_path(path: Path, kind: str = "bootstrap") -> Path:
    """Where the bootstrap's constants go beside a fit.json: fit.json -> fit.bootstrap.csv (the
    law's), fit.repeated.csv (the data-constrained law's)."""
    return path.with_name(f"{path.stem}.{kind}.csv")


# --------------------------------------------------------------------------------------------
# fit.json and its side files, written and read as one unit


def dumps_fit(fit: LawFit) -> str:
    """fit.json text: sorted keys, 2-space indent, floats in full, a final newline."""
    return json.dumps(fit.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"


def _samples_text(names: Sequence[str], rows: np.ndarray, digest: str) -> str:
    lines = [DIGEST_LINE + digest, ",".join(names)] + [",".join(repr(float(v)) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def fit_paths(path: str | Path) -> list[Path]:
    """The files `write_fit(path, ...)` writes or replaces: fit.json (in `path` where it is a
    folder) first, then its side files."""
    path = Path(path)
    if path.is_dir() or path.suffix != ".json":
        path = path / FILENAME
    return [path, *(samples_path(path, kind) for kind in (*SIDE_KINDS, "points"))]


def check_fit_out(path: str | Path) -> None:
    """Refuse, before the fit's work (minutes to hours), an output `write_fit(path, ...)` could not
    write: a file where its folder goes or a folder where one of its files goes, a run store, or a
    journal of the fit's files that a killed write left and that cannot be finished (not JSON,
    edited: `scaling.runs.journal`), all of which would otherwise fail after the fit."""
    names = [p.name for p in fit_paths(path)]
    folder = fit_paths(path)[0].parent
    check_output(folder, names)
    check_not_runs(folder, "a fit")
    if folder.is_dir():
        check_journals(folder, names)


def write_fit(path: str | Path, fit: LawFit) -> Path:
    """Write fit.json (a folder path gets fit.json inside it) and beside it the bootstrap's
    constants when there are any and the fitted points when the fit holds them (fit.points.csv,
    `points_file`; the bootstrap's stamped with fit.json's digest), as one unit
    (`journal.replace_files`, which first finishes or removes what a killed fit left): a kill or a
    full disk at any point leaves the old fit's files or the new one's. A side file the new fit has
    none of is removed. Return the fit.json path."""
    check_fit_out(path)                    # refused before anything is written (`scaling fit`: before the fit)
    path = fit_paths(path)[0]
    text = dumps_fit(fit)
    digest = fit_digest(text)
    sides = {"bootstrap": None if fit.resampled is None else _samples_text(PARAM_NAMES, fit.resampled, digest),
             "repeated": None if fit.repeated is None or fit.repeated.samples is None
             else _samples_text(SAMPLE_NAMES, fit.repeated.samples, digest),
             "points": None if fit.points is None else format_points(fit.points)}
    files = {samples_path(path, kind).name: side for kind, side in sides.items() if side is not None}
    absent = [samples_path(path, kind).name for kind, side in sides.items() if side is None]
    replace_files(path.parent, {**files, path.name: text}, remove=absent)   # an older fit's: it would never match
    return path


def _fit_json(path: str | Path) -> Path:
    """The fit.json `path` names (a folder, or a path not ending in .json: the one inside it, as
    `fit_paths` names the set; a missing /nonexistent/fit was read as a file named "fit", and the
    set, keyed by fit.json, raised KeyError); a link to one: its target, so that the side files read
    are those in the folder where fit.json lies."""
    path = fit_paths(path)[0]
    return path.resolve() if path.is_symlink() else path


def _read_fit_file(path: Path) -> bytes:
    """A file of the fit's set, a plain file in its folder: a link is refused, since a side file
    linked from another fit (or the same bytes through a link) is not this fit's own file."""
    if path.is_symlink():
        raise UsageError(f"{path} is a link: a fit's files are plain files in its folder (rerun `scaling fit` to "
                         "write them there)")
    try:
        return read_bounded(path, what=f"the fit's file {path.name}")   # never /dev/zero or a FIFO
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _text(data: bytes | None, path: Path) -> str | None:
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text (byte {exc.start}): not a file `scaling fit` wrote") from None


def load_fit(path: str | Path) -> LawFit:
    """The LawFit in a fit.json (or a folder holding one). UsageError for a missing, unreadable or
    invalid file.

    A file written by `scaling fit` has "kind": "scaling.fit" and "version": 1. A hand-written
    file with only {"params": {"E", "A", "B", "alpha", "beta"}} (no "kind") is accepted as a
    law; its other sections are then empty.
    """
    path = _fit_json(path)
    # The fit's files as its last write committed them: a write a kill cut short is read through its
    # journal, never finished here (a read renames and deletes nothing: `scaling.runs.journal`).
    paths = dict(zip(("json", *SIDE_KINDS, "points"), fit_paths(path)))
    data = read_set(path.parent, [p.name for p in paths.values()], _read_fit_file)
    raw = data[path.name]
    if raw is None:
        raise UsageError(f"fit file {path} does not exist (write one with `scaling fit`)")
    texts = {kind: _text(data[p.name], p) for kind, p in paths.items()}
    obj = parse_json(texts["json"] or "", str(path))    # bounded: a deep file is refused, not recursed
    fit = LawFit.from_json(obj, str(path))
    digest = fit_digest(raw)
    if fit.ci is not None:
        fit = replace(fit, resampled=read_samples(texts["bootstrap"], paths["bootstrap"], PARAM_NAMES,
                                                  fit.options.bootstrap, digest))
    if fit.repeated is not None and fit.repeated.ci is not None:
        samples = read_samples(texts["repeated"], paths["repeated"], SAMPLE_NAMES, fit.repeated.ci.get("n_resamples"),
                               digest)
        fit = replace(fit, repeated=replace(fit.repeated, samples=samples))
    return replace(fit, points=read_points(texts["points"], paths["points"], fit.data, fit.law.flops))


# --------------------------------------------------------------------------------------------
# The bootstrap's side files


# Constants no fit can have: a sample is finite or +inf (A or B run off with its exponent), E, A
# and B are >= 0 (E's bound; A and B are exponentials, 0 where one underflowed), and an exponent
# may take any sign in a resample. NaN, -inf or a negative E, A or B is a corrupted file.
def _check_samples(values: np.ndarray, names: Sequence[str], path: Path) -> None:
    least = np.array([0.0 if n in ("E", "A", "B") else -np.inf for n in names])
    bad = np.isnan(values) | np.isneginf(values) | (values < least)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise UsageError(f"{path}: row {row + 1} holds {names[col]} = {float(values[row, col])!r}; bootstrap "
                         "constants are numbers, E, A and B not negative (rerun `scaling fit`)")


def read_samples(text: str | None, path: Path, names: Sequence[str], count: int | None,
                 digest: str) -> np.ndarray | None:
    """Bootstrap constants from `text`, the file `path` (None: there is no such file), with these
    columns, `count` rows and fit.json's `digest`; UsageError for a file that is not theirs."""
    if text is None:
        return None
    first, _, rest = text.partition("\n")
    if not first.startswith(DIGEST_LINE):
        raise UsageError(f"{path} does not name the fit.json it belongs to (written by an older scaling, or "
                         "edited); rerun `scaling fit` to write the fit's files together")
    if first[len(DIGEST_LINE):].strip() != digest:
        raise UsageError(f"{path} belongs to another fit than {path.with_name(FILENAME)} (its fit.json digest "
                         "differs: one file was replaced or edited); rerun `scaling fit`")
    try:
        table = pd.read_csv(io.StringIO(rest))
        values = table.to_numpy(dtype=float)            # text where a number should be: ValueError
    except (ValueError, pd.errors.ParserError) as exc:
        raise UsageError(f"{path} is not a table of bootstrap constants ({exc})") from None
    if list(table.columns) != list(names) or len(table) != count:
        raise UsageError(f"{path}: expected {count} rows of {', '.join(names)}; found {len(table)} rows of "
                         f"{', '.join(map(str, table.columns))}")
    _check_samples(values, names, path)
    return values
