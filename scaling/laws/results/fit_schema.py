"""A fit.json's dict checked against its schema, and its sections read as typed objects.

    law = check_fit(obj, "fits/tiny/fit.json")     # UsageError naming the file and the bad entry
    backtest = backtest_of(obj, "fits/tiny/fit.json")

Pure: `fit_fields` gives `scaling.laws.results.lawfit`'s `LawFit` its fields from a checked dict;
reading and writing the file is `scaling.laws.results.fit_file`; the format itself (fit.json's
sections) is docs/fit-json.md, the sections' models `scaling.schemas.fit`. Every check raises a
one-line UsageError that names the file and the entry, so a hand-edited or truncated file is
refused where it is read, not deep inside a later stage.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from scaling.errors import UsageError
from scaling.laws.checks.backtest import Backtest
from scaling.laws.checks.combined import NAME as MEDIAN
from scaling.laws.checks.cross_forms import Forms, fitted_form
from scaling.laws.checks.holdout import Holdout
from scaling.laws.checks.verdict import Diagnostics
from scaling.laws.fitting.provenance import KINDS, Provenance
from scaling.laws.forms import catalog
from scaling.laws.forms.law import PARAM_NAMES, Law
from scaling.laws.repeated import Repeated
from scaling.laws.results.fit_sections import DataSummary, FitOptions, Intervals
from scaling.reading import excerpt, finite_number
from scaling.schemas.fit import check_sections
from scaling.train.compute import FlopsPerToken

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
    section(obj, "ci", where, (dict,))
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
    return None if obj.get("repeated") is None else Repeated.from_json(obj["repeated"])


def holdout_of(obj: dict, where: str) -> Holdout | None:
    """The hold-out refit of a checked fit.json (None for a file written before it was recorded)."""
    return None if obj.get("holdout") is None else Holdout.from_json(obj["holdout"])


def backtest_of(obj: dict, where: str) -> Backtest | None:
    """The leave-future-out backtest of a checked fit.json (None for a file written before it)."""
    return None if obj.get("backtest") is None else Backtest.from_json(obj["backtest"])


def forms_of(obj: dict, where: str) -> Forms | None:
    """The forms fitted beside the law in a checked fit.json (None for a file written before them),
    each entry's constants and resamples those of its form, and the one 'form' names (where it is not
    the fitted law itself) among them: else `predict` and `plan` would quietly fall back to the
    Chinchilla form's law, or fail deep inside a later stage."""
    forms = None if obj.get("forms") is None else Forms.from_json(obj["forms"])
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


def fit_fields(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """`LawFit`'s fields from a fit.json dict, checked (`check_fit`); sections an older file lacks
    read as none."""
    law = check_fit(obj, where)
    data, options, split = obj.get("data") or {}, obj.get("options") or {}, obj.get("allocation") or {}
    return dict(
        law=law, seed=obj.get("seed", 0), data=DataSummary.from_json(data),
        options=FitOptions(**{k: options[k] for k in FitOptions.__dataclass_fields__ if k in options}),
        a=split.get("a"), b=split.get("b"), G=split.get("G"), reference_compute=obj.get("reference_compute"),
        tokens_per_param=obj.get("tokens_per_param_at_reference"),
        ci=None if obj.get("ci") is None else Intervals.from_json(obj["ci"]), objective=obj.get("objective"),
        n_starts_at_optimum=obj.get("n_starts_at_optimum"), residual_rms=obj.get("residual_rms"),
        evidence=tuple(obj.get("evidence") or ()), limitations=tuple(obj.get("limitations") or ()),
        approaches=obj.get("approaches"), kaplan=obj.get("kaplan"),
        diagnostics=None if obj.get("diagnostics") is None else Diagnostics.from_json(obj),
        param_conventions=obj.get("param_conventions"), repeated=repeated_of(obj, where),
        lack_of_fit=obj.get("lack_of_fit"), curves=obj.get("curves"), holdout=holdout_of(obj, where),
        backtest=backtest_of(obj, where), form=str(obj.get("form") or "chinchilla"), forms=forms_of(obj, where))
