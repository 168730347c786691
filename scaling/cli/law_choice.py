"""Which law a command uses: the user's fit (--fit FIT), a published one (--law), or the default.

One rule for `scaling plan`, `scaling cost` and `scaling design`: --fit and --law exclude each
other; without either the published Chinchilla law is used and the label
says so. A command that needs L(N, D) asks for a parametric law, and Kaplan's (which has none) is
refused with the laws that have one.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scaling.errors import UsageError
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import REFERENCES, reference

if TYPE_CHECKING:   # loaded only with --fit (below): `--law` alone need not load the fitter
    from scaling.laws.results.lawfit import LawFit

DEFAULT_LAW = "chinchilla"
# One way to name a fit on every command: FIT, a folder `scaling fit` wrote or its fit.json;
# positional where a fit is the command's input (compare, validate, report), --fit FIT where optional.
FIT = "FIT"
FIT_HELP = "a fit: the folder `scaling fit` wrote (e.g. fits/tiny), or its fit.json"


def add_fit_option(parser: argparse.ArgumentParser, help: str, *, aliases: tuple[str, ...] = ()) -> None:
    """--fit FIT; `aliases`: older spellings, still read, not shown in --help."""
    parser.add_argument("--fit", type=Path, default=None, metavar=FIT, help=help)
    for flag in aliases:
        parser.add_argument(flag, type=Path, dest="fit", help=argparse.SUPPRESS)


@dataclass(frozen=True)
class LawChoice:
    """law: None for Kaplan's (an allocation, no L(N, D)). name: short ("chinchilla", "fit PATH");
    label: with its citation, and saying so when it is the default. fit: the LawFit of --fit."""

    law: Law | None
    name: str
    label: str
    fit: LawFit | None = None
    is_default: bool = False


def choose_law(fit_path: Path | None, name: str | None, *, parametric: bool = False) -> LawChoice:
    if fit_path is not None and name is not None:
        raise UsageError("give --fit or --law, not both")
    if fit_path is not None:
        from scaling.laws.results.fit_file import load_fit  # late: `--law` alone need not load the fitter

        fit = load_fit(fit_path)
        return LawChoice(fit.law, f"fit {fit_path}", f"your fit {fit_path}", fit)
    key = name or DEFAULT_LAW
    ref = reference(key)  # UsageError naming the known laws
    if parametric and ref.law is None:
        with_law = [k for k, r in REFERENCES.items() if r.law is not None]
        raise UsageError(f"{key!r} publishes no parametric L(N, D); use one of {', '.join(with_law)} or --fit")
    label = f"{key} ({ref.citation})"
    if name is None:
        label += f" [default; pass --fit {FIT} for your own law]"
    return LawChoice(ref.law, key, label, None, is_default=name is None)
