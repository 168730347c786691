"""The one exception type that means "the user's input is wrong", and the hint it may carry.

Anything raised as `UsageError` is printed by the CLI as a one-line message (no traceback
unless --debug) and exits with status 2. Every other exception is a bug in this package.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UsageError(Exception):
    """Bad input: a config key, a file, a column, a number out of range. Exit code 2.

    options: the keyword arguments of the Python API that would fix it ("config", "force"). The
    message names what to give in words, never a command-line flag: the CLI, which catches the
    error, names its flags for these options (`scaling.cli.flag_names`: the keyword with dashes)."""

    def __init__(self, message: str = "", *, options: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.options = tuple(options)


def unknown_name(kind: str, name: str, known: Iterable[str]) -> str:
    """The message "unknown law 'chinchila'; did you mean 'chinchilla'? (known: ...)": a misspelt
    name gets the closest known one (difflib's ratio, as Python's own NameError hints), a far one only the list."""
    known = list(known)
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"unknown {kind} {name!r}; did you mean {close[0]!r}? (known: {', '.join(known)})"
    return f"unknown {kind} {name!r}; known: {', '.join(known)}"
