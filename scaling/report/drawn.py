"""The law a report's figures draw: the one the fit predicts and plans with, and the words that say so.

    law = drawn_law(fit)          # fit.law, or the form `scaling fit --form` chose (its allocation numeric)
    caption + drawn_note(fit)     # which law a figure of the law draws, where --form chose another
    label = drawn_name(fit)       # and what its legend calls it
    caption + chinchilla_note(fit)   # a figure only the Chinchilla-form fit has (bootstrap, backtest)

Why: under `--form kaplan` (tied, farseer, fixed-E) the plan, predictions and intervals are that
form's while the constants, diagnostics and verdict stay the Chinchilla form's; a figure of the law
against the runs, its IsoFLOP optima or its frontier drawn from the Chinchilla law would show one law
beside a plan of another. The median of the forms (`--form median`) has no one law: its allocation
is the fitted form's, which its figures draw, and their captions say so.
"""

from __future__ import annotations

from scaling.laws.checks.combined import NAME as MEDIAN
from scaling.laws.checks.cross_forms import FormEntry
from scaling.laws.forms.allocating import AllocatingLaw, allocating
from scaling.laws.results.lawfit import LawFit

DEFAULT_REFERENCE = 1e21      # where a numeric form's local exponent a is read without a reference compute


def drawn_law(fit: LawFit) -> AllocatingLaw:
    """The law the fit predicts and plans with: the form `--form` chose where it was fitted, else `fit.law`."""
    if (entry := _drawable(fit)) is None:
        return fit.law
    top = fit.data.c_range[1] if fit.data.c_range is not None else DEFAULT_REFERENCE
    return allocating(entry.law, float(fit.reference_compute or top))


def _drawable(fit: LawFit) -> FormEntry | None:
    """The entry of the form `--form` chose where it was fitted and has an optimum; else None."""
    entry = fit.form_entry
    return entry if entry is not None and entry.params is not None and entry.law.has_optimum else None


def equation(fit: LawFit) -> str:
    """The drawn law's equation with its constants, for a figure's title."""
    if (entry := _drawable(fit)) is not None and entry.params is not None:
        return f"the {entry.name} form: " + ", ".join(f"{k} = {v:.4g}" for k, v in entry.params.items())
    law = fit.law
    return f"L(N, D) = {law.E:.3g} + {law.A:.4g}/N^{law.alpha:.3f} + {law.B:.4g}/D^{law.beta:.3f}"


def drawn_name(fit: LawFit) -> str | None:
    """What a figure's legend calls the law drawn where it is the form `--form` chose ("kaplan
    form"); None where it is the fit's own law (the Chinchilla form's), which legends call the law."""
    entry = _drawable(fit)
    return None if entry is None else f"{entry.name} form"


def drawn_note(fit: LawFit) -> str:
    """A caption's sentence naming the law drawn where it is not the default's; "" where it is."""
    if (entry := _drawable(fit)) is not None:
        return (f" The law drawn is the {entry.name} form's, which this fit predicts and plans with (`--form "
                f"{entry.name}`; its constants in the forms table); the constants above, the diagnostics and the "
                "verdict are the Chinchilla form's.")
    if (entry := fit.form_entry) is not None:
        return (f" The law drawn is the Chinchilla form's: the {entry.name} form chosen by `--form` "
                + (f"could not be fitted ({entry.reason})." if entry.params is None else "has no optimum."))
    if fit.form == MEDIAN:
        return (" The law drawn is the Chinchilla form's: the median of the forms (`--form median`) has no one law "
                "of its own; it predicts the loss as the forms table shows and plans by its own optimum.")
    return ""


def chinchilla_note(fit: LawFit) -> str:
    """A caption's sentence for a figure only the Chinchilla-form fit has, where --form chose another."""
    if fit.form_entry is None and fit.form != MEDIAN:
        return ""
    return (f" It is the Chinchilla-form fit's (the constants, diagnostics and verdict `--form {fit.form}` leaves "
            "as they are); the chosen form's resamples and backtest are in the forms section.")


def chosen_form_line(fit: LawFit) -> str | None:
    """The summary's sentence saying which law predicts and plans where `--form` chose another; else None."""
    if fit.median is not None:
        return ("Predictions, plans and their intervals are the median of the forms' (`--form median`; the forms "
                "table), its plan its own optimum; the constants and diagnostics are this law's, the verdict's "
                "backtest check the median's.")
    if (entry := fit.form_entry) is None:
        return None
    return (f"Predictions, their intervals, the plan and the figures of the law are the {entry.name} form's "
            f"(`--form {entry.name}`; its constants in the forms table); the constants above, the diagnostics and "
            "the verdict are the Chinchilla form's.")
