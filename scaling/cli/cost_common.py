"""What the `scaling cost` commands share: a parser that reads -7e10 as a value, and printers.

Numbers are parsed by the commands (`scaling.formats.positive`), not by argparse, so a bad value
is a UsageError (exit 2) saying what is allowed; this parser only makes sure a negative number
reaches that check instead of being taken for an option.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from scaling.cli import Parser

_NEGATIVE_NUMBER = re.compile(r"^-\.?\d")


class NumberArgs(Parser):
    """The command line's parser (one-line errors) that reads a token such as -7e10 as a value, never as an option.

    argparse before Python 3.13 takes only -7 and -.5 for negative numbers, so `--params -7e10`
    would stop at "expected one argument" instead of reaching the check that says N must be
    positive. No option of these parsers looks like a number, so every such token is a value:
    it is swapped for a stand-in that argparse cannot take for an option, and swapped back in
    the parsed values.
    """

    # The ignore: typeshed overloads parse_known_args on the namespace's own type; these parsers
    # are only ever given an argparse.Namespace (or none), and give one back.
    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        args = list(sys.argv[1:] if args is None else args)
        originals: dict[str, str] = {}
        self._originals = originals
        for i, arg in enumerate(args):
            if _NEGATIVE_NUMBER.match(arg):
                args[i] = f"\0{i}"          # NUL cannot occur in a real argument
                originals[args[i]] = arg

        def back(value: object) -> Any:
            if isinstance(value, list):
                return [back(v) for v in value]
            if isinstance(value, (str, Path)) and str(value) in originals:
                return type(value)(originals[str(value)])
            return value

        parsed, extras = super().parse_known_args(args, namespace)
        for name, value in vars(parsed).items():
            setattr(parsed, name, back(value))
        return parsed, back(extras)


    def error(self, message: str) -> NoReturn:
        """The one-line refusal, with each stand-in put back (`--params -1 --params -2`: given twice)."""
        for stand_in, original in getattr(self, "_originals", {}).items():
            message = message.replace(stand_in, original)
        super().error(message)


def print_json(obj: object) -> None:
    print(json.dumps(obj, indent=2))


def print_assumptions(items: Iterable[str]) -> None:
    print("assumptions:")
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
            print(f"  - {item}")
