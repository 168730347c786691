"""How a command names the law it uses: --fit FIT (a fit), or --law (a published one).

The rule that picks one (the two exclude each other; by default the published Chinchilla law) is
`scaling.laws.results.law_choice.choose_law`, which `scaling plan`, `scaling cost` and `scaling
design` call with these options.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# One way to name a fit on every command: FIT, a folder `scaling fit` wrote or its fit.json;
# positional where a fit is the command's input (compare, validate, report), --fit FIT where optional.
FIT = "FIT"
FIT_HELP = "a fit: the folder `scaling fit` wrote (e.g. fits/tiny), or its fit.json"


def add_fit_option(parser: argparse.ArgumentParser, help: str, *, aliases: tuple[str, ...] = ()) -> None:
    """--fit FIT; `aliases`: older spellings, still read, not shown in --help."""
    parser.add_argument("--fit", type=Path, default=None, metavar=FIT, help=help)
    for flag in aliases:
        parser.add_argument(flag, type=Path, dest="fit", help=argparse.SUPPRESS)
