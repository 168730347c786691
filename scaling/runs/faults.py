"""Fault injection for the crash-safety tests (tests/sweep/test_faults.py), driven by $SCALING_FAULT.

    SCALING_FAULT="kill_at=SITE:N"                  SIGKILL this process the Nth time it reaches SITE
    SCALING_FAULT="kill_at=SITE:N,signal=SIGTERM"   send itself that signal instead (a graceful stop)
    SCALING_FAULT="oserror_at=SITE:N,errno=ENOSPC"  raise that OSError there (a full disk)
    SCALING_FAULT="stall_at=SITE:N,seconds=60"      pause there that long, then go on (a hung disk or device)
    SCALING_FAULT="nan_at=RUN_ID:STEP"              that run's train loss reads NaN from STEP on

Sites, counted over the whole process: `step` (after each optimizer step), `write:FILE` (half of
FILE's new content is in its temporary file), `rename:FILE` (the temporary file is complete and
synced, not yet renamed), `renamed:FILE` (renamed, directory not yet synced), `append:FILE` (half
of a line is appended) and `rename:tokens` (a token cache is complete, not yet renamed into
place). FILE is a base name: checkpoint.pt, summary.json, runs.csv, config.yaml, metrics.jsonl.
Unset, every hook costs one environment lookup.
"""

from __future__ import annotations

import errno
import math
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import IO, AnyStr

ENV = "SCALING_FAULT"
_parsed: tuple[str, dict] = ("", {})
_seen: Counter = Counter()


def _spec() -> dict:
    global _parsed
    text = os.environ.get(ENV, "")
    if text != _parsed[0]:  # a new fault starts its counts afresh
        _parsed = (text, dict(item.split("=", 1) for item in text.split(",") if item))
        _seen.clear()
    return _parsed[1]


def _target(spec: dict) -> tuple[str, int] | None:
    where = spec.get("kill_at") or spec.get("oserror_at") or spec.get("stall_at")
    if not where:
        return None
    site, count = where.rsplit(":", 1)
    return site, int(count)


def _hit(site: str) -> bool:
    """Count a pass through `site`; True on the pass the fault names."""
    target = _target(_spec())
    if target is None or target[0] != site:
        return False
    _seen[site] += 1
    return _seen[site] == target[1]


def _fire(path: str | Path | None = None) -> None:
    spec = _spec()
    if "stall_at" in spec:
        time.sleep(float(spec.get("seconds", 60)))
        return
    if "oserror_at" in spec:
        code = getattr(errno, spec.get("errno", "ENOSPC"))
        raise OSError(code, os.strerror(code), None if path is None else str(path))
    os.kill(os.getpid(), getattr(signal, spec.get("signal", "SIGKILL")))


def point(site: str, path: str | Path | None = None) -> None:
    """The fault, when this pass through `site` is the one it names."""
    if _hit(site):
        _fire(path)


def write(site: str, f: IO[AnyStr], data: AnyStr, path: str | Path | None = None) -> None:
    """f.write(data); at the fault's pass, only half of it, made durable, before the fault fires:
    what a kill or a full disk in the middle of a write leaves behind. A fault the process
    survives (a stall, a signal it handles) is followed by the other half."""
    if _hit(site):
        half = len(data) // 2
        f.write(data[:half])
        f.flush()
        os.fsync(f.fileno())
        _fire(path)
        data = data[half:]
    f.write(data)


def loss(run_id: str, step: int, value: float) -> float:
    """The train loss as logged: NaN from the step that nan_at names, in the run it names."""
    target = _spec().get("nan_at")
    if target:
        run, start = target.rsplit(":", 1)
        if run == run_id and step >= int(start):
            return math.nan
    return value
