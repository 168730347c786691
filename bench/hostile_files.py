"""Issue 53's hostile pass over what the tool may delete, replace or change (items 0, 1, 2, 5, 7).

    PYTHONPATH=. .venv/bin/python bench/hostile_files.py          # about 3 minutes on 2 cores

Each case runs the real command in this process (`scaling.cli.main`, or `scaling.load`) on files
built to mislead it: journals a fit folder received from someone may hold, side files that are
links, FIFOs or folders, `report --out` and `fit --out` into folders that are not theirs (another
fit's, a run store, one with a mount inside: as root only), MLflow sqlite files that are empty,
cut, corrupted or another program's. A case holds when there is no traceback, a refusal is one
line with exit 2, and no file it protects changed (sha256 of every file before and after), plus
what the case itself expects (a read through a committed journal gives the new fit). Prints one
line a failed case and the count held.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import scaling
from scaling.cli import main

ROOT = Path(__file__).resolve().parents[1]
POINTS = "N,D,loss\n" + "".join(f"{n},{d},{2 + 1e3 / n ** 0.3 + 1e3 / d ** 0.3}\n"
                                for n in (1e6, 1e7, 1e8) for d in (1e8, 1e9))
results: list[tuple[str, str | None]] = []


def contents(folder: Path) -> dict:
    """{relative path: sha256} of every entry under `folder` (links as their target's name)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(folder))] = "-> " + os.readlink(path)
        elif path.is_file():
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif not path.is_dir():
            out[str(path.relative_to(folder))] = "special"
    return out


def _too_long(*_) -> None:
    raise TimeoutError("still running after 120 s (a hang, or the work done before a refusal)")


def call(argv: list) -> tuple[int, str]:
    """`scaling ARGV` in this process: its exit code and stderr (a traceback or a run past 120 s
    as code -1)."""
    err = io.StringIO()
    signal.signal(signal.SIGALRM, _too_long)
    signal.alarm(120)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main([str(a) for a in argv])
    except SystemExit as exc:           # argparse's refusal of a malformed command line (exit 2, one line)
        return int(exc.code or 0), err.getvalue()
    except Exception:
        return -1, traceback.format_exc()
    finally:
        signal.alarm(0)
    return code, err.getvalue()


def load(path: Path) -> tuple[int, str]:
    """`scaling.load` as a command: 0, or 2 with the package's error, or -1 with a traceback."""
    try:
        scaling.load(path)
    except scaling.UsageError as exc:
        return 2, str(exc)
    except Exception:
        return -1, traceback.format_exc()
    return 0, ""


def case(name: str, run: Callable[[], tuple[int, str]], protect: list[Path], codes=(0, 2),
         expect: Callable[[], str | None] = lambda: None) -> None:
    """Run one case; record why it failed (None: held)."""
    before = {str(p): contents(p) for p in protect}
    code, err = run()
    why = None
    if code == -1 or "Traceback" in err:
        why = "traceback: " + err.strip().splitlines()[-1]
    elif code not in codes:
        why = f"exit {code}: {err.strip()[:200]}"
    elif code == 2 and len(err.strip().splitlines()) > 1:
        why = f"refusal of {len(err.strip().splitlines())} lines: {err.strip()[:200]}"
    elif any(contents(p) != before[str(p)] for p in protect):
        changed = next(p for p in protect if contents(p) != before[str(p)])
        why = f"changed files in {changed}"
    else:
        why = expect()
    results.append((name, why))
    if why:
        print(f"FAILED {name}: {why}")


def fit(table: Path, out: Path, bootstrap: int, env: dict | None = None) -> int:
    argv = ["fit", "--csv", table, "--bootstrap", str(bootstrap), "--out", out]
    if env is None:
        return call(argv)[0]
    return subprocess.run([sys.executable, "-m", "scaling", *map(str, argv)], cwd=ROOT, capture_output=True,
                          env={**os.environ, **env, "PYTHONPATH": str(ROOT)}).returncode


def fresh(base: Path, tmp: Path, name: str) -> Path:
    folder = tmp / name
    shutil.copytree(base, folder, symlinks=True)
    (folder / "notes.txt").write_text("mine")
    return folder


# --------------------------------------------------------------------------------------------
# Item 1: journals


def journals(dead: int) -> dict[str, tuple[str, dict[str, str | bytes]]]:
    """{case: (journal text, {extra file: content})}; the journal is named after fit.bootstrap.csv."""
    def v2(replace: dict, remove: list, **extra) -> str:
        return json.dumps({"version": 2, "replace": replace, "remove": remove, **extra})

    def entry(temp: str, data: bytes) -> dict:
        return {"temp": temp, "sha256": hashlib.sha256(data).hexdigest()}

    mine = f".fit.json.{dead}.abcdefgh.scaling-tmp"
    return {
        "remove notes.txt": ('{"replace": {}, "remove": ["notes.txt"]}', {}),
        "remove fit.json": ('{"replace": {}, "remove": ["fit.json"]}', {}),
        "remove ../outside": ('{"replace": {}, "remove": ["../outside.txt"]}', {}),
        "replace fit.json by notes.txt": ('{"replace": {"fit.json": "notes.txt"}, "remove": []}', {}),
        "foreign temp of pid 1": ('{"replace": {"fit.json": ".fit.json.1.abcdefgh.scaling-tmp"}, "remove": []}',
                                  {".fit.json.1.abcdefgh.scaling-tmp": "{}"}),
        "v2 remove notes.txt": (v2({}, ["notes.txt"]), {}),
        "v2 remove fit.json only": (v2({}, ["fit.json"]), {}),
        "v2 foreign pid": (v2({"fit.json": entry(".fit.json.1.abcdefgh.scaling-tmp", b"{}")}, []),
                           {".fit.json.1.abcdefgh.scaling-tmp": "{}"}),
        "v2 wrong sha256": (v2({"fit.json": entry(".fit.json.999999.abcdefgh.scaling-tmp", b"x")}, []),
                            {".fit.json.999999.abcdefgh.scaling-tmp": "{}"}),
        "v2 temp is a link to notes": (v2({"fit.json": entry(".fit.json.999999.abcdefgh.scaling-tmp", b"mine")}, []),
                                       {".fit.json.999999.abcdefgh.scaling-tmp": Path("notes.txt")}),
        "v2 names notes.txt": (v2({"notes.txt": entry(".notes.txt.999999.abcdefgh.scaling-tmp", b"x")}, []),
                               {".notes.txt.999999.abcdefgh.scaling-tmp": "x"}),
        "v2 temp ../": (v2({"fit.json": entry("../x.scaling-tmp", b"x")}, []), {}),
        "v2 extra key": (v2({"fit.json": entry(".fit.json.999999.abcdefgh.scaling-tmp", b"{}")}, [], run="rm"),
                         {".fit.json.999999.abcdefgh.scaling-tmp": "{}"}),
        "v2 version 3": (json.dumps({"version": 3, "replace": {}, "remove": []}), {}),
        "not JSON": ("{half", {}),
        "empty": ("", {}),
        "a list": ("[1, 2]", {}),
        "deep JSON": ("[" * 100000 + "]" * 100000, {}),
        "binary": (b"\xff\xfe\x00garbage", {}),
        "dead writer's own temp, other pid in journal name": (v2({"fit.json": entry(mine, b"{}")}, []), {mine: "{}"}),
    }


def place(folder: Path, text: str | bytes, extra: dict, journal: str = ".fit.bootstrap.csv.scaling-journal-999999"):
    for name, data in extra.items():
        if isinstance(data, Path):
            (folder / name).symlink_to(data)
        else:
            (folder / name).write_text(data) if isinstance(data, str) else (folder / name).write_bytes(data)
    path = folder / journal
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)


def readers(folder: Path, tmp: Path) -> dict[str, Callable[[], tuple[int, str]]]:
    return {"plan": lambda: call(["plan", "--fit", folder, "--compute", "1e18"]),
            "compare": lambda: call(["compare", folder]),
            "load": lambda: load(folder),
            "report": lambda: call(["report", folder, "--out", tmp / f"report-{folder.name}"])}


def journal_cases(base: Path, table: Path, tmp: Path) -> None:
    (tmp / "outside.txt").write_text("outside")
    for i, (name, (text, extra)) in enumerate(journals(os.getpid() + 10**6).items()):
        for command in ("plan", "compare", "load", "report"):
            folder = fresh(base, tmp, f"j{i}-{command}")
            place(folder, text, extra)
            case(f"journal {name!r}: {command}", readers(folder, tmp)[command], [folder, tmp / "outside.txt"] if
                 command != "report" else [folder])
        folder = fresh(base, tmp, f"j{i}-fit")
        place(folder, text, extra)
        case(f"journal {name!r}: fit --out",
             lambda f=folder: call(["fit", "--csv", table, "--bootstrap", "0", "--out", f]), [folder], codes=(2,))
    for kind in ("a FIFO", "a folder", "a link to /dev/zero"):
        folder = fresh(base, tmp, f"jk-{kind[2:6]}")
        journal = folder / ".fit.json.scaling-journal-999999"
        {"a FIFO": os.mkfifo, "a folder": Path.mkdir,
         "a link to /dev/zero": lambda p: p.symlink_to("/dev/zero")}[kind](journal)
        for command, run in readers(folder, tmp).items():
            if command != "report":
                case(f"journal as {kind}: {command}", run, [folder], codes=(2,))
    folder = fresh(base, tmp, "j-other-set")         # another set's journal: left alone, the fit reads
    place(folder, '{"replace": {}, "remove": ["fit.json"]}', {}, ".notes.txt.scaling-journal-999999")
    for command, run in readers(folder, tmp).items():
        case(f"another set's journal: {command}", run, [folder], codes=(0,))


def committed_cases(base: Path, table: Path, tmp: Path) -> None:
    """A fit killed after its journal's commit: readers read the new set and rename nothing."""
    for site in ("rename:fit.bootstrap.csv", "renamed:fit.bootstrap.csv", "renamed:fit.points.csv"):
        folder = fresh(base, tmp, f"killed-{site.replace(':', '-')}")
        assert fit(table, folder, 11, env={"SCALING_FAULT": f"kill_at={site}:1"}) == -9
        for command, run in readers(folder, tmp).items():
            case(f"killed at {site}: {command}", run, [folder], codes=(0,),
                 expect=lambda f=folder: None if scaling.load(f).options.bootstrap == 11 else "not the new set")
        case(f"killed at {site}: the next fit finishes it", lambda f=folder: (fit(table, f, 11), ""), [], codes=(0,),
             expect=lambda f=folder: None if not [p for p in f.iterdir() if p.name.startswith(".")]
             and (f / "notes.txt").read_text() == "mine" else "leftovers")


# --------------------------------------------------------------------------------------------
# Item 5: side files; item 7: found before the fit


def side_cases(base: Path, other: Path, tmp: Path) -> None:
    for side in ("fit.points.csv", "fit.bootstrap.csv"):
        (tmp / f"copy-{side}").write_bytes((base / side).read_bytes())
        kinds = {"a link to the same bytes": lambda p, s=side: p.symlink_to(tmp / f"copy-{s}"),
                 "a link to another fit's": lambda p, s=side: p.symlink_to(other / s),
                 "a link to /dev/zero": lambda p: p.symlink_to("/dev/zero"),
                 "a dangling link": lambda p: p.symlink_to(tmp / "nothing"),
                 "a FIFO": os.mkfifo, "a folder": Path.mkdir}
        for kind, make in kinds.items():
            for command in ("plan", "compare", "load", "report"):
                folder = fresh(base, tmp, f"s-{side[4:8]}-{list(kinds).index(kind)}-{command}")
                (folder / side).unlink()
                make(folder / side)
                case(f"{side} as {kind}: {command}", readers(folder, tmp)[command], [folder], codes=(2,))


def fit_out_cases(table: Path, big: Path, tmp: Path) -> None:
    def made(name: str, build: Callable[[Path], object]) -> Path:
        out = tmp / name
        out.mkdir()
        build(out)
        return out

    def store(out: Path) -> None:
        (out / "run-1").mkdir()
        (out / "run-1" / "config.yaml").write_text("run_id: run-1\n")
        (out / "runs.csv").write_text("run_id\nrun-1\n")

    outs = {"a run store": made("fo-store", store),
            "a folder of stores": made("fo-root", lambda o: (o / "s").mkdir() or store(o / "s")),
            "a folder where fit.json goes": made("fo-json", lambda o: (o / "fit.json").mkdir()),
            "a folder where fit.points.csv goes": made("fo-points", lambda o: (o / "fit.points.csv").mkdir()),
            "a folder where fit.bootstrap.csv goes": made("fo-boot", lambda o: (o / "fit.bootstrap.csv").mkdir()),
            "a journal not JSON": made("fo-journal",
                                       lambda o: (o / ".fit.json.scaling-journal-999999").write_text("{")),
            "a file": made("fo-f", lambda o: (o / "file").write_text("mine")) / "file",
            "below a file": tmp / "fo-f" / "file" / "sub"}
    for name, out in outs.items():
        protect = [out] if out.is_dir() else [tmp / "fo-f"]
        case(f"fit --out {name} (100,000 points: refused before the fit)",
             lambda o=out: call(["fit", "--csv", big, "--bootstrap", "0", "--out", o]), protect, codes=(2,))


# --------------------------------------------------------------------------------------------
# Item 0: report --out


def report_out_cases(base: Path, tmp: Path, mounts: bool) -> None:
    other = fresh(base, tmp, "ro-other")
    (tmp / "ro-link").symlink_to(other)
    for name in ("ro-store", "ro-root/sweep"):
        (tmp / name / "run-1").mkdir(parents=True)
        (tmp / name / "run-1" / "config.yaml").write_text("run_id: run-1\n")
    (tmp / "ro-points").mkdir()
    (tmp / "ro-points" / "fit.points.csv").write_bytes((base / "fit.points.csv").read_bytes())
    (tmp / "ro-jsonlink").mkdir()
    (tmp / "ro-jsonlink" / "fit.json").symlink_to(base / "fit.json")
    refused = {"another fit's folder": other, "a link to it": tmp / "ro-link", "a run store": tmp / "ro-store",
               "a folder of stores": tmp / "ro-root", "a folder with fit.points.csv": tmp / "ro-points",
               "a folder with a link named fit.json": tmp / "ro-jsonlink", "the fit's own folder": base}
    if mounts:
        for name in ("ro-mounted", "ro-inside/data"):
            (tmp / name).mkdir(parents=True)
            subprocess.run(["mount", "-t", "tmpfs", "none", str(tmp / name)], check=True)
            (tmp / name / "precious.txt").write_text("on another filesystem")
        refused.update({"a mount point": tmp / "ro-mounted", "a folder with a mount inside": tmp / "ro-inside"})
    for fmt in ("md", "html"):
        for name, out in refused.items():
            case(f"report --out {name} --format {fmt}", lambda o=out, f=fmt: call(["report", base, "--out", o,
                                                                                 "--format", f]),
                 [out.resolve(), base], codes=(2,))
        out = tmp / f"ro-own-{fmt}"
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        for attempt in ("first", "again"):     # a report's own folder: replaced, the user's notes kept
            case(f"report --out its own folder ({attempt}) --format {fmt}",
                 lambda o=out, f=fmt: call(["report", base, "--out", o, "--format", f]), [base], codes=(0,),
                 expect=lambda o=out: None if (o / "notes.txt").read_text() == "mine" else "notes lost")
    if mounts:
        for name in ("ro-mounted", "ro-inside/data"):
            subprocess.run(["umount", str(tmp / name)], check=True)


# --------------------------------------------------------------------------------------------
# Item 2: MLflow sqlite files


def mlflow_cases(tmp: Path) -> None:
    whole = tmp / "tracking.db"
    with sqlite3.connect(whole) as db:
        for table in ("alembic_version", "experiments", "runs", "metrics", "params"):
            db.execute(f"CREATE TABLE {table} (value)")
        db.executemany("INSERT INTO metrics VALUES (?)", [(f"row {i}" * 5,) for i in range(20000)])
    db.close()
    data = whole.read_bytes()
    sources: dict[str, bytes | Callable[[Path], None]] = {
        "empty": b"", "the header only": data[:16], "the header and zeros": data[:16] + bytes(84),
        **{f"cut at {k}/10": data[:len(data) * k // 10] for k in range(1, 10)},
        **{f"cut at byte {n}": data[:n] for n in (100, 1024, 4095, 4097)},
        **{f"pages {k} overwritten": data[:4096 * k] + b"\xa5" * 4096 + data[4096 * (k + 1):] for k in (0, 1, 2, 5)},
        **{f"random bytes {s}": data[:16] + os.urandom(4096 * 3) for s in range(3)},
        "a foreign database": lambda p: sqlite3.connect(p).execute("CREATE TABLE notes (t)").connection.commit(),
        "MLflow's tables, an unknown version": lambda p: shutil.copy(whole, p) and None,
        "MLflow's tables, a known version": lambda p: (shutil.copy(whole, p), sqlite3.connect(p).execute(
            "INSERT INTO alembic_version VALUES ('1b5f0d9ad7c1')").connection.commit()) and None,
        "a WAL-mode foreign database":
            lambda p: sqlite3.connect(p).execute("PRAGMA journal_mode=WAL").connection.close(),
    }
    for i, (name, source) in enumerate(sources.items()):
        folder = tmp / f"ml-{i}"
        folder.mkdir()
        src = folder / "mlflow.db"
        source(src) if callable(source) else src.write_bytes(source)
        case(f"import mlflow: {name}", lambda s=src, f=folder: call(["import", "mlflow", s, "--runs-dir", f.parent /
                                                                     f"ml-{f.name}-out"]),
             [folder], codes=(2,))


def main_() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hostile-files-"))
    table, big = tmp / "points.csv", tmp / "big.csv"
    table.write_text(POINTS)
    big.write_text("N,D,loss\n" + "".join(f"{1e6 * (1 + i % 300)},{1e8 * (1 + i // 300)},{2 + 1e3 / (1 + i) ** 0.1}\n"
                                          for i in range(100_000)))
    assert fit(table, tmp / "base", 10) == 0 and fit(table, tmp / "other", 12) == 0
    base, other = tmp / "base", tmp / "other"
    mounts = os.geteuid() == 0 and subprocess.run(["mount", "--version"], capture_output=True).returncode == 0
    for cases in (lambda: journal_cases(base, table, tmp), lambda: committed_cases(base, table, tmp),
                  lambda: side_cases(base, other, tmp), lambda: fit_out_cases(table, big, tmp),
                  lambda: report_out_cases(base, tmp, mounts), lambda: mlflow_cases(tmp)):
        cases()
    held = sum(why is None for _, why in results)
    print(f"{held} of {len(results)} cases held ({len(results) - held} failed); files in {tmp}")


if __name__ == "__main__":
    main_()
