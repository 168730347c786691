"""`scaling cost memory`: weights by dtype, attention score matrices, SSM state, n = d crossover.

Thin layer over `scaling.cost.memory`: parse, call, print, each figure with its assumptions.
"""

from __future__ import annotations

import argparse
from typing import Any

from scaling import cost
from scaling.cli.cost_common import print_assumptions, print_json
from scaling.errors import UsageError


def add_memory(sub: argparse._SubParsersAction) -> None:
    mem = sub.add_parser(
        "memory", help="weights by dtype, attention score matrices, SSM state, n = d crossover",
        description="Give any of: --params (weights), --context (n^2 attention scores), "
                    "--ssm-d with --ssm-state (SSM state), --d-model (attention vs recurrence).",
        epilog="examples:\n"
               "  scaling cost memory --params 7e9 --dtype int4      # the weights\n"
               "  scaling cost memory --context 4096 32768 --heads 32 --layers 32   # attention scores\n"
               "  scaling cost memory --ssm-d 4096 --ssm-state 16 --layers 32      # an SSM's state")
    mem.add_argument("--params", default=None, help="total parameters (all experts of a MoE)")
    mem.add_argument("--active-params", default=None, help="parameters active per token (MoE)")
    mem.add_argument("--dtype", default="bf16",
                     help=f"weight dtype: {', '.join(cost.DTYPE_BYTES)} (default bf16)")
    mem.add_argument("--context", nargs="+", default=None, help="context lengths n")
    mem.add_argument("--score-bytes", default="4", help="bytes per attention score (default 4)")
    mem.add_argument("--heads", default="1", help="attention heads (default 1)")
    mem.add_argument("--layers", default="1", help="layers (default 1)")
    mem.add_argument("--ssm-d", default=None, help="SSM channels d")
    mem.add_argument("--ssm-state", default=None, help="SSM state size per channel N_state")
    mem.add_argument("--state-bytes", default="4", help="bytes per SSM state number (default 4)")
    mem.add_argument("--d-model", default=None,
                     help="model width d for the attention (n^2 d) vs recurrence (n d^2) "
                          "crossover, at the --context lengths")
    mem.add_argument("--json", action="store_true", help="print JSON instead of a table")
    mem.set_defaults(func=cmd_memory)


def cmd_memory(args: argparse.Namespace) -> int:
    sections = memory_sections(args)
    if args.json:
        print_json({k: v.to_dict() for k, v in sections.items()})
        return 0
    print_sections(sections)
    return 0


def memory_sections(args: argparse.Namespace) -> dict[str, Any]:
    """The sections the flags ask for (weights, attention scores, SSM state, crossover), each a
    cost result; UsageError for flags that go together given alone, or none at all."""
    sections: dict[str, Any] = {}   # one result type per section
    if args.active_params is not None and args.params is None:
        raise UsageError("--active-params needs --params (the total, all experts included)")
    if args.params is not None:
        sections["weights"] = cost.weight_memory(args.params, args.dtype, args.active_params)
    if args.context is not None:
        sections["attention_scores"] = cost.attention_scores_memory(
            args.context, args.score_bytes, args.heads, args.layers)
    if (args.ssm_d is None) != (args.ssm_state is None):
        raise UsageError("an SSM state needs both --ssm-d and --ssm-state")
    if args.ssm_d is not None:
        sections["ssm_state"] = cost.ssm_state_memory(args.ssm_d, args.ssm_state,
                                                      args.state_bytes, args.layers)
    if args.d_model is not None:
        sections["crossover"] = cost.attention_recurrence_crossover(args.d_model,
                                                                    args.context or ())
    if not sections:
        raise UsageError("give at least one of --params (weights), --context (attention "
                         "scores), --ssm-d with --ssm-state (SSM state), --d-model (crossover)")
    return sections


def print_sections(sections: dict[str, Any]) -> None:
    """Each section as text, then the units and the assumptions of them all."""
    assumptions: list[str] = []
    if "weights" in sections:
        w = sections["weights"]
        print(f"weights: {cost.fixed_sci(w.total_params)} parameters x {w.bytes_per_param:g} bytes "
              f"({w.dtype}) = {cost.format_bytes(w.weight_bytes)}")
        if w.active_params != w.total_params:
            print(f"compute: {cost.fixed_sci(w.active_params)} of {cost.fixed_sci(w.total_params)} "
                  f"parameters active per token = {100 * w.active_fraction:.0f}% of the dense "
                  f"equivalent ({cost.fixed_sci(w.flops_per_token_active)} vs "
                  f"{cost.fixed_sci(w.flops_per_token_dense)} FLOPs per token)")
            print("memory follows total parameters, compute follows active ones")
        assumptions += w.assumptions
    if "attention_scores" in sections:
        a = sections["attention_scores"]
        many = a.heads * a.layers > 1
        print(f"dense attention scores, n^2 x {a.bytes_per_element:g} bytes:")
        print(f"{'context':>9}  {'per head per layer':>18}"
              + (f"  {f'x {a.heads} heads x {a.layers} layers':>24}" if many else ""))
        for r in a.rows:
            print(f"{r.context:>9}  {cost.format_bytes(r.bytes_per_head_layer):>18}"
                  + (f"  {cost.format_bytes(r.bytes_total):>24}" if many else ""))
        assumptions += a.assumptions
    if "ssm_state" in sections:
        s = sections["ssm_state"]
        print(f"SSM state: d x N_state = {s.d} x {s.n_state} x {s.bytes_per_element:g} bytes = "
              f"{cost.format_bytes(s.bytes_per_layer)} per layer"
              + (f", {cost.format_bytes(s.bytes_total)} for {s.layers} layers"
                 if s.layers > 1 else "")
              + ", at any context length")
        assumptions += s.assumptions
    if "crossover" in sections:
        x = sections["crossover"]
        print(f"self-attention n^2 d = recurrence n d^2 at n = d = {x.crossover_context}")
        for r in x.rows:
            word = "cheaper" if r.ratio < 1 else ("equal" if r.ratio == 1 else "dearer")
            print(f"{r.context:>9}  attention / recurrence = {r.ratio:.3g} ({word})")
        assumptions += x.assumptions
    units = ["bytes in decimal units (1 MB = 1e6 bytes, 1 GB = 1e9 bytes)"]
    if "weights" in sections:
        units.append("parameters; FLOPs per token")
    if "crossover" in sections:
        units.append("n and d in tokens and channels; ratio of multiply-adds")
    print("units: " + "; ".join(units))
    print_assumptions(assumptions)
