"""The law forms by name, as `scaling fit --form NAME` and fit.json's "form" spell them.

    catalog.get("kaplan")                        # a Form (scaling.laws.forms.form)
    catalog.get("fixed-E", E=1.69)               # the fixed-E form needs its E
    catalog.law_of("farseer", {"E": ..., ...})   # a fitted law back from fit.json's constants
"""

from __future__ import annotations

from scaling.errors import UsageError, unknown_name
from scaling.laws.forms.chinchilla import Chinchilla
from scaling.laws.forms.farseer import Farseer, FarseerLaw
from scaling.laws.forms.fixed_e import FROM_USER, FixedE
from scaling.laws.forms.form import Form, FormLaw
from scaling.laws.forms.kaplan_nd import Kaplan, KaplanLaw
from scaling.laws.forms.law import Law
from scaling.laws.forms.tied import Tied

DEFAULT = "chinchilla"
FORMS: dict[str, type[Form]] = {f.name: f for f in (Chinchilla, Tied, Kaplan, FixedE, Farseer)}


def get(name: str, E: float | None = None, source: str = FROM_USER) -> Form:
    """The form called `name`; the fixed-E form pins `E` (from `source`, in words)."""
    if name not in FORMS:
        raise UsageError(unknown_name("form", name, FORMS))
    if name == FixedE.name:
        if E is None:
            raise UsageError("the fixed-E form needs its E: give --E VALUE (a reference's, another fit's or a "
                             "larger run's)")
        return FixedE(E=float(E), source=source)
    return FORMS[name]()


def law_of(name: str, params: dict) -> FormLaw:
    """The law of form `name` with the constants `params` (as `FormLaw.to_dict` wrote them)."""
    if name == Kaplan.name:
        return KaplanLaw(**{k: float(params[k]) for k in ("N_c", "D_c", "alpha_N", "alpha_D")})
    if name == Farseer.name:
        return FarseerLaw(**{k: float(params[k]) for k in ("E", "A", "B", "alpha", "beta_0", "beta_1")})
    if name not in FORMS:
        raise UsageError(unknown_name("form", name, FORMS))
    return Law.from_dict(params)
