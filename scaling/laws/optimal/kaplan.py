"""Kaplan et al.'s single-variable power laws, fitted on your own runs.

Kaplan, McCandlish et al. 2020, "Scaling Laws for Neural Language Models" (arXiv:2001.08361),
eqs. 1.1-1.3, with no irreducible term:

    L(N) = (N_c / N)^alpha_N     N non-embedding parameters, data not the bottleneck
    L(D) = (D_c / D)^alpha_D     D tokens, model size not the bottleneck
    L(C) = (C_c / C)^alpha_C     C = 6 N D, along the compute-efficient frontier

Their values: alpha_N = 0.076, N_c = 8.8e13; alpha_D = 0.095, D_c = 5.4e13; alpha_C (for
C_min, PF-days) = 0.050. On a finite grid each law is read off the runs that come closest to
its condition: L(N) from the largest-D run of each model size, L(D) from the largest-N run of
each token budget, L(C) from the runs that set a new lowest loss as C grows. Each is a straight
line in log L vs log X, fitted by least squares. Pure functions, no I/O.

Kaplan counted N without embedding (and positional) parameters, and so does `fit_kaplan_table`,
from the run table's n_params_non_embedding and the matching flops_6nd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from scaling.errors import UsageError
from scaling.laws.optimal.approaches import fit_power_law


@dataclass(frozen=True)
class SingleLaw:
    """L(X) = (X_c / X)^alpha, fitted on `n_points` (x, loss) points."""

    variable: str
    alpha: float
    x_c: float
    alpha_ci: tuple[float, float] | None   # 95% Student-t interval of the log-log slope
    n_points: int
    x: tuple[float, ...]
    loss: tuple[float, ...]
    used: str = ""                # which runs the law was read off
    caveat: str | None = None     # where the data are not of the design the law assumes

    def __call__(self, x: npt.ArrayLike) -> np.ndarray:
        return (self.x_c / np.asarray(x, dtype=float)) ** self.alpha


@dataclass(frozen=True)
class KaplanFit:
    """The three laws; a law is None when fewer than 2 distinct points qualify (see `reasons`)."""

    L_N: SingleLaw | None
    L_D: SingleLaw | None
    L_C: SingleLaw | None
    param_convention: str = "non_embedding"
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"param_convention": self.param_convention, "reasons": list(self.reasons)}
        for name, law in (("L_N", self.L_N), ("L_D", self.L_D), ("L_C", self.L_C)):
            out[name] = None if law is None else {
                "alpha": law.alpha, "x_c": law.x_c,
                "alpha_ci": list(law.alpha_ci) if law.alpha_ci else None, "n_points": law.n_points,
                "used": law.used, "caveat": law.caveat}
        return out


def fit_single(variable: str, x: np.ndarray, loss: np.ndarray) -> SingleLaw:
    """L = (x_c / x)^alpha by least squares of ln L on ln x: slope -alpha, intercept alpha ln x_c."""
    fit = fit_power_law(x, loss)
    alpha = -fit.exponent
    if alpha == 0:
        raise ValueError(f"loss does not change with {variable}")
    ci = None if fit.ci is None else (-fit.ci[1], -fit.ci[0])
    log_x_c = math.log(fit.coefficient) / alpha
    x_c = math.exp(log_x_c) if log_x_c < 709 else math.inf  # a near-flat fit puts X_c off scale
    return SingleLaw(variable, alpha, x_c, ci, fit.n_points,
                     tuple(map(float, x)), tuple(map(float, loss)))


def _key(values: np.ndarray) -> np.ndarray:
    """Group key: equal values up to a relative 1e-9 (integers read back from CSV as floats)."""
    return np.round(np.log(values) * 1e9).astype(np.int64)


def largest_partner(x: np.ndarray, partner: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each distinct x, the loss of its run with the largest `partner` (ties: lowest loss), and
    that partner."""
    df = pd.DataFrame({"k": _key(x), "x": x, "p": partner, "loss": loss})
    best = df.sort_values(["k", "p", "loss"], ascending=[True, False, True]).groupby("k").head(1)
    best = best.sort_values("x")
    return best.x.to_numpy(), best.loss.to_numpy(), best.p.to_numpy()


PARTNER_SPREAD = 2.0   # largest over smallest partner before a law is flagged as mixing N and D


def _partner_caveat(law: str, partner: str, values: np.ndarray) -> str | None:
    """Kaplan's L(N) holds D large and fixed (L(D), N): say so when the runs read off do not."""
    lo, hi = float(np.min(values)), float(np.max(values))
    if hi <= PARTNER_SPREAD * lo:
        return None
    return (f"{law} is read off runs whose {partner} ranges from {lo:.3g} to {hi:.3g}, not one large {partner}: "
            f"the slope mixes the effects of N and D (Kaplan's law assumes {partner} is not the bottleneck)")


def compute_frontier(compute: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs that reach a lower loss than every run with less (or equal) compute."""
    order = np.lexsort((loss, compute))
    c, losses = np.asarray(compute, float)[order], np.asarray(loss, float)[order]
    keep, best = [], math.inf
    for i in range(len(c)):
        if losses[i] < best:
            keep.append(i)
            best = losses[i]
    return c[keep], losses[keep]


def fit_kaplan(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, compute: npt.ArrayLike | None = None, *,
               param_convention: str = "non_embedding") -> KaplanFit:
    """Kaplan's three laws from runs (N_i, D_i, loss_i); compute defaults to 6 N D.

    Pass non-embedding N to compare exponents with Kaplan's."""
    sizes, tokens, losses = (np.asarray(v, dtype=float).ravel() for v in (n, d, loss))
    spent = 6.0 * sizes * tokens if compute is None else np.asarray(compute, dtype=float).ravel()
    if not (len(sizes) == len(tokens) == len(losses) == len(spent)):
        raise UsageError("n, d, loss (and compute) must have the same length")
    ok = np.isfinite(sizes) & np.isfinite(tokens) & np.isfinite(losses) & np.isfinite(spent)
    ok &= (sizes > 0) & (tokens > 0) & (losses > 0) & (spent > 0)
    sizes, tokens, losses, spent = sizes[ok], tokens[ok], losses[ok], spent[ok]
    laws: dict[str, SingleLaw | None] = {}
    reasons: list[str] = []
    n_x, n_loss, n_partner = largest_partner(sizes, tokens, losses)
    d_x, d_loss, d_partner = largest_partner(tokens, sizes, losses)
    c_x, c_loss = compute_frontier(spent, losses)
    candidates = {
        "N": (n_x, n_loss, "the largest-D run of each model size", _partner_caveat("L(N)", "D", n_partner)),
        "D": (d_x, d_loss, "the largest-N run of each token budget", _partner_caveat("L(D)", "N", d_partner)),
        "C": (c_x, c_loss, "the runs that set a new lowest loss as C grows", None if len(c_x) >= 4 else
              f"L(C) rests on {len(c_x)} frontier runs: too few for a slope to mean much"),
    }
    what = {"N": "model sizes", "D": "token budgets", "C": "runs on the compute frontier"}
    for var, (x, y, used, caveat) in candidates.items():
        if len(np.unique(_key(x))) < 2:
            laws[var] = None
            reasons.append(f"L({var}): {len(x)} {what[var]}; need at least 2")
            continue
        try:
            laws[var] = replace(fit_single(var, x, y), used=used, caveat=caveat)
        except ValueError as exc:          # x on one value, rounded many ways (one budget): no slope
            laws[var] = None
            reasons.append(f"L({var}): {exc}")
    return KaplanFit(laws["N"], laws["D"], laws["C"], param_convention, tuple(reasons))


def fit_kaplan_table(table: pd.DataFrame) -> KaplanFit:
    """Kaplan's laws from a run table (runs.csv): finished runs, non-embedding N, final val loss."""
    need = ("status", "n_params_non_embedding", "tokens", "final_val_loss", "flops_6nd")
    missing = [c for c in need if c not in table.columns]
    if missing:
        raise UsageError(f"run table lacks column(s) {', '.join(missing)}")
    done = table[table.status == "finished"]
    return fit_kaplan(done.n_params_non_embedding, done.tokens, done.final_val_loss,
                      done.flops_6nd, param_convention="non_embedding")
