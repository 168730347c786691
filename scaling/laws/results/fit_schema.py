"""A fit.json's dict checked against its schema, and its sections read as typed objects.

    law = check_fit(obj, "fits/tiny/fit.json")     # UsageError naming the file and the bad entry
    backtest = backtest_of(obj, "fits/tiny/fit.json")

Pure: `scaling.laws.results.lawfit` builds the `LawFit` from a dict that passed `check_fit`;
reading and writing the file is `scaling.laws.results.fit_file`; the format itself (fit.json's
sections) is docs/fit-json.md, the sections' models `scaling.schemas.fit`. Every check raises a
one-line UsageError that names the file and the entry, so a hand-edited or truncated file is
refused where it is read, not deep inside a later stage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from scaling.errors import UsageError
from scaling.laws.checks.backtest import Backtest
from scaling.laws.checks.combined import NAME as MEDIAN
from scaling.laws.checks.cross_forms import FormEntry, Forms, fitted_form
from scaling.laws.checks.holdout import Holdout
from scaling.laws.fitting.provenance import KINDS, Provenance
from scaling.laws.forms import catalog
from scaling.laws.forms.law import PARAM_NAMES, Law
from scaling.laws.repeated import Repeated
from scaling.reading import excerpt, finite_number
from scaling.schemas.fit import check_sections
from scaling.train.compute import FlopsPerToken

T = TypeVar("T")

KIND = "scaling.fit"
VERSION = 1

# The sections that must be objects when present, and the data section's typed entries (None is
# always allowed).
_OBJECTS = ("approaches", "kaplan", "verdict", "param_conventions", "repeated", "lack_of_fit", "curves", "holdout")
_DATA_TYPES = {"source": str, "n_points": int, "digest": str, "param_convention": str, "filters": dict,
               "table": dict, "store": dict, "provenance": dict}


def section(obj: dict[str, Any], key: str, where: str, kinds: tuple[type, ...], *, required: bool = False) -> Any:
    """obj[key] when it is one of `kinds` (None when absent and not required); UsageError otherwise."""
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, kinds):
        raise UsageError(f"{where}: '{key}' must be {' or '.join(k.__name__ for k in kinds)}, "
                         f"not {type(value).__name__}")
    return value


def number(obj: dict[str, Any], key: str, where: str, label: str = "") -> float | None:
    """A finite number or None from `obj`; UsageError for anything else."""
    value = obj.get(key)
    if value is None:
        return None
    if not _is_number(value):
        raise UsageError(f"{where}: {label + ' ' if label else ''}'{key}' must be a finite number or null, "
                         f"got {value!r}")
    return value


def _is_number(value: object) -> bool:
    return finite_number(value)       # an int past a float's range (10^400) is no number here


def check_intervals(ci: dict, where: str, label: str) -> None:
    """A "ci" section: a level in (0, 1), a whole number of resamples, a widening factor >= 1 (each may be absent),
    each bound pair a list of two numbers (or nulls, where undefined); UsageError naming the entry otherwise."""
    level, count, widened = ci.get("level"), ci.get("n_resamples"), ci.get("widened_by")
    if level is not None and not (_is_number(level) and 0 < level < 1):
        raise UsageError(f"{where}: '{label}.level' must be a number in (0, 1), got {excerpt(level)}")
    if count is not None and not (isinstance(count, int) and not isinstance(count, bool) and count >= 1):
        raise UsageError(f"{where}: '{label}.n_resamples' must be a whole number >= 1, got {excerpt(count)}")
    if widened is not None and not (_is_number(widened) and widened >= 1):
        raise UsageError(f"{where}: '{label}.widened_by' must be a number >= 1, got {excerpt(widened)}")
    for name, pair in ci.items():
        if name not in ("level", "n_resamples", "widened_by") and not (
                isinstance(pair, list) and len(pair) == 2 and all(v is None or _is_number(v) for v in pair)):
            raise UsageError(f"{where}: '{label}.{name}' must be a list [lo, hi] of numbers or nulls, "
                             f"got {excerpt(pair)}")


def _check_data(data: dict, where: str) -> None:
    for key, kind in _DATA_TYPES.items():
        value = data.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise UsageError(f"{where}: 'data.{key}' must be {kind.__name__} or null, got {excerpt(value)}")
    for key in ("n_range", "d_range", "c_range"):
        pair = data.get(key)
        if pair is not None and not (isinstance(pair, list) and len(pair) == 2
                                     and all(_is_number(v) and v > 0 for v in pair)):
            raise UsageError(f"{where}: 'data.{key}' must be a list [lo, hi] of positive numbers, "
                             f"got {excerpt(pair)}")
    use = data.get("context_use")
    if use is not None and not (isinstance(use, list) and len(use) == 2 and all(_is_number(v) for v in use)
                                and use[0] <= use[1]):
        raise UsageError(f"{where}: 'data.context_use' must be a list [lowest, highest] of numbers, "
                         f"got {excerpt(use)}")
    origin = data.get("provenance")
    if origin is not None and Provenance.from_json(origin) is None:
        kinds = " | ".join(map(json.dumps, KINDS))
        raise UsageError(f"{where}: 'data.provenance' must be {{\"kind\": {kinds}, \"location\": text}}, got "
                         f"{excerpt(origin)}")


def _law(obj: dict, where: str) -> Law:
    params = section(obj, "params", where, (dict,))
    if params is None or any(k not in params for k in PARAM_NAMES):
        raise UsageError(f"{where} has no 'params' with all of {', '.join(PARAM_NAMES)}")
    values = [number(params, k, where, "params") for k in PARAM_NAMES]
    if None in values or min(params["E"], params["A"], params["B"]) <= 0:
        raise UsageError(f"{where}: 'params' must be finite with E, A, B > 0 ({params!r})")
    counted = section(obj, "compute", where, (dict,))
    try:
        flops = FlopsPerToken() if counted is None else FlopsPerToken.from_dict(counted)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise UsageError(f"{where}: 'compute' must hold measure, kappa, gamma and max_error ({exc})") from None
    return replace(Law.from_dict(params), flops=flops)


def check_fit(obj: object, where: str) -> Law:
    """Check a parsed fit.json (`where` names it in messages) and return its law; UsageError
    naming the first bad section. Sections absent from an older file pass (they read as none)."""
    if not isinstance(obj, dict) or ("kind" not in obj and "params" not in obj):
        raise UsageError(f"{where} is not a fit.json (no \"kind\": \"{KIND}\" and no 'params')")
    if "kind" in obj and obj["kind"] != KIND:
        raise UsageError(f"{where} is not a fit.json (\"kind\" is {obj['kind']!r}, not \"{KIND}\")")
    if "kind" in obj and obj.get("version") != VERSION:
        raise UsageError(f"{where} has fit.json version {obj.get('version')!r}; this scaling reads version {VERSION}")
    law = _law(obj, where)
    data = section(obj, "data", where, (dict,)) or {}
    options = section(obj, "options", where, (dict,)) or {}
    allocation = section(obj, "allocation", where, (dict,)) or {}
    for key in ("dropped", "evidence", "limitations"):
        section(data if key == "dropped" else obj, key, where, (list,))
    for key in _OBJECTS:
        section(obj, key, where, (dict,))
    checks = section(obj, "diagnostics", where, (list,))
    if checks is not None and not (all(isinstance(c, dict) for c in checks) and isinstance(obj.get("verdict"), dict)):
        raise UsageError(f"{where}: 'diagnostics' must be a list of checks, with a 'verdict'")
    ci = section(obj, "ci", where, (dict,))
    if ci is not None:
        check_intervals(ci, where, "ci")
    _check_data(data, where)
    rms = number(obj, "residual_rms", where)
    if rms is not None and rms < 0:
        raise UsageError(f"{where}: 'residual_rms' must be >= 0 (a root mean square), got {rms!r}")
    bootstrap = options.get("bootstrap", 0)
    if not (isinstance(bootstrap, int) and not isinstance(bootstrap, bool) and bootstrap >= 0):
        raise UsageError(f"{where}: 'options.bootstrap' must be a whole number >= 0, got {excerpt(bootstrap)}")
    for key in ("a", "b", "G"):
        number(allocation, key, where, "allocation")
    for key in ("reference_compute", "tokens_per_param_at_reference"):
        number(obj, key, where)
    check_sections(obj, where)      # every section a later stage reads: typed, in range, finite
    return law


def repeated_of(obj: dict, where: str) -> Repeated | None:
    """The data-constrained fit of a checked fit.json (None where it has none)."""
    part = obj.get("repeated")
    if part is None:
        return None
    if isinstance(part.get("ci"), dict):
        check_intervals(part["ci"], where, "repeated.ci")
    elif part.get("ci") is not None:
        raise UsageError(f"{where}: 'repeated.ci' must be a section of intervals or null, got {excerpt(part['ci'])}")
    try:
        return Repeated.from_json(part)
    except (KeyError, TypeError, ValueError, UsageError) as exc:
        raise UsageError(f"{where}: 'repeated' is not a data-constrained fit ({exc})") from None


def holdout_of(obj: dict, where: str) -> Holdout | None:
    """The hold-out refit of a checked fit.json (None for a file written before it was recorded)."""
    return _optional_section(obj, where, "holdout", Holdout.from_json, "a hold-out check")


def backtest_of(obj: dict, where: str) -> Backtest | None:
    """The leave-future-out backtest of a checked fit.json (None for a file written before it)."""
    return _optional_section(obj, where, "backtest", Backtest.from_json, "a backtest")


def forms_of(obj: dict, where: str) -> Forms | None:
    """The forms fitted beside the law in a checked fit.json (None for a file written before them),
    each entry's constants and resamples those of its form, and the one 'form' names (where it is not
    the fitted law itself) among them: else `predict` and `plan` would quietly fall back to the
    Chinchilla form's law, or fail deep inside a later stage."""
    forms = _optional_section(obj, where, "forms", Forms.from_json, "a forms section")
    for entry in () if forms is None else forms.entries:
        _check_form_entry(entry, where)
    form = obj.get("form") or catalog.DEFAULT
    fixed_E = (obj.get("options") or {}).get("fixed_E")
    if form == fitted_form(fixed_E):
        return forms
    if forms is None:
        raise UsageError(f"{where}: 'form' is {form!r} but the file has no 'forms' (the forms fitted beside the law, "
                         f"which it predicts and plans with); refit with `scaling fit --form {form}`")
    if form == MEDIAN and forms.combined is None:
        raise UsageError(f"{where}: 'form' is 'median' but 'forms' has no 'combined' (the median of the forms)")
    if form != MEDIAN and forms.entry(form) is None:
        raise UsageError(f"{where}: 'form' is {form!r} but 'forms' has no entry of that name (its entries: "
                         f"{', '.join(e.name for e in forms.entries)})")
    return forms


def _check_form_entry(entry: FormEntry, where: str) -> None:
    """An entry's constants and resamples are its form's (kaplan: N_c, D_c, alpha_N, alpha_D; ...)."""
    rows = {len(row) for row in entry.samples}
    if rows and rows != {len(entry.sample_names)}:
        raise UsageError(f"{where}: 'forms' entry {entry.name!r}: each row of 'samples' must hold the "
                         f"{len(entry.sample_names)} values of 'sample_names', got rows of {sorted(rows)}")
    for what, params in (("params", entry.params), ("sample_names", dict.fromkeys(entry.sample_names, 1.0))):
        if params is None or (what == "sample_names" and not rows):
            continue
        try:
            catalog.law_of(entry.name, params)
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{where}: 'forms' entry {entry.name!r}: its '{what}' are not the {entry.name} form's "
                             f"constants ({type(exc).__name__}: {exc}; got {', '.join(params) or 'none'})") from None


def _optional_section(obj: dict, where: str, key: str, parse: Callable[[Any], T], what: str) -> T | None:
    """fit.json's section `key` read by `parse`; None where the file has none (written before it
    was recorded); a tampered section, in any shape, one line naming it."""
    part = obj.get(key)
    if part is None:
        return None
    if not isinstance(part, dict):
        raise UsageError(f"{where}: '{key}' must be {what}, a JSON object {{...}}; got {excerpt(part)}")
    try:
        return parse(part)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise UsageError(f"{where}: '{key}' is not {what} ({type(exc).__name__}: {exc})") from None
