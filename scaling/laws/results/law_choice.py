"""Which law a command uses: the user's fit, a published one, or the default.

One rule for `scaling plan`, `scaling cost` and `scaling design` (and `scaling.design`): a fit and
a published law's name exclude each other; without either the published Chinchilla law is used
and the label says so. A command that needs L(N, D) asks for a parametric law, and Kaplan's
(which has none) is refused with the laws that have one. The command line's --fit option is
`scaling.cli.law_choice`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scaling.errors import UsageError
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import REFERENCES, reference

if TYPE_CHECKING:   # loaded only with a fit (below): a published law alone need not load the fitter
    from scaling.laws.results.lawfit import LawFit

DEFAULT_LAW = "chinchilla"


@dataclass(frozen=True)
class LawChoice:
    """law: None for Kaplan's (an allocation, no L(N, D)). name: short ("chinchilla", "fit PATH");
    label: with its citation, and saying so when it is the default. fit: the LawFit of --fit."""

    law: Law | None
    name: str
    label: str
    fit: LawFit | None = None
    is_default: bool = False


def choose_law(fit_path: LawFit | str | Path | None, name: str | None, *, parametric: bool = False) -> LawChoice:
    """The law of `fit_path` (a fit directory, its fit.json, or a LawFit), or the published law
    `name`, or by default Chinchilla's; `parametric`: refuse a law without L(N, D)."""
    from scaling.laws.results.lawfit import LawFit  # late: a published law alone need not load the fitter

    if fit_path is not None and name is not None:
        raise UsageError("give --fit or --law, not both")
    if isinstance(fit_path, LawFit):
        source = f" of {fit_path.data.source}" if fit_path.data.source else ""
        return LawChoice(fit_path.law, "your fit", f"your fit{source}", fit_path)
    if fit_path is not None:
        from scaling.laws.results.fit_file import load_fit

        fit = load_fit(fit_path)
        return LawChoice(fit.law, f"fit {fit_path}", f"your fit {fit_path}", fit)
    key = name or DEFAULT_LAW
    ref = reference(key)  # UsageError naming the known laws
    if parametric and ref.law is None:
        with_law = [k for k, r in REFERENCES.items() if r.law is not None]
        raise UsageError(f"{key!r} publishes no parametric L(N, D); use one of {', '.join(with_law)} or --fit")
    label = f"{key} ({ref.citation})"
    if name is None:
        label += " [default; pass --fit FIT for your own law]"
    return LawChoice(ref.law, key, label, None, is_default=name is None)
