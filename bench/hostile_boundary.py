"""Issue 53's hostile pass, the rest of its categories: hand edits of fit.json (re-stamped, so they
reach the schema), imports with impossible numbers, small flags and the Python API's boundary.
Then bench/hostile_files.py's cases (output folders, journals, side files, read-only sources), so
that one run gives the whole count.

    PYTHONPATH=. .venv/bin/python bench/hostile_boundary.py     # about 3.5 minutes on 2 cores: 1,049 cases

A case holds as in hostile_files.py: no traceback, a refusal in one line with exit 2 (from Python:
the package's UsageError), no protected file changed; a case that must be refused also fails when
it is taken silently. Prints one line a failed case, the count held by category, and the total.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import hostile_files as files
from bench_fit_json_fuzz import HOSTILE, _paths, exercise, fit_small_table, restamp

import scaling
from scaling.errors import UsageError

case, call = files.case, files.call


def python(run: Callable[[], object]) -> Callable[[], tuple[int, str]]:
    """A Python call as a command: 0 when it returns, 2 with the package's error, -1 otherwise."""
    def called() -> tuple[int, str]:
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                run()
        except UsageError as exc:
            return 2, str(exc)
        except Exception:
            return -1, traceback.format_exc()
        return 0, ""
    return called


def fit_json_cases(good: Path, work: Path) -> None:
    """Every entry of a fit.json with forms, cuts and the median, set to a hostile value in turn
    (one in three of the paths, each with the next of HOSTILE), re-stamped, then loaded and used."""
    obj = json.loads(good.read_text())
    paths = [p for p in _paths(obj) if p][::3]
    for i, path in enumerate(paths):
        edited = json.loads(good.read_text())
        *where, last = path
        node = edited
        for key in where:
            node = node[key]
        node[last] = HOSTILE[i % len(HOSTILE)]
        folder = work / f"edit-{i}"
        folder.mkdir()
        for side in good.parent.iterdir():
            (folder / side.name).write_bytes(side.read_bytes())
        restamp(folder / "fit.json", json.dumps(edited))
        case(f"fit.json {'.'.join(map(str, path))} = {HOSTILE[i % len(HOSTILE)]!r:.30}",
             python(lambda f=folder: exercise(f / "fit.json", plot=False)), [good.parent])


def import_cases(work: Path) -> None:
    """`scaling import csv` of runs with impossible numbers: refused naming the value, nothing written."""
    good = {"run": "r1", "N": 1e8, "D": 1e9, "loss": 3.0}
    bad = {"loss": ["inf", "-1", "nan", "0", "1e300", "x"], "N": ["1e40", "-5", "0", "inf", "1e-300"],
           "D": ["1e40", "-1", "0", "nan", "1e400"]}
    for column, values in bad.items():
        for value in values:
            folder = work / f"import-{column}-{value}"
            folder.mkdir()
            source = folder / "runs.csv"
            row = {**good, column: value}
            source.write_text("run,N,D,loss\n" + ",".join(map(str, row.values())) + "\n")
            case(f"import csv with {column} = {value}",
                 lambda s=source, f=folder: call(["import", "csv", s, "--runs-dir", f / "store", "--run", "run"]),
                 [folder], codes=(2,))


def flag_cases(table: Path, work: Path) -> None:
    """`scaling fit` (and design) flags that must be refused in one line before any fitting."""
    fit = ["fit", "--csv", table, "--n-col", "N", "--d-col", "D", "--loss-col", "loss"]
    flags = [*(["--bootstrap", str(k)] for k in (1, 2, 3, 5, 9, -1, 100_001)),
             ["--seed=-1"], ["--seed", "x"], ["--seed", "1.5"],
             ["--budget", "loss"], ["--budget", "N"], ["--budget", "D"], ["--unique", "N"], ["--unique", "loss"],
             *(["--E-prior", v] for v in ("1.5,1e-300", "1.5,0", "1.5,-1", "-1,0.1", "nan,1", "1.5", "a,b",
                                          "100,0.1", "1.5,1e300", "1.5,1e-7", "1,2,3")),
             *(["--reference-compute", v] for v in ("1e300", "0", "-1", "nan", "inf", "x")),
             *(["--delta", v] for v in ("0", "-1", "inf", "nan")),
             *(["--fixed-e", v] for v in ("0", "1e9", "nan", "-1")),
             ["--drop-highest-loss=-1"], ["--drop-highest-loss", "100"], ["--min-tokens=-1"],
             ["--form", "chinchila"], ["--form", "chinchilla", "--fixed-e", "1"],
             ["--E-prior", "1,0.1", "--fixed-e", "1"],
             ["--d-col", "D", "--c-col", "D"]]
    for i, extra in enumerate(flags):
        out = work / f"flags-{i}"
        resamples = [] if "--bootstrap" in extra else ["--bootstrap", "0"]
        case(f"fit {' '.join(extra)}", lambda e=extra, r=resamples, o=out: call([*fit, *e, *r, "--out", o]),
             [table.parent / "protected"], codes=(2,),
             expect=lambda o=out: "wrote a fit" if (o / "fit.json").exists() else None)
    for value in ("1", "9", "0", "-1", "x"):
        case(f"design --bootstrap {value}", lambda v=value: call(["design", files.ROOT / "configs" / "tiny.yaml",
                                                                  "--bootstrap", v]), [], codes=(2,))


def api_cases(fit: scaling.LawFit, frame, work: Path) -> None:
    """The public functions with misused arguments: the package's error naming the argument."""
    counts = [True, "x", None, -1, 0, math.nan, math.inf, 1e-300, 10**400, 1j, [1e9, [2e9]], {}, "1e9", [True]]
    for value in counts:
        case(f"predict N = {value!r:.20}", python(lambda v=value: fit.predict(v, 1e10)), [], codes=(2,))
        case(f"predict D = {value!r:.20}", python(lambda v=value: fit.predict(1e9, v)), [], codes=(2,))
        case(f"plan C = {value!r:.20}", python(lambda v=value: fit.plan(v)), [], codes=(2,))
        case(f"scaling.plan C = {value!r:.20}", python(lambda v=value: scaling.plan(v)), [], codes=(2,))
    calls = {"predict": lambda s: fit.predict(1e9, 1e10, seed=s), "plan": lambda s: fit.plan(1e20, seed=s),
             "loss_interval": lambda s: fit.loss_interval(1e9, 1e10, seed=s),
             "scaling.plan": lambda s: scaling.plan(1e20, law=fit, seed=s),
             "fit": lambda s: scaling.fit(frame, bootstrap=0, seed=s)}
    for name, run in calls.items():
        for seed in ("x", -1, 1.5, True, None, [1], "0"):
            case(f"{name} seed = {seed!r}", python(lambda r=run, s=seed: r(s)), [], codes=(2,))
    misuse = {"bootstrap": (1, 9, -1, True, 1.5, "20", None, 10**6), "delta": ("x", -1, 0, math.nan, [1]),
              "fixed_E": ([1, 2], "x", -1, math.inf, 1e9), "form": (3, "chinchila", ["kaplan"], ""),
              "reference_compute": ("1e20", -1, 1e300, math.nan, True),
              "E_prior": (("1", "2"), (1.5, 1e-300), (1.5, 0), (1.5,), 1.5, (-1, 0.1), (1.5, 0.1, 3, 4))}
    for keyword, values in misuse.items():
        for value in values:
            case(f"fit {keyword} = {value!r:.30}", python(lambda k=keyword, v=value: scaling.fit(frame, **{k: v})),
                 [], codes=(2,))
    junk = work / "junk.json"
    junk.write_text("{")
    for path in (None, 3, "", "/nonexistent/fit", "/dev/zero", junk, work, [work]):
        case(f"load {path!r:.30}", python(lambda p=path: scaling.load(p)), [], codes=(2,))
        case(f"compare {path!r:.30}", python(lambda p=path: scaling.compare(p)), [], codes=(2,))


def category(name: str) -> str:
    """The category a case's name puts it in (hostile_files.py's by their first words)."""
    prefixes = {"fit.json ": "fit.json edits", "import csv": "imports with impossible numbers",
                "import mlflow": "sources read-only", "fit --": "small flags", "design --": "small flags",
                "journal": "journals", "another set's journal": "journals", "killed at": "journals",
                "fit.points.csv as": "side-file links", "fit.bootstrap.csv as": "side-file links",
                "fit --out": "output folders", "report --out": "output folders"}
    hit = next((label for prefix, label in prefixes.items() if name.startswith(prefix)), None)
    return hit or ("small flags" if name.startswith("fit ") and " = " not in name else "API boundary misuse")


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="hostile-boundary-"))
    (work / "good").mkdir()
    good = fit_small_table(work / "good")
    table = work / "protected" / "points.csv"
    table.parent.mkdir()
    table.write_text(files.POINTS)
    import pandas as pd
    frame = pd.read_csv(table)
    fit_json_cases(good, work)
    import_cases(work)
    flag_cases(table, work)
    api_cases(scaling.fit(frame, bootstrap=10), frame, work)
    files.main_()
    tally: dict[str, list[int]] = {}
    for name, why in files.results:
        counts = tally.setdefault(category(name), [0, 0])
        counts[0] += why is None
        counts[1] += 1
    for label, (held, total) in sorted(tally.items()):
        print(f"  {label}: {held} of {total} held")
    held = sum(why is None for _, why in files.results)
    print(f"all: {held} of {len(files.results)} cases held; files in {work}")
    return 0 if held == len(files.results) else 1


if __name__ == "__main__":
    sys.exit(main())
