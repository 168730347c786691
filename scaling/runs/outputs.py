"""Writing a command's output folder as one unit: the old set of files or the new one, never a mix.

    check_replaceable(Path("fits/tiny/report"), "the report", ("report.md",), ("fit.json",))  # before the work
    paths = replace_folder(Path("fits/tiny/report"), build, owned=("report.md", "figures"))
    remove_leftovers(Path("fits/tiny"), {"fit.json"})   # what killed writers of fit.json left: their pid is dead

A report (report.md and its figures) or an import (a run store) is several files that must agree.
`replace_folder` builds the new set in a fresh folder beside the output,
`.<name>.scaling-tmp-<pid>`, that `build` fills (it is a new folder: no link inside it leads
anywhere else, so nothing is written outside the output however the old one was laid out), then
swaps the two folders in one atomic rename (Linux renameat2 RENAME_EXCHANGE; elsewhere two
renames, undone by the next run if a kill falls between them) and deletes the old one. The
entries of the old folder that the command does not own (a user's notes, another format's
report) are carried over as hard links; the ones it owns are replaced as a whole.

Since the whole folder is swapped, it must be the command's own: `check_replaceable` refuses,
before any work, a folder holding a run store, another command's files (a fit's fit.json, which a
report writes too when it fits: a folder holding no report is not a report's), or a mount point
(the old folder's deletion would empty the mounted filesystem). Files that share a folder with
the user's (a fit's fit.json and side files) are replaced through a journal instead
(`scaling.runs.journal`).

Every temporary name carries its writer's pid; `remove_leftovers` deletes those of dead writers
of the names it is given, and only those (a killed report's folder, a killed write's
`.fit.json.<pid>.*.scaling-tmp`, a killed import's `.<store>.importing-<pid>`): never a live
writer's, never another command's, never a temporary a journal holds as a committed set.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TypeVar

from scaling.errors import UsageError
from scaling.runs import faults
from scaling.runs.store import CONFIG, TABLE

T = TypeVar("T")
# The leftovers a writer may leave, with its pid: a folder being built, the old folder being
# swapped out, a store being imported, a committed set of files (a journal, finished by
# journal.settle, never deleted unfinished), a file being written (store.write_temp:
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


def _owner(match: re.Match) -> str:
    """The file a leftover is a temporary of: a journal's temporary belongs to its set's first file."""
    inner = _WITH_PID[0].match(match["name"])
    return inner["name"] if inner is not None and inner["kind"] == JOURNAL else match["name"]


def journal_pids(folder: Path) -> set[int]:
    """The pids of every journal in `folder`, of whatever set: their temporaries are a committed
    set (or another writer's), never a dead writer's leftovers to delete."""
    try:
        matches = [_WITH_PID[0].match(entry.name) for entry in Path(folder).iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return set()
    return {int(m["pid"]) for m in matches if m is not None and m["kind"] == JOURNAL}


def remove_leftovers(folder: Path, names: Collection[str] | None = None) -> list[Path]:
    """Delete what killed writers of the files or folders `names` (None: of any) left in `folder`
    (only those whose pid is dead, and no temporary of a process with a journal there); put back
    an output a kill left swapped out. Return what was removed or restored."""
    try:
        entries = list(Path(folder).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    held, done = journal_pids(folder), []
    for entry in entries:
        match = _leftover(entry.name)
        if match is None or (names is not None and _owner(match) not in names) \
                or match.groupdict().get("kind") == JOURNAL:
            continue
        if "pid" in match.groupdict() and (pid_alive(int(match["pid"])) or int(match["pid"]) in held):
            continue
        original = entry.with_name(match["name"])
        if match.groupdict().get("kind") == "scaling-old" and not original.exists() and not original.is_symlink():
            entry.rename(original)          # killed between its two renames: the old output back
        elif entry.is_dir() and not entry.is_symlink():
            _remove_tree(entry)
        else:
            entry.unlink(missing_ok=True)
        done.append(entry)
    return done


# --------------------------------------------------------------------------------------------
# Whether a folder is the command's own to replace


def _mount_under(root: Path) -> Path | None:
    """A mount point at or under `root` (links not followed), or None."""
    device = os.lstat(root.parent).st_dev
    for folder, dirs, _ in os.walk(root):
        if os.lstat(folder).st_dev != device or os.path.ismount(folder):
            return Path(folder)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
    return None


def _remove_tree(root: Path) -> None:
    """Delete the folder `root`, never crossing into a mounted filesystem: one with a mount inside
    is left as it is (check_replaceable refuses such an output before any work)."""
    if _mount_under(root) is None:
        shutil.rmtree(root, ignore_errors=True)


def holds_runs(folder: Path) -> bool:
    """Whether `folder` is a run store (runs.csv, or runs with their config.yaml) or holds some."""
    return (folder / TABLE).exists() or any(folder.glob(f"*/{CONFIG}")) or any(folder.glob(f"*/*/{CONFIG}"))


def check_not_runs(out: Path, what: str) -> None:
    """UsageError for an output folder that is or holds a run store: `what` goes in a folder of its own."""
    if Path(out).is_dir() and holds_runs(Path(out)):
        raise UsageError(f"{out} holds a run store: {what} goes in a folder of its own, never in a store's")


def _output_folder(out: Path) -> Path:
    """The folder `replace_folder` replaces: a link to a folder stays, its target is replaced."""
    return out.resolve() if out.is_symlink() and out.is_dir() else out


def check_replaceable(out: Path, what: str, marks: Collection[str] = (), shared: Collection[str] = ()) -> None:
    """Refuse, before any work, a folder `what` (a command's output, "the report") may not replace
    as a whole: a run store (or one holding stores), a mount point or a folder with one inside, or
    one holding a file of `shared` (names another command writes too: fit.json) but none of
    `marks` (the files that make a folder this command's: report.md): that other command's output."""
    folder = _output_folder(Path(out))
    if not folder.is_dir():
        return
    check_not_runs(out, what)
    mount = _mount_under(folder)
    if mount is not None:
        raise UsageError(f"{mount} is a mount point{'' if mount == folder else f' inside {out}'}: {what} replaces "
                         "its folder as a whole, never across filesystems; give a folder of its own")
    theirs = [name for name in shared if os.path.lexists(folder / name)]
    if theirs and not any(os.path.lexists(folder / name) for name in marks):
        raise UsageError(f"{out} holds {theirs[0]}, not {what}'s (no {' or '.join(marks)} beside it): {what} "
                         "replaces its folder as a whole, which would remove it; give a folder of its own")


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
    """Entries of the old folder the command does not own, into the new one (hard links); another
    writer's temporaries too, which are not this command's to delete (those of its own files go)."""
    for entry in old.iterdir():
        leftover = _leftover(entry.name)
        if entry.name in owned or (leftover and _owner(leftover) in owned) or os.path.lexists(new / entry.name):
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
        _remove_tree(building)
    else:
        old = temp_name(out, "scaling-old")
        out.rename(old)
        building.rename(out)
        _remove_tree(old)


def make_folder(folder: Path) -> None:
    """`folder` and those above it, made where missing; UsageError naming it where one cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {folder}: {exc}") from None


def replace_folder(out: Path, build: Callable[[Path], T], owned: Collection[str] = (), *, what: str = "this output",
                   marks: Collection[str] = (), shared: Collection[str] = ()) -> T:
    """Build the folder `out` anew with `build(folder)` (a fresh, empty folder to fill) and put it
    in `out`'s place as one unit; `owned`: the names in `out` the new set replaces (or removes);
    `what`, `marks` and `shared`: as check_replaceable's, which refuses a folder not the command's own.
    UsageError for a file where the folder belongs; OSError (naming `out`) for a failed write."""
    out = Path(out)
    check_replaceable(out, what, marks, shared)
    out = _output_folder(out)               # the user's link to their folder stays; its target is replaced
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file; a folder is needed there")
    make_folder(out.parent)
    remove_leftovers(out.parent, {out.name})
    building = temp_name(out)
    _remove_tree(building)
    building.mkdir()
    try:
        result = build(building)
        if out.is_dir():
            _carry_over(out, building, set(owned))
        _swap_in(building, out)
    finally:
        if building.exists():
            _remove_tree(building)
    return result
