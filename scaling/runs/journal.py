"""A set of files replaced as one unit through a journal, read back without touching anything.

    replace_files(Path("fits/tiny"), {"fit.bootstrap.csv": samples, "fit.json": text}, remove=["fit.repeated.csv"])
    data = read_set(Path("fits/tiny"), ["fit.json", "fit.bootstrap.csv"], read)   # renames nothing
    check_journals(Path("fits/tiny"), FIT_NAMES)     # before a writer's work: a journal it cannot finish

A fit's files (fit.json and the side files stamped with its digest) share a folder with whatever
the user keeps there, so they are swapped through a journal: each new file is written complete
beside its place (store.write_temp: `.NAME.<pid>.XXXXXXXX.scaling-tmp`), then a journal,
`.<first name>.scaling-journal-<pid>`, names the renames and removals to make, and its own atomic
rename is the commit. A kill before it leaves the old set (and temporaries the next writer
deletes: outputs.remove_leftovers); a kill after it leaves the new set decided: the next writer
of the set finishes the journal's renames (`settle`; each is idempotent, so two finishing one
journal at once agree) and deletes it, and a reader reads the new set through the journal
(`read_set`), renaming and deleting nothing: a read-only command never changes a folder.

A journal is obeyed only where it could be one of this package's writes, since a folder may come
from someone else: it names only the files of the set it belongs to (`names`, given by the code
that writes the set, never read from the journal), each replaced by a temporary of the journal's
own writer (its pid in the name) whose bytes have the sha256 the journal records. Anything else is
refused in one line and left alone, the files it names untouched.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from scaling.errors import UsageError
from scaling.reading import parse_json, read_text
from scaling.runs import faults
from scaling.runs.outputs import JOURNAL, make_folder, remove_leftovers
from scaling.runs.store import TEMP_SUFFIX, sync_dir, write_atomic, write_temp

# This format's mark: a journal without it (edited, or an older scaling's) is refused, not obeyed.
VERSION = 2
_JOURNAL_NAME = re.compile(rf"^\.(?P<name>.+)\.{JOURNAL}-(?P<pid>\d+)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def journal_of(name: str) -> re.Match | None:
    """The match of a journal's file name (its set's first file, its writer's pid), else None."""
    return _JOURNAL_NAME.match(name)


def _journals(folder: Path, names: Collection[str]) -> list[tuple[Path, int]]:
    """The journals in `folder` of the set `names` (named after one of its files), oldest first,
    with their writer's pid; a journal named after another file is another set's, left alone."""
    found = []
    for path in Path(folder).glob(f".*.{JOURNAL}-*"):
        match = journal_of(path.name)
        try:
            if match is not None and match["name"] in names:
                found.append((path.lstat().st_mtime_ns, path, int(match["pid"])))
        except FileNotFoundError:
            continue                            # finished meanwhile by its writer
    return [(path, pid) for _, path, pid in sorted(found)]


def _temp_of(name: str, pid: int, tmp: object) -> bool:
    """Whether `tmp` is a temporary write_temp of writer `pid` made for `name` (never another file)."""
    return isinstance(tmp, str) and re.fullmatch(rf"\.{re.escape(name)}\.{pid}\.[a-z0-9_]{{8}}"
                                                 rf"{re.escape(TEMP_SUFFIX)}", tmp) is not None


def _valid(plan: object, pid: int, first: str, names: Collection[str]) -> bool:
    if not (isinstance(plan, dict) and set(plan) == {"version", "replace", "remove"} and plan["version"] == VERSION):
        return False
    replace, remove = plan["replace"], plan["remove"]
    return (isinstance(replace, dict) and first in replace and isinstance(remove, list)
            and all(name in names and isinstance(entry, dict) and set(entry) == {"temp", "sha256"}
                    and _temp_of(name, pid, entry["temp"]) and isinstance(entry["sha256"], str)
                    and _SHA256.match(entry["sha256"]) is not None for name, entry in replace.items())
            and all(isinstance(name, str) and name in names and name not in replace for name in remove))


def _refusal(journal: Path, why: str) -> UsageError:
    return UsageError(f"{journal} is not a journal of scaling's writes of this folder ({why}); it was left as it "
                      "is: delete it and rerun the command that writes this folder")


def read_journal(journal: Path, pid: int, names: Collection[str]) -> dict:
    """A journal's plan, when it is one `replace_files` writes for the set `names`; UsageError
    otherwise (edited, foreign, or not JSON), before anything it names is touched."""
    if journal.is_symlink():
        raise _refusal(journal, "a link")
    plan = parse_json(read_text(journal, "journal"), str(journal))
    first = journal_of(journal.name)["name"]    # type: ignore[index]  # _journals matched it
    if not _valid(plan, pid, first, names):
        raise _refusal(journal, f"it may name only {', '.join(sorted(names))} and their temporaries from "
                                f"process {pid}")
    return plan


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_temp(folder: Path, entry: dict, journal: Path, read: Callable[[Path], bytes]) -> bytes:
    """A committed temporary's bytes, when they are those its journal recorded (UsageError
    otherwise); FileNotFoundError where it is gone (renamed into place already)."""
    path = folder / entry["temp"]
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise _refusal(journal, f"{entry['temp']} is not a plain file")
    data = read(path)
    if _digest(data) != entry["sha256"]:
        raise _refusal(journal, f"{entry['temp']} is not the file it recorded")
    return data


# --------------------------------------------------------------------------------------------
# The writer


def replace_files(folder: Path, files: dict[str, str | bytes], remove: Collection[str] = ()) -> None:
    """Write `files` (name -> content) into `folder` and delete the files `remove`, as one unit:
    after a kill at any point, the folder holds the old set, or the new one through its journal
    (`read_set`; the next writer finishes it). The names of `files` and `remove` are the set: a
    journal of it that a killed writer left is finished first, one that is not scaling's refused.
    The folder is made where missing. OSError naming the file for a failed write."""
    folder = Path(folder)
    names = {*files, *remove}
    make_folder(folder)
    settle(folder, names)                   # a killed writer's set: finished, then its leftovers go
    remove_leftovers(folder, names)
    temps: dict[str, dict] = {}
    journal = folder / f".{next(iter(files))}.{JOURNAL}-{os.getpid()}"
    try:
        for name, data in files.items():
            payload = data.encode() if isinstance(data, str) else data
            temps[name] = {"temp": write_temp(folder / name, payload).name, "sha256": _digest(payload)}
        plan = {"version": VERSION, "replace": temps, "remove": sorted(set(remove) - set(files))}
        write_atomic(journal, json.dumps(plan) + "\n")      # the commit: from here on, the new set
    except BaseException:
        if not journal.exists():                # not committed: the old set stays, whole
            for entry in temps.values():
                (folder / entry["temp"]).unlink(missing_ok=True)
        raise
    _roll_forward(journal, plan, lambda path: path.read_bytes())


def _roll_forward(journal: Path, plan: dict, read: Callable[[Path], bytes]) -> None:
    """Make the journal's renames and removals, then delete it. Each temporary is checked against
    its recorded sha256 before any rename. Each step is idempotent: a temporary already renamed is
    gone, so a second pass (the next writer after a kill, or two at once) ends where the first would."""
    folder = journal.parent
    for entry in plan["replace"].values():
        try:
            _read_temp(folder, entry, journal, read)
        except FileNotFoundError:
            pass                                # renamed already, by a pass before this one
    for name, entry in plan["replace"].items():
        faults.point(f"rename:{name}", folder / name)
        try:
            os.replace(folder / entry["temp"], folder / name)
        except FileNotFoundError:
            pass
        faults.point(f"renamed:{name}", folder / name)
    for name in plan["remove"]:
        (folder / name).unlink(missing_ok=True)
    sync_dir(folder)
    journal.unlink(missing_ok=True)


def settle(folder: Path, names: Collection[str]) -> list[Path]:
    """Finish every committed set of the files `names` in `folder` whose writer was killed (or is
    finishing it now: both passes agree); return the journals finished. UsageError for a journal
    of the set that is not scaling's (left alone), or a folder that cannot be written to finish one."""
    done = []
    for journal, pid in _journals(folder, names):
        try:
            _roll_forward(journal, read_journal(journal, pid, names), lambda path: path.read_bytes())
        except FileNotFoundError:
            continue                            # finished meanwhile by another pass
        except OSError as exc:
            raise UsageError(f"cannot finish the files {journal} lists (a killed write left it): "
                             f"{exc.strerror}; rerun the command that writes {folder}") from None
        done.append(journal)
    return done


def check_journals(folder: Path, names: Collection[str]) -> None:
    """Refuse, before a writer's work, a journal of the set `names` in `folder` that it could not
    finish: not JSON, not scaling's, or naming a temporary that is not the file it recorded."""
    for journal, pid in _journals(folder, names):
        try:
            plan = read_journal(journal, pid, names)
            for entry in plan["replace"].values():
                try:
                    _read_temp(folder, entry, journal, lambda path: path.read_bytes())
                except FileNotFoundError:
                    pass
        except FileNotFoundError:
            continue                            # finished meanwhile


# --------------------------------------------------------------------------------------------
# The reader


def read_set(folder: Path, names: Sequence[str], read: Callable[[Path], bytes]) -> dict[str, bytes | None]:
    """Each file of the set `names` in `folder`, as `read(path)` gives its bytes, or None where it
    is absent: the set a committed journal names (its writer killed, or renaming now) read through
    the journal's temporaries, where they still are. Nothing is renamed or deleted. UsageError for
    a journal of the set that is not scaling's (the files it names are not read through it)."""
    folder = Path(folder)
    where: dict[str, tuple[Path, dict] | None] = {}    # a name's committed temporary, or None: removed
    for journal, pid in _journals(folder, names):       # oldest first: a later commit wins
        try:
            plan = read_journal(journal, pid, names)
        except FileNotFoundError:
            continue                                    # finished meanwhile: the files are in place
        where.update({name: (journal, entry) for name, entry in plan["replace"].items()})
        where.update({name: None for name in plan["remove"]})
    return {name: _read_one(folder, name, where.get(name, ()), read) for name in names}


def _read_one(folder: Path, name: str, committed: tuple | None, read: Callable[[Path], bytes]) -> bytes | None:
    """`name`'s bytes: its committed temporary's where it is still there, else the file's own."""
    if committed is None:
        return None                                     # the committed set removes it
    if committed:
        journal, entry = committed
        try:
            return _read_temp(folder, entry, journal, read)
        except FileNotFoundError:
            pass                                        # renamed into place meanwhile: the file is the new one
    try:
        return read(folder / name)
    except FileNotFoundError:
        return None
