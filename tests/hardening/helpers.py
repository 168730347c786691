"""Helpers of the hardening tests (issue 43): each runs the real command on real files, hostile ones."""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from scaling.cli import main

ROOT = Path(__file__).resolve().parents[2]


def refused(argv, capsys, expected: str) -> str:
    """Run `argv` in-process: exit 2, one line on stderr containing `expected`, no traceback."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def run_cli(argv, *, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m scaling ARGV` in a child process, killed after `timeout` s (a read that hangs
    fails the test instead of the suite)."""
    return subprocess.run([sys.executable, "-m", "scaling", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


@contextmanager
def deadline(seconds: int, extra_bytes: int = 2 * 2**30):
    """Fail (rather than hang the suite, or fill the machine's memory reading /dev/zero) when the
    body runs longer than `seconds` or maps more than `extra_bytes` more address space."""
    def stop(*_):
        raise TimeoutError(f"still running after {seconds} s: a read that never returns")
    old = signal.signal(signal.SIGALRM, stop)
    limits = resource.getrlimit(resource.RLIMIT_AS)
    mapped = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + extra_bytes, limits[1]))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_AS, limits)
        signal.signal(signal.SIGALRM, old)


def contents(folder: Path) -> dict:
    """{relative path: sha256} of every file under `folder` (links as their target text)."""
    return {str(p.relative_to(folder)): hashlib.sha256(os.readlink(p).encode() if p.is_symlink()
                                                       else p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() or p.is_symlink()}


def dead_pid() -> int:
    """The id of a process that has ended (a killed writer's, as its leftovers carry)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def fifo(path: Path) -> Path:
    """A FIFO with no writer at `path`: opened for reading without O_NONBLOCK, it blocks forever."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


# A table whose loss does not fall with N or D (3.0 with 0.2% scatter): its fit ends at alpha and
# beta near 0 (a form's optimum overflowed a float: a traceback), its optimum at N = 5e183 on D = 4e-164.
FLAT_POINTS = "N,D,loss\n" + "".join(
    f"{n},{d},{loss}\n" for n, d, loss in zip(np.repeat([1e6, 3e6, 1e7, 3e7, 1e8], 4), np.tile([1e8, 3e8, 1e9, 3e9], 5),
                                             3.0 * np.exp(np.random.default_rng(0).normal(0, 0.002, (3, 20))[2])))
POINTS = "N,D,loss\n" + "".join(f"{n},{d},{2 + 1e3 / n ** 0.3 + 1e3 / d ** 0.3}\n"
                                for n in (1e6, 1e7, 1e8) for d in (1e8, 1e9))


def fit_table(tmp: Path, name: str = "fit", bootstrap: int = 0, forms: bool = False) -> Path:
    """`scaling fit` of a small cross grid of points (a table), into tmp/name; the fit.json path.
    `forms`: with the other law forms fitted beside it (--forms; fit.json's "forms" section)."""
    table = tmp / f"{name}.csv"
    table.write_text(POINTS)
    assert main(["fit", "--csv", str(table), "--n-col", "N", "--d-col", "D", "--loss-col", "loss",
                 "--bootstrap", str(bootstrap), *(["--forms"] if forms else []), "--out", str(tmp / name)]) == 0
    return tmp / name / "fit.json"
