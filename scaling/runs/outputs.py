"""Writing a command's output as one unit: the old set of files or the new one, never a mix.

    paths = replace_folder(Path("fits/tiny/report"), build, owned=("report.md", "figures"))
    replace_files(Path("fits/tiny"), {"fit.bootstrap.csv": samples, "fit.json": text})
    settle(Path("fits/tiny"))                 # finish a set a killed writer had committed
    remove_leftovers(Path("fits/tiny"))       # what killed runs left: their pid is dead

A report (report.md and its figures), an import (a run store) or a fit with side files is several
files that must agree. `replace_folder` builds the new set in a fresh folder beside the output,
`.<name>.scaling-tmp-<pid>`, that `build` fills (it is a new folder: no link inside it leads
anywhere else, so nothing is written outside the output however the old one was laid out), then
swaps the two folders in one atomic rename (Linux renameat2 RENAME_EXCHANGE; elsewhere two
renames, undone by the next run if a kill falls between them) and deletes the old one. The
entries of the old folder that the command does not own (a user's notes, another format's
report) are carried over as hard links; the ones it owns are replaced as a whole.

A fit's files (fit.json and the side files stamped with its digest) share a folder with whatever
the user keeps there, so `replace_files` swaps them through a journal instead: each new file is
written complete beside its place (store.write_temp), then a journal,
`.<first name>.scaling-journal-<pid>`, names the renames and removals to make, and its own atomic
rename is the commit. A kill before it leaves the old set (and temporaries `remove_leftovers`
deletes); a kill after it leaves the new set decided, and whoever comes next, the next reader of
the fit or its next writer, finishes the journal's renames (`settle`; each is idempotent, so two
finishing one journal at once agree) and deletes it.

Every temporary name carries its writer's pid; `remove_leftovers` deletes those whose process
is gone (a killed report's folder, a killed write's `.fit.json.<pid>.*.scaling-tmp`, a killed
import's `.<store>.importing-<pid>`), and never a live writer's.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TypeVar

from scaling.errors import UsageError
from scaling.reading import parse_json, read_text
from scaling.runs import faults
from scaling.runs.store import TEMP_SUFFIX, sync_dir, write_atomic, write_temp

T = TypeVar("T")
# The leftovers a writer may leave, with its pid: a folder being built, the old folder being
# swapped out, a store being imported, a committed set of files (a journal, finished by `settle`,
# never deleted unfinished), a file being written (store.write_temp:
# .NAME.<pid>.XXXXXXXX.scaling-tmp); and a file written by a scaling from before the pid was in
# the name (.NAME.XXXXXXXX.scaling-tmp), whose writer is long gone.
_WITH_PID = (re.compile(r"^\.(?P<name>.+)\.(?P<kind>scaling-tmp|scaling-old|importing|scaling-journal)-(?P<pid>\d+)$"),
             re.compile(r"^\.(?P<name>.+?)\.(?P<pid>\d+)\.[a-z0-9_]{8}\.scaling-tmp$"))
_WITHOUT_PID = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.scaling-tmp$")
JOURNAL = "scaling-journal"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def temp_name(path: Path, kind: str = "scaling-tmp") -> Path:
    """This process's temporary twin of `path`, beside it: .NAME.scaling-tmp-<pid>."""
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}")


def _leftover(name: str) -> re.Match | None:
    for pattern in (*_WITH_PID, _WITHOUT_PID):
        match = pattern.match(name)
        if match is not None:
            return match
    return None


def remove_leftovers(folder: Path) -> list[Path]:
    """Delete what killed writers left in `folder` (only those whose pid is dead); put back an
    output a kill left swapped out. Return what was removed or restored."""
    done: list[Path] = settle(folder)       # first: a committed journal's temporaries are the new set
    try:
        entries = list(Path(folder).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return done
    for entry in entries:
        match = _leftover(entry.name)
        if match is None or ("pid" in match.groupdict() and pid_alive(int(match["pid"]))) \
                or match.groupdict().get("kind") == JOURNAL:
            continue
        original = entry.with_name(match["name"])
        if match.groupdict().get("kind") == "scaling-old" and not original.exists() and not original.is_symlink():
            entry.rename(original)          # killed between its two renames: the old output back
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        done.append(entry)
    return done


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic rename; False where the system cannot (then nothing moved)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _carry_over(old: Path, new: Path, owned: Collection[str]) -> None:
    """Entries of the old folder the command does not own, into the new one (hard links)."""
    for entry in old.iterdir():
        if entry.name in owned or (new / entry.name).exists() or _leftover(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True, copy_function=_link_or_copy)
        elif entry.is_symlink():
            os.symlink(os.readlink(entry), new / entry.name)
        else:
            _link_or_copy(str(entry), str(new / entry.name))


def _swap_in(building: Path, out: Path) -> None:
    """`building` becomes `out`; the old `out` is deleted."""
    faults.point(f"swap:{out.name}", out)
    if not out.exists():
        building.rename(out)
    elif _exchange(building, out):
        shutil.rmtree(building)
    else:
        old = temp_name(out, "scaling-old")
        out.rename(old)
        building.rename(out)
        shutil.rmtree(old)


def make_folder(folder: Path) -> None:
    """`folder` and those above it, made where missing; UsageError naming it where one cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {folder}: {exc}") from None


def replace_folder(out: Path, build: Callable[[Path], T], owned: Collection[str] = ()) -> T:
    """Build the folder `out` anew with `build(folder)` (a fresh, empty folder to fill) and put it
    in `out`'s place as one unit; `owned`: the names in `out` the new set replaces (or removes).
    UsageError for a file where the folder belongs; OSError (naming `out`) for a failed write."""
    out = Path(out)
    if out.is_symlink() and out.is_dir():
        out = out.resolve()                 # the user's link to their folder stays; its target is replaced
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file; a folder is needed there")
    make_folder(out.parent)
    remove_leftovers(out.parent)
    building = temp_name(out)
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir()
    try:
        result = build(building)
        if out.is_dir():
            _carry_over(out, building, set(owned))
        _swap_in(building, out)
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return result


# --------------------------------------------------------------------------------------------
# Files replaced as a set, through a journal


def replace_files(folder: Path, files: dict[str, str | bytes], remove: Collection[str] = ()) -> None:
    """Write `files` (name -> content) into `folder` and delete the files `remove`, as one unit:
    after a kill at any point, the folder holds the old set, or the new one once `settle` has run
    (every reader of the set calls it). The folder is made where missing, and what killed writers
    left in it finished or removed first (`remove_leftovers`). OSError naming the file for a failed
    write."""
    folder = Path(folder)
    make_folder(folder)
    remove_leftovers(folder)
    temps: dict[str, str] = {}
    journal = temp_name(folder / next(iter(files)), JOURNAL)
    try:
        for name, data in files.items():
            temps[name] = write_temp(folder / name, data).name
        plan = {"replace": temps, "remove": sorted(set(remove) - set(files))}
        write_atomic(journal, json.dumps(plan) + "\n")      # the commit: from here on, the new set
    except BaseException:
        if not journal.exists():                # not committed: the old set stays, whole
            for tmp in temps.values():
                (folder / tmp).unlink(missing_ok=True)
        raise
    _roll_forward(journal, plan)


def _plain_name(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name


def _temp_of(name: str, tmp: object) -> bool:
    """Whether `tmp` is a temporary write_temp made for `name` (never another file of the folder)."""
    return (_plain_name(name) and _plain_name(tmp) and str(tmp).startswith(f".{name}.")
            and str(tmp).endswith(TEMP_SUFFIX))


def _read_journal(journal: Path) -> dict:
    """A journal's plan; UsageError for one that is not a journal of this package (edited)."""
    plan = parse_json(read_text(journal, "journal"), str(journal))
    replaced = plan.get("replace") if isinstance(plan, dict) else None
    removed = plan.get("remove") if isinstance(plan, dict) else None
    if not (isinstance(replaced, dict) and isinstance(removed, list)
            and all(_temp_of(name, tmp) for name, tmp in replaced.items()) and all(map(_plain_name, removed))):
        raise UsageError(f"{journal} is not a journal of scaling's writes (edited?); delete it and rerun the command "
                         "that writes this folder")
    return plan


def _roll_forward(journal: Path, plan: dict) -> None:
    """Make the journal's renames and removals, then delete it. Each step is idempotent: a
    temporary already renamed is gone, so a second pass (a reader after a kill, or two at once)
    ends where the first would have."""
    folder = journal.parent
    for name, tmp in plan["replace"].items():
        faults.point(f"rename:{name}", folder / name)
        try:
            os.replace(folder / tmp, folder / name)
        except FileNotFoundError:
            pass                                # renamed already, by a pass before this one
        faults.point(f"renamed:{name}", folder / name)
    for name in plan["remove"]:
        (folder / name).unlink(missing_ok=True)
    sync_dir(folder)
    journal.unlink(missing_ok=True)


def settle(folder: Path) -> list[Path]:
    """Finish every set of files committed in `folder` and not yet renamed into place (its writer
    was killed, or is finishing it now: both passes agree); return the journals finished.
    UsageError where the folder cannot be written to finish one."""
    done = []
    for journal in sorted(Path(folder).glob(f".*.{JOURNAL}-*")):
        match = _leftover(journal.name)
        if match is None or match.groupdict().get("kind") != JOURNAL:
            continue                            # the journal's own temporary, say
        try:
            _roll_forward(journal, _read_journal(journal))
        except FileNotFoundError:
            continue                            # finished meanwhile by another pass
        except OSError as exc:
            raise UsageError(f"cannot finish the files {journal} lists (a killed write left it): "
                             f"{exc.strerror}; rerun the command that writes {folder}") from None
        done.append(journal)
    return done
