"""Rules of thumb, checked: D = 20 N, and a fixed N spent Kaplan-style, beside a law's optimum.

At C FLOPs (C = 6 N D) the Chinchilla rule D = k N gives N = sqrt(C / 6k); a fixed N leaves
D = C / 6N tokens; a law gives its own compute-optimal N, D. Each allocation with its loss under
the law and its cost per generated token, 2 N.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaling.cost.result import SIX_ND, Result, check_allocation, fixed_sci
from scaling.errors import UsageError
from scaling.formats import positive
from scaling.laws.forms.law import Law
from scaling.laws.optimal.allocation import rule_of_thumb


@dataclass(frozen=True)
class AllocationRow(Result):
    label: str
    n_params: float
    tokens: float
    tokens_per_param: float
    flops_per_generated_token: float    # 2 N
    loss: float | None                  # predicted by the law, when one is given


@dataclass(frozen=True)
class RulesCheck(Result):
    """The D = 20 N rule, an optional fixed-N allocation, and a law's optimum, at one C."""

    compute: float
    tokens_per_param_rule: float
    rows: tuple
    law_label: str | None
    units: dict = field(default_factory=lambda: {
        "compute": "FLOPs", "rows.n_params": "parameters", "rows.tokens": "training tokens",
        "rows.tokens_per_param": "tokens per parameter",
        "rows.flops_per_generated_token": "FLOPs per generated token",
        "rows.loss": "loss predicted by the law"})
    assumptions: tuple = ()


def rules_of_thumb(compute: float | str, *, fixed_params: float | str | None = None, tokens_per_param: float = 20.0,
                   law: Law | None = None, law_label: str | None = None) -> RulesCheck:
    """At C FLOPs: the rule D = k N (N = sqrt(C / 6k)); a fixed N spent Kaplan-style
    (D = C / 6N); and the law's own compute-optimal N, D, each with its loss under the law."""
    c = positive(compute, "compute C")
    k = positive(tokens_per_param, "tokens per parameter")

    def row(label: str, n: float, d: float) -> AllocationRow:
        loss = None if law is None else float(law.loss(n, d))
        return AllocationRow(label, n, d, d / n, 2.0 * n, loss)

    rule = rule_of_thumb(c, k)
    rows = [row(f"rule D = {k:g} N", rule.n, rule.d)]
    assumptions = [SIX_ND, f"rule: D = {k:g} N, so N = sqrt(C / {6 * k:g}) "
                           "(Hoffmann et al. 2022, 70e9 parameters on 1.4e12 tokens)"]
    if fixed_params is not None:
        nf = positive(fixed_params, "fixed parameter count N")
        if 6.0 * nf > c:
            raise UsageError(f"N = {nf:g} leaves less than one token at C = {c:g} "
                             f"(needs C >= 6 N = {6 * nf:g})")
        rows.append(row(f"Kaplan-style N = {fixed_sci(nf, 2)}", nf, c / (6.0 * nf)))
        assumptions.append("fixed N (Kaplan-style: big model, few tokens): D = C / (6 N)")
    if law is not None:
        check_allocation(law, law_label)
        rows.append(row(f"law {law_label or ''}".rstrip(), float(law.n_opt(c)),
                        float(law.d_opt(c))))
        assumptions.append(f"law {law_label or 'given'}: N_opt, D_opt in closed form "
                           "(Hoffmann et al. 2022, eq. 4); losses are the law's predictions")
    assumptions.append("cost per generated token 2 N, so it scales with N alone")
    return RulesCheck(compute=c, tokens_per_param_rule=k, rows=tuple(rows), law_label=law_label,
                      assumptions=tuple(assumptions))
