"""fit.json: a fitted law with its intervals, the data it came from, and what it must not be used for.

    fit = fit_json(data, bootstrap=1000, seed=0)    # fit + bootstrap -> the fit.json dict
    write_fit("fits/mine/fit.json", fit)
    law, fit = load_fit("fits/mine/fit.json")
    print(format_summary(fit))

`scaling fit` is exactly: a `scaling.laws.fitdata` loader, `apply_filters`, `fit_json`, `write_fit`,
`format_summary`. The same inputs and seed give a byte-identical file (keys sorted, floats
written in full by repr, no timestamps or timings) on the same machine and library versions.

Schema (version 1); other modules read these keys:

    {"kind": "scaling.fit", "version": 1, "seed": int,
     "data": {"source", "n_points", "digest", "param_convention", "dropped": [{"id", "reason"}],
              "filters", "n_range", "d_range", "c_range"},
     "options": {"delta", "grid", "n_starts", "fixed_E", "bootstrap"},
     "params": {"E", "A", "B", "alpha", "beta"}, "allocation": {"a", "b", "G"},
     "reference_compute", "tokens_per_param_at_reference",
     "ci": {"level", "n_resamples", "E", "A", "B", "alpha", "beta", "a", "b", "G",
            "tokens_per_param"} or null when the bootstrap is off,
     "objective", "n_starts_at_optimum", "residual_rms", "evidence": [str], "limitations": [str],
     "approaches": {"approach_1", "approach_2", "approach_3"}: each {"method", "a", "b", "a_ci",
                   "b_ci", "reason", ...} or null (approach_1 needs a run store's curves),
     "kaplan": {"param_convention", "L_N", "L_D", "L_C", "reasons"}}
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.errors import UsageError
from scaling.laws import approaches, kaplan
from scaling.laws import fit as fitting
from scaling.laws.fitdata import FitData, check_fittable
from scaling.laws.law import PARAM_NAMES, Law
from scaling.runs.store import write_atomic

KIND = "scaling.fit"
VERSION = 1
FILENAME = "fit.json"
DEFAULT_BOOTSTRAP = 1000


def fit_json(data: FitData, *, delta: float = fitting.DEFAULT_DELTA, fixed_E: float | None = None,
             bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0, reference_compute: float | None = None,
             grid=None, curves: pd.DataFrame | None = None) -> dict:
    """Fit the law to `data`, bootstrap it (`bootstrap` resamples; 0 for none), return fit.json's dict.

    grid: None for Hoffmann's 4,500 starts, or axis values / an array as `scaling.fit.fit_law`
    takes. reference_compute: C at which tokens per parameter is given (default: the largest
    6 N D in the data). curves: the runs' intermediate evaluations (`approaches.curves_from_store`)
    for Approach 1; without them only Approaches 2 and 3 are reported.
    """
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, (int, np.integer)) or bootstrap < 0:
        raise UsageError(f"--bootstrap must be a whole number >= 0; got {bootstrap!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UsageError(f"--seed must be a whole number >= 0; got {seed!r}")
    check_fittable(data, fixed_E)
    if reference_compute is None:
        reference_compute = float(data.compute.max())
    elif not (math.isfinite(reference_compute) and reference_compute > 0):
        raise UsageError(f"--reference-compute must be a positive number of FLOPs; got {reference_compute!r}")
    result = fitting.fit_law(data.n, data.d, data.loss, delta=delta, grid=grid, fixed_E=fixed_E)
    boot = None
    if bootstrap:
        boot = fitting.bootstrap(data.n, data.d, data.loss, n_resamples=int(bootstrap), seed=int(seed),
                                 delta=delta, fixed_E=fixed_E, reference_compute=reference_compute,
                                 full_fit=result)
    fit = fit_to_json(data, result, boot, seed=int(seed), reference_compute=reference_compute,
                      grid="hoffmann" if grid is None else "custom")
    fit["approaches"] = allocation_approaches(data, fit, curves)
    fit["kaplan"] = _jsonable(kaplan.fit_kaplan(data.n, data.d, data.loss,
                                                param_convention=data.param_convention or "unknown").to_dict())
    return fit


def allocation_approaches(data: FitData, fit: dict, curves: pd.DataFrame | None) -> dict:
    """Hoffmann et al.'s three estimates of a (N_opt ~ C^a), as in their Table 2.

    Approach 1 needs training curves (only a run store has them); Approach 2 groups the points by
    compute budget; Approach 3 is the parametric fit itself. An approach the data cannot support
    is null in `a`, with its `reason`.
    """
    envelope = None
    if curves is not None:
        envelope = approaches.envelope(curves[curves.run_id.isin(data.ids)]).to_dict()
    ci = fit["ci"] or {}
    parametric = {"method": "parametric", "a": fit["allocation"]["a"], "b": fit["allocation"]["b"],
                  "a_ci": ci.get("a"), "b_ci": ci.get("b"), "interval": "bootstrap percentile" if ci else None}
    return _jsonable({
        "approach_1": envelope,
        "approach_2": approaches.isoflop(data.n, data.d, data.loss).to_dict(),
        "approach_3": parametric,
    })


def _jsonable(obj):
    """Plain JSON types, NaN and infinities as null (fit.json is strict JSON)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _num(obj)
    return obj


def _num(x) -> float | None:
    """A float for JSON; None for NaN, infinity or a complex number (JSON has none of them)."""
    if isinstance(x, complex):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _allocation(law: Law, reference_compute: float) -> tuple[dict, float | None]:
    """a, b, G and D_opt/N_opt at C_ref; all None unless alpha > 0 and beta > 0."""
    if not (law.alpha > 0 and law.beta > 0):
        return {"a": None, "b": None, "G": None}, None
    return ({"a": _num(law.a), "b": _num(law.b), "G": _num(law.G)},
            _num(law.tokens_per_param(reference_compute)))


def fit_to_json(data: FitData, result: fitting.FitResult, boot: fitting.BootstrapResult | None, *,
                seed: int, reference_compute: float, grid: str = "hoffmann") -> dict:
    """The fit.json dict from the data, the fit and (optionally) the bootstrap."""
    law = result.law
    ranges = data.ranges()
    allocation, tokens_per_param = _allocation(law, reference_compute)
    ci = None
    if boot is not None:
        ci = {"level": boot.level, "n_resamples": boot.n_resamples}
        ci.update({name: [_num(lo), _num(hi)] for name, (lo, hi) in boot.intervals.items()})
    return {
        "kind": KIND,
        "version": VERSION,
        "seed": int(seed),
        "data": {
            "source": data.source,
            "n_points": len(data),
            "digest": data.digest,
            "param_convention": data.param_convention,
            "dropped": [d.to_dict() for d in data.dropped],
            "filters": dict(data.filters),
            "n_range": ranges["n_range"],
            "d_range": ranges["d_range"],
            "c_range": ranges["c_range"],
        },
        "options": {
            "delta": result.delta,
            "grid": grid,
            "n_starts": result.n_starts,
            "fixed_E": result.fixed_E,
            "bootstrap": 0 if boot is None else boot.n_resamples,
        },
        "params": {k: _num(v) for k, v in law.to_dict().items()},
        "allocation": allocation,
        "reference_compute": float(reference_compute),
        "tokens_per_param_at_reference": tokens_per_param,
        "ci": ci,
        "objective": result.objective,
        "n_starts_at_optimum": result.n_starts_at_optimum,
        "residual_rms": result.residual_rms,
        "evidence": _evidence(data, result, boot),
        "limitations": _limitations(data, result, boot, reference_compute),
    }


def _evidence(data: FitData, result: fitting.FitResult, boot) -> list[str]:
    r = data.ranges()
    tpp = r["tokens_per_param_range"]
    conv = f" ({data.param_convention} parameters)" if data.param_convention else ""
    out = [
        f"{len(data)} points fitted from {data.source}; {len(data.dropped)} left out (listed in data.dropped)",
        f"{data.n_sizes} distinct model sizes, N from {r['n_range'][0]:.4g} to {r['n_range'][1]:.4g}{conv}",
        f"D from {r['d_range'][0]:.4g} to {r['d_range'][1]:.4g} tokens; D/N from {tpp[0]:.3g} to {tpp[1]:.3g}",
        f"C = 6ND from {r['c_range'][0]:.4g} to {r['c_range'][1]:.4g} FLOPs",
        f"residual RMS {result.residual_rms:.4g} in log loss (about {100 * result.residual_rms:.2g}% of the loss)",
        f"{result.n_starts_at_optimum} of {result.n_starts} starts ended at the optimum (objective within "
        f"{fitting.OPTIMUM_FUN_RTOL:g} relative or {fitting.SCIPY_FTOL:.2g} absolute, all constants within "
        f"{100 * fitting.OPTIMUM_PARAM_RTOL:g}%); "
        f"{result.n_starts_converged} of {result.n_starts} met the stopping rule",
        f"optimum polished by scipy L-BFGS-B: {result.message or 'no message'}"
        + ("" if result.converged else " (NOT converged)"),
        f"Huber delta {result.delta:g} on log residuals, summed over points",
    ]
    if boot is not None:
        out.append(f"{boot.n_resamples} bootstrap resamples (points drawn with replacement, seed "
                   f"{boot.seed}), each refitted from {boot.n_starts_per_resample} starts (the optimum and "
                   f"the other distinct end points of the grid); {boot.n_converged} met the stopping rule")
        undefined = {k: v for k, v in boot.n_undefined.items() if v}
        if undefined:
            out.append("no interval for " + ", ".join(f"{k} (undefined in {v} resamples)"
                                                       for k, v in undefined.items())
                       + ": alpha or beta <= 0 there, so there is no compute-optimal allocation")
    return out


def _limitations(data: FitData, result: fitting.FitResult, boot, reference_compute: float) -> list[str]:
    r = data.ranges()
    out = [
        f"the law describes C = 6ND from {r['c_range'][0]:.3g} to {r['c_range'][1]:.3g} FLOPs and N from "
        f"{r['n_range'][0]:.3g} to {r['n_range'][1]:.3g}; anything beyond (including compute-optimal "
        "allocations at larger budgets) is an extrapolation of the fitted form, not a measurement",
        "E, A and B depend on the tokenizer, data and loss definition: compare only alpha, beta, a, b "
        "(and tokens per parameter, with care) with other setups",
        "A, B, alpha and beta trade off along a shallow valley of the objective: the intervals of A and B "
        "are wide, and single constants should not be quoted without them",
    ]
    if reference_compute > r["c_range"][1] * (1 + 1e-12) or reference_compute < r["c_range"][0] * (1 - 1e-12):
        out.append(f"tokens_per_param_at_reference is at C = {reference_compute:.3g} FLOPs, outside the data's "
                   "compute range: an extrapolation")
    if not (result.law.alpha > 0 and result.law.beta > 0):
        out.append(f"alpha = {result.law.alpha:.4g}, beta = {result.law.beta:.4g}: loss does not fall with both "
                   "N and D in this data, so the law gives no compute-optimal allocation (a, b, G and tokens "
                   "per parameter are null); check the data before using the fit")
    if data.n_sizes < 5:
        out.append(f"only {data.n_sizes} distinct model sizes: alpha and A are weakly determined")
    if data.param_convention is not None:
        other = "total" if data.param_convention == "non_embedding" else "non_embedding"
        out.append(f"N counts {data.param_convention} parameters; fits that count {other} parameters "
                   "(Kaplan et al. counted non-embedding, Hoffmann et al. total) give different alpha and a")
    else:
        out.append("the parameter convention of N (total or non-embedding) is not recorded for this table")
    if result.fixed_E is not None:
        out.append(f"E was fixed at {result.fixed_E:g}, not fitted: the other constants and their intervals "
                   "are conditional on that value")
    if boot is None:
        out.append("no bootstrap was run: there are no intervals, so agreement with published values "
                   "cannot be judged")
    else:
        out.append("the intervals are percentile bootstrap intervals over points treated as independent; "
                   "they do not cover systematic choices (Huber delta, learning-rate schedule, data filters)")
    return out


# --------------------------------------------------------------------------------------------
# Files


def dumps_fit(fit: dict) -> str:
    """fit.json text: sorted keys, 2-space indent, floats in full, a final newline."""
    return json.dumps(fit, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_fit(path, fit: dict) -> Path:
    """Write fit.json atomically (a folder path gets fit.json inside it); return the file path."""
    path = Path(path)
    if path.is_dir() or path.suffix != ".json":
        path = path / FILENAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {path.parent}: {exc}") from None
    write_atomic(path, dumps_fit(fit))
    return path


def load_fit(path) -> tuple[Law, dict]:
    """(Law, the whole fit.json dict). UsageError for a missing, unreadable or invalid file.

    A file written by `scaling fit` has "kind": "scaling.fit" and "version": 1. A hand-written
    file with only {"params": {"E", "A", "B", "alpha", "beta"}} (no "kind") is accepted as a
    law; other keys are then simply absent.
    """
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"fit file {path} does not exist (write one with `scaling fit`)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read fit file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"fit file {path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or ("kind" not in data and "params" not in data):
        raise UsageError(f"{path} is not a fit.json (no \"kind\": \"{KIND}\" and no 'params')")
    if "kind" in data and data["kind"] != KIND:
        raise UsageError(f"{path} is not a fit.json (\"kind\" is {data['kind']!r}, not \"{KIND}\")")
    if "kind" in data and data.get("version") != VERSION:
        raise UsageError(f"{path} has fit.json version {data.get('version')!r}; this scaling reads version {VERSION}")
    params = data.get("params")
    if not isinstance(params, dict) or any(k not in params for k in PARAM_NAMES):
        raise UsageError(f"{path} has no 'params' with all of {', '.join(PARAM_NAMES)}")
    try:
        law = Law.from_dict(params)
    except (TypeError, ValueError):
        raise UsageError(f"{path}: 'params' must be numbers ({params!r})") from None
    if not all(math.isfinite(v) for v in law.to_dict().values()) or min(law.E, law.A, law.B) <= 0:
        raise UsageError(f"{path}: 'params' must be finite with E, A, B > 0 ({params!r})")
    return law, data


# --------------------------------------------------------------------------------------------
# Human-readable summary

_FMT = {"E": ".4f", "A": ".4g", "B": ".4g", "alpha": ".4f", "beta": ".4f", "a": ".4f", "b": ".4f",
        "G": ".4g", "tokens_per_param": ".4g"}


SHOWN_DROPPED = 10  # left-out points listed by the summary; fit.json lists them all


def format_summary(fit: dict) -> str:
    """A few lines: the constants with intervals, a, b, tokens/param, starts at the optimum."""
    ci = fit.get("ci") or {}
    level = ci.get("level", 0.95)

    def line(name, value):
        f = _FMT[name]
        text = f"  {name:<6} = " + ("undefined" if value is None else f"{value:{f}}")
        if ci.get(name) and None not in ci[name]:
            lo, hi = ci[name]
            text += f"   [{lo:{f}}, {hi:{f}}]"
        return text

    d = fit["data"]
    out = [f"fit of L = E + A/N^alpha + B/D^beta to {d['n_points']} points ({d['source']}; "
           f"{len(d['dropped'])} left out)"]
    out += [f"  left out {x['id']}: {x['reason']}" for x in d["dropped"][:SHOWN_DROPPED]]
    if len(d["dropped"]) > SHOWN_DROPPED:
        out.append(f"  ... and {len(d['dropped']) - SHOWN_DROPPED} more (data.dropped in fit.json)")
    out.append("constants" + (f" with {100 * level:g}% bootstrap intervals ({ci['n_resamples']} resamples)"
                               if ci else " (no bootstrap)") + ":")
    for name in PARAM_NAMES:
        out.append(line(name, fit["params"][name]))
    out.append("allocation, N_opt ~ C^a and D_opt ~ C^b:")
    for name in ("a", "b"):
        out.append(line(name, fit["allocation"][name]))
    out.append(f"tokens per parameter at C = {fit['reference_compute']:.3g} FLOPs:")
    out.append(line("tokens_per_param", fit["tokens_per_param_at_reference"]))
    out.append(f"starts at the optimum: {fit['n_starts_at_optimum']} of {fit['options']['n_starts']}; "
               f"residual RMS {fit['residual_rms']:.4g} (log loss)")
    return "\n".join(out)
