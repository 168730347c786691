"""Reading a user's files without trusting them: JSON and YAML within bounds, regular files only.

The one bounded reader of JSON and YAML (`parse_json`, `read_json`, `parse_yaml`) that every stage
uses for files a user may have edited: a nesting depth or a size (aliases expanded) beyond the
limits, or a duplicate YAML key, is a UsageError naming the file, never a RecursionError, an abort
or megabytes echoed to the terminal; `open_regular` and `read_bounded` refuse a FIFO, a device or
a file past the size limit before reading it; `excerpt` quotes a bad value in a message, cut short;
`check_header` refuses a CSV table that names a column twice.
"""

from __future__ import annotations

import json
import math
import os
import reprlib
import stat
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from scaling.errors import UsageError

# Limits of the bounded readers. Every file of this package nests less than 10 deep and a config
# holds hundreds of values; the value limit counts YAML aliases expanded, as a consumer walks them.
MAX_DEPTH = 64
MAX_VALUES = 1_000_000
# The largest file a bounded reader reads whole: fit.json, its side CSVs, validate.json, configs.
# The largest written by this package (a fit of 1e6 rows with every row dropped) is well under.
MAX_FILE_BYTES = 256 * 2**20


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 2, 4, 4, 60, 60


def excerpt(value: object, limit: int = 60) -> str:
    """A short repr of `value` for a message: bounded however large or deep the value is."""
    short = _REPR.repr(value)
    return short if len(short) <= limit else short[:limit - 3] + "..."


def _too_deep(source: str) -> UsageError:
    """The one refusal of a file nested past MAX_DEPTH, whichever reader meets it."""
    return UsageError(f"{source}: nested deeper than {MAX_DEPTH} levels; not a file of this package")


def _check_bounds(obj: object, source: str) -> None:
    """UsageError when `obj` nests deeper than MAX_DEPTH or holds more than MAX_VALUES values.
    Iterative, and stops at the limit: an alias bomb is refused without being walked whole."""
    stack, seen = [(obj, 1)], 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise UsageError(f"{source}: more than {MAX_VALUES:,} values (aliases counted as expanded); "
                             "not a file of this package")
        if depth > MAX_DEPTH:
            raise _too_deep(source)
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)


def finite_number(value: object) -> bool:
    """Whether `value` is a number (not a bool) a float holds: finite, and an int below 1.8e308
    (JSON's 10^400 is an int Python keeps whole, and an OverflowError wherever it meets a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def parse_json(text: str, source: str) -> Any:
    """JSON text as Python values, bounded in depth and size; UsageError naming `source`."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source} is not valid JSON ({exc})") from None
    except RecursionError:
        raise _too_deep(source) from None
    _check_bounds(obj, source)
    return obj


def _not_regular(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")


def open_regular(path: str | Path, what: str = "file") -> BinaryIO:
    """`path` opened for reading in binary, when it is a regular file: a FIFO, a device (/dev/zero)
    or a folder is a UsageError naming it (and what it is), never a read that hangs or never ends;
    a missing file is FileNotFoundError, as from open(); a link loop or another failure a
    UsageError naming the path."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever before fstat could refuse it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UsageError(f"cannot read {what} {path}: it is {_not_regular(mode)}, not a regular file")
    return os.fdopen(fd, "rb")


def read_bounded(path: str | Path, limit: int = MAX_FILE_BYTES, what: str = "file") -> bytes:
    """The bytes of a regular file (`open_regular`) of at most `limit` bytes; a larger file is a
    UsageError naming it, never gigabytes read."""
    with open_regular(path, what) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UsageError(f"cannot read {what} {path}: larger than {limit // 2**20} MiB, not a file of this package")
    return data


def read_text(path: str | Path, what: str = "file") -> str:
    """A bounded regular file as UTF-8 text (`read_bounded`); UsageError naming `path` otherwise."""
    try:
        return read_bounded(path, what=what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {what} {path}: not UTF-8 text (byte {exc.start})") from None


def read_json(path: str | Path) -> Any:
    """A JSON file (UTF-8, regular, at most MAX_FILE_BYTES) through `parse_json`."""
    try:
        text = read_bounded(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON (not UTF-8 text at byte {exc.start})") from None
    return parse_json(text, str(path))


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses a duplicate key (PyYAML keeps the last silently) and stops
    composing past MAX_DEPTH (its composer recurses: deep nesting would be a RecursionError)."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in keys:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {excerpt(key)}", key_node.start_mark)
                keys.add(key)
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, source: str) -> Any:
    """YAML text as Python values: safe tags only, no duplicate keys, bounded in depth and in
    size with aliases expanded; UsageError naming `source`."""
    try:
        obj = yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        # PyYAML's message spans lines (the mark, a caret); one line, cut short, names the problem.
        raise UsageError(f"{source}: not valid YAML: {' '.join(str(exc).split())[:300]}") from None
    except RecursionError:
        raise _too_deep(source) from None
    _check_bounds(obj, source)
    return obj


def check_header(path: str | Path, sep: str = ",") -> None:
    """UsageError for a CSV table whose header names a column twice: pandas reads the second as
    'NAME.1', and a reader that takes columns by name would take the first without a word (two loss
    columns: which is the loss?). A file with no header line passes, to its reader's own message."""
    import pandas as pd  # late: configs and fit.json are read without it

    try:
        header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str).iloc[0].tolist()
    except (ValueError, IndexError, UnicodeDecodeError):
        return
    twice = next((name for i, name in enumerate(header) if name in header[:i]), None)
    if twice is not None:
        raise UsageError(f"{path}: the column {twice!r} appears twice in the header; rename one so each name "
                         "says which column it is")
