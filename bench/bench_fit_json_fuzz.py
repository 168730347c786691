"""Fuzz fit.json with its side files re-stamped: a hand edit that keeps the set consistent.

    python bench/bench_fit_json_fuzz.py                  # 5,000 mutations of a fresh fit; held / failed
    python bench/bench_fit_json_fuzz.py --count 300 --seed 1 --reports 3

A fit of a small table (with bootstrap, backtest cuts, every form, the median, the hold-out and the
data-constrained law) is written once; each mutation replaces one to three entries of one section
of its fit.json (chosen evenly among the sections, so the newer ones, `backtest` and `forms`, get
their share) with a hostile value or deletes one, and re-stamps fit.bootstrap.csv and
fit.repeated.csv with the edited text's digest (`fit_file.fit_digest`), as a careful hand edit
would: the digest check passes and the edit reaches the schema. The edited fit then goes through
`scaling.load`, `summary`, `predict`, `plan` and `plot` (and `scaling report` for the first few the
loader accepts). A mutation holds when each of them either works or raises the package's
UsageError in one line; anything else (TypeError, ZeroDivisionError, ...) is a failure, printed
with its section and traceback's last line. tests/hardening/test_fit_json_sections.py runs a few
hundred of the same mutations.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import random
import sys
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# Values a hand edit (or a corrupted file) may leave anywhere: wrong types, zero, signs, numbers at
# and past a float's range, denormals, empty and nested containers.
HOSTILE = [None, "x", "", -1, 0, 1, 0.5, -0.5, 7.0, 1e308, -1e308, 1e-320, 1e-300, True, [], {}, [1], [None, None],
           ["a", "b"], [1.0, 2.0, 3.0], {"x": 1}, 10**400, [[1]], {"a": {"b": [1]}}, 1e30, -0.0,
           # and the names a form goes by, so that "form" (what predicts) moves to each of them
           "kaplan", "tied", "farseer", "fixed-E", "chinchilla", "median"]


def small_table() -> str:
    """20 runs, 5 sizes by 4 token counts of a known law with 0.3% scatter: enough for backtest cuts
    at 2x-10x and every form but the 30x cut, fitted in seconds."""
    rng = np.random.default_rng(0)
    rows = [f"{n},{d},{(2 + 400 / n ** 0.34 + 600 / d ** 0.28) * np.exp(rng.normal(0, 0.003))}"
            for n in (1e6, 3e6, 1e7, 3e7, 1e8) for d in (2e7, 1e8, 5e8, 2.5e9)]
    return "N,D,loss\n" + "\n".join(rows) + "\n"


def fit_small_table(folder: Path, bootstrap: int = 10) -> Path:
    """`scaling fit` of `small_table` (one corpus of 1e9 unique tokens, so the runs past it repeat
    data: the data-constrained section and fit.repeated.csv too) into folder/fit; its fit.json."""
    from scaling.cli import main
    table = folder / "table.csv"
    table.write_text(small_table())
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["fit", "--csv", str(table), "--bootstrap", str(bootstrap), "--unique-tokens", "1e9",
                     "--forms", "--out", str(folder / "fit")])
    assert code == 0
    return folder / "fit" / "fit.json"


def _paths(obj: object, path: tuple = ()) -> Iterator[tuple]:
    yield path
    children = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in children:
        yield from _paths(value, (*path, key))


def mutate(obj: dict, rng: random.Random) -> tuple[str, dict]:
    """(the section, a copy of `obj` with one to three entries of that section replaced or deleted)."""
    obj = copy.deepcopy(obj)
    section = rng.choice(sorted(obj))
    for _ in range(rng.randint(1, 3)):
        if section not in obj:      # the section itself deleted
            break
        *where, last = rng.choice(list(_paths(obj[section], (section,))))
        node: object = obj
        for key in where:
            node = node[key]        # type: ignore[index]
        if isinstance(node, dict) and rng.random() < 0.15:
            del node[last]
        else:
            node[last] = copy.deepcopy(rng.choice(HOSTILE))   # type: ignore[index]
    return section, obj


def restamp(path: Path, text: str) -> None:
    """Write fit.json's `text` and stamp its side CSVs with its digest, as `write_fit` does."""
    from scaling.laws.results.fit_file import DIGEST_LINE, SIDE_KINDS, fit_digest, samples_path
    path.write_text(text)
    for kind in SIDE_KINDS:
        side = samples_path(path, kind)
        if side.exists():
            rest = side.read_text().partition("\n")[2]
            side.write_text(f"{DIGEST_LINE}{fit_digest(text)}\n{rest}")


def exercise(path: Path, *, plot: bool) -> bool:
    """Load the fit at `path` and use it as a notebook would; True where the loader accepted it.
    Anything but a UsageError propagates."""
    import matplotlib.pyplot as plt

    import scaling
    from scaling.errors import UsageError
    try:
        fit = scaling.load(path)
    except UsageError as exc:
        assert "\n" not in str(exc), str(exc)
        return False
    def draw() -> None:
        plt.close(scaling.fit_figure(fit))

    for use in (fit.summary, lambda: fit.summary(verbose=True), lambda: fit.predict(1e9, 2e10),
                lambda: fit.predict([1e8, 1e10], [1e9, 1e11]), lambda: fit.plan(1e21), lambda: fit.plan([1e19, 1e23]),
                *([draw] if plot else [])):
        try:
            use()
        except UsageError as exc:
            assert "\n" not in str(exc), str(exc)
    return True


def report(path: Path, out: Path) -> None:
    """`scaling report` of the fit at `path`: exit 0, or 2 with one line."""
    from scaling.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["report", str(path.parent), "--out", str(out)])
    assert code == 0 or (code == 2 and len(err.getvalue().strip().splitlines()) == 1), (code, err.getvalue())


@dataclass
class Tally:
    held: int = 0
    accepted: int = 0
    failed: list = field(default_factory=list)      # (section, mutation index, the error's last line)

    def line(self) -> str:
        where = Counter(section for section, _, _ in self.failed)
        return (f"{self.held + len(self.failed)} mutations: {self.held} held, {len(self.failed)} failed"
                f" ({self.accepted} loaded and used)" + (f"; failures by section: {dict(where)}" if where else ""))


def fuzz(good: Path, work: Path, count: int, seed: int, reports: int = 0, plot_every: int = 1,
         trace: bool = False) -> Tally:
    """`count` mutations of the fit at `good` (its folder copied into `work`), each through `exercise`
    (plotting every `plot_every`-th accepted one) and the first `reports` accepted through `report`;
    `trace`: keep each failure's last frames, not only its message."""
    import shutil
    folder = work / "fit"
    shutil.copytree(good.parent, folder, dirs_exist_ok=True)
    path, original = folder / "fit.json", json.loads(good.read_text())
    rng, tally = random.Random(seed), Tally()
    for i in range(count):
        section, obj = mutate(original, rng)
        restamp(path, json.dumps(obj).replace("Infinity", "1e999"))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                accepted = exercise(path, plot=tally.accepted % plot_every == 0)
                if accepted and tally.accepted < reports:
                    report(path, work / "report")
        except Exception as exc:     # noqa: BLE001 - anything but the package's error is what this counts
            shown = traceback.format_exception(exc)[-3:] if trace else traceback.format_exception_only(exc)[-1:]
            tally.failed.append((section, i, "".join(shown).strip()[:2000]))
            continue
        tally.held += 1
        tally.accepted += accepted
    return tally


def main(argv: list[str] | None = None) -> int:
    import tempfile
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000, help="mutations (default 5000)")
    parser.add_argument("--seed", type=int, default=53)
    parser.add_argument("--reports", type=int, default=10, help="accepted mutations also reported (default 10)")
    parser.add_argument("--plot-every", type=int, default=1, help="plot every k-th accepted mutation (default 1)")
    parser.add_argument("--trace", action="store_true", help="print each failure's last frames")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        good = fit_small_table(Path(tmp))
        tally = fuzz(good, Path(tmp) / "work", args.count, args.seed, args.reports, args.plot_every, args.trace)
    for section, i, error in tally.failed:
        print(f"{section} #{i}: {error}")
    print(tally.line())
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
