"""`scaling cost ...`: compute, time, money and memory sums, each printed with its assumptions.

    scaling cost train            C = 6 N D (and the exact count from a shape), GPU-hours, days, US$
    scaling cost inference        2 N per generated token over a model's life, against training
    scaling cost inference-aware  the N, D minimising training + inference FLOPs at a target loss
    scaling cost rules            D = 20 N and a fixed-N split beside a law's optimum
    scaling cost memory           weights by dtype, attention scores n^2, SSM state, n = d crossover

Thin layer over `scaling.cost.estimates`: parse, call, print. Numbers are parsed here (not by argparse)
so that a bad value is a UsageError (exit 2, one line saying what is allowed). `--json` prints
the result dataclasses, units and assumptions included.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from scaling.cost import estimates as cost
from scaling.errors import UsageError
from scaling.laws.law import Law
from scaling.laws.references import REFERENCES, reference

_NEGATIVE_NUMBER = re.compile(r"^-\.?\d")


def register(subparsers) -> None:
    group = subparsers.add_parser(
        "cost", help="plan compute, time, money and memory (training, inference, optimum)",
        description="Back-of-the-envelope planning sums, each printed with its units and the "
                    "assumptions that produced it.")
    sub = group.add_subparsers(dest="cost_command", required=True, metavar="SUBCOMMAND")

    train = sub.add_parser(
        "train", help="training FLOPs, GPU-hours, wall-clock days and dollars for some models",
        description="C = 6 N D per model (and the exact count when a shape is given); "
                    "GPU-hours = C / achieved FLOP/s / 3600; days = GPU-hours / GPUs / 24; "
                    "US$ = GPU-hours x price.")
    train.add_argument("--model", action="append", required=True, metavar="SPEC",
                       help="NAME:N:D, or NAME:N:D:LAYERS:D_MODEL:CONTEXT:VOCAB for the exact "
                            "count too; repeat for several models "
                            "(e.g. --model 'GPT-3:175e9:300e9')")
    _throughput_args(train)
    train.add_argument("--gpus", default="1", help="GPUs training at once (default 1)")
    train.add_argument("--price", default=None, help="US$ per GPU-hour (optional)")
    train.add_argument("--tied-embeddings", action="store_true",
                       help="exact count: the input and output embeddings are one matrix")
    train.add_argument("--json", action="store_true", help="print JSON instead of a table")
    train.set_defaults(func=cmd_train)

    inf = sub.add_parser(
        "inference", help="lifetime inference FLOPs and when they overtake training",
        description="C_inf = 2 N FLOPs per generated token, times tokens per request, times "
                    "requests; with --tokens, against training's 6 N D.")
    inf.add_argument("--params", required=True, help="parameters N (active ones for a MoE)")
    inf.add_argument("--tokens-per-request", required=True, help="generated tokens per request")
    inf.add_argument("--requests", nargs="+", required=True, help="request counts, e.g. 1e6 1e9")
    inf.add_argument("--tokens", default=None, help="training tokens D (to compare with training)")
    inf.add_argument("--json", action="store_true")
    inf.set_defaults(func=cmd_inference)

    aware = sub.add_parser(
        "inference-aware", help="N, D minimising training + inference FLOPs at a target loss",
        description="Sardana et al. 2024 (arXiv:2401.00448): minimise 6 N D + 2 N D_inf "
                    "subject to L(N, D) = target, for each expected number of generated tokens.")
    _law_args(aware)
    target = aware.add_mutually_exclusive_group(required=True)
    target.add_argument("--loss", default=None, help="target loss (in the law's units)")
    target.add_argument("--compute", default=None,
                        help="training-only budget C: the target is the law's best loss at C")
    aware.add_argument("--inference-tokens", nargs="+",
                       default=["0", "1e10", "1e11", "1e12", "1e13", "1e14", "1e15"],
                       help="generated tokens over the model's life (default: 0 1e10 ... 1e15)")
    aware.add_argument("--json", action="store_true")
    aware.set_defaults(func=cmd_inference_aware)

    rules = sub.add_parser(
        "rules", help="D = 20 N and a fixed-N (Kaplan-style) split beside a law's optimum",
        description="At C FLOPs: the rule D = k N (N = sqrt(C / 6k)), a fixed N spent on "
                    "D = C / 6N, and the law's compute-optimal N, D, each with its predicted "
                    "loss and cost per generated token.")
    rules.add_argument("--compute", required=True, help="training compute C in FLOPs")
    rules.add_argument("--params", default=None,
                       help="a fixed N to spend C on Kaplan-style (e.g. 1e11)")
    rules.add_argument("--tokens-per-param", default="20", help="the rule's D / N (default 20)")
    _law_args(rules)
    rules.add_argument("--json", action="store_true")
    rules.set_defaults(func=cmd_rules)

    mem = sub.add_parser(
        "memory", help="weights by dtype, attention score matrices, SSM state, n = d crossover",
        description="Give any of: --params (weights), --context (n^2 attention scores), "
                    "--ssm-d with --ssm-state (SSM state), --d-model (attention vs recurrence).")
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
    mem.add_argument("--json", action="store_true")
    mem.set_defaults(func=cmd_memory)

    # A value like -7e10 should reach our checks ("must be positive"), not be taken for an
    # option: argparse < 3.13 only recognises -7 and -.5 as negative numbers.
    for parser in (train, inf, aware, rules, mem):
        parser._negative_number_matcher = _NEGATIVE_NUMBER


def _throughput_args(parser) -> None:
    parser.add_argument("--flops-per-gpu", default=None,
                        help="achieved FLOP/s per GPU (utilisation included), e.g. 400e12")
    parser.add_argument("--gpu", default=None,
                        help=f"accelerator preset, dense peak: {', '.join(cost.GPU_PRESETS)} "
                             "(needs --mfu)")
    parser.add_argument("--peak-flops", default=None, help="dense peak FLOP/s per GPU (needs --mfu)")
    parser.add_argument("--mfu", default=None, help="model-FLOPs utilisation in (0, 1], e.g. 0.4")


def _law_args(parser) -> None:
    laws = [k for k, ref in REFERENCES.items() if ref.law is not None]
    parser.add_argument("--law", default=None,
                        help=f"published law: {', '.join(laws)} (default chinchilla)")
    parser.add_argument("--fit", default=None, metavar="FIT_JSON", type=Path,
                        help="your own fit (fit.json with 'params': E, A, B, alpha, beta)")


# ----------------------------------------------------------------------------- helpers

def _law(args) -> tuple[Law, str]:
    if args.fit is not None and args.law is not None:
        raise UsageError("give --law or --fit, not both")
    if args.fit is not None:
        return _load_fit(args.fit), f"fit {args.fit}"
    key = args.law or "chinchilla"
    ref = reference(key)
    if ref.law is None:
        with_law = [k for k, r in REFERENCES.items() if r.law is not None]
        raise UsageError(f"{key!r} publishes no parametric L(N, D); use one of "
                         f"{', '.join(with_law)} or --fit")
    return ref.law, key


def _default_law_note(args) -> None:
    if args.law is None and args.fit is None:
        print("law: the published chinchilla law (Hoffmann et al. 2022), by default; "
              "--fit FIT_JSON for yours")


def _load_fit(path: Path) -> Law:
    """The law of a fit.json; imported late so the cost commands without --fit do not load the fitter."""
    from scaling.laws.results import load_fit

    return load_fit(path)[0]


def _parse_model(spec: str) -> tuple[str, float, float, cost.ModelShape | None]:
    parts = spec.split(":")
    fmt = "NAME:N:D or NAME:N:D:LAYERS:D_MODEL:CONTEXT:VOCAB (e.g. 'GPT-3:175e9:300e9')"

    def numbers(items):
        try:
            return [float(x) for x in items]
        except ValueError:
            return None

    shape = None
    if len(parts) >= 7 and numbers(parts[-6:]) is not None:
        name, (n, d), shape = ":".join(parts[:-6]), parts[-6:-4], tuple(parts[-4:])
    elif len(parts) >= 3 and numbers(parts[-2:]) is not None:
        name, (n, d) = ":".join(parts[:-2]), parts[-2:]
    else:
        raise UsageError(f"--model {spec!r}: expected {fmt}")
    name = name.strip()
    if not name:
        raise UsageError(f"--model {spec!r}: the name is empty; expected {fmt}")
    n = cost.positive(n, f"--model {name}: N")
    d = cost.positive(d, f"--model {name}: D")
    if shape is not None:
        labels = ("LAYERS", "D_MODEL", "CONTEXT", "VOCAB")
        shape = tuple(cost.positive(v, f"--model {name}: {label}", integer=True)
                      for v, label in zip(shape, labels))
    return name, n, d, shape


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2))


def _assumptions(items) -> None:
    print("assumptions:")
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
            print(f"  - {item}")


# ----------------------------------------------------------------------------- commands

def cmd_train(args) -> int:
    models = [_parse_model(spec) for spec in args.model]
    tp = cost.throughput(achieved=args.flops_per_gpu, gpu=args.gpu, peak=args.peak_flops,
                         mfu=args.mfu)
    results = []
    for name, n, d, shape in models:
        ms = None if shape is None else cost.ModelShape(*shape,
                                                        tied_embeddings=args.tied_embeddings)
        results.append(cost.training_cost(name, n, d, tp, gpus=args.gpus, price=args.price,
                                          shape=ms))
    if args.json:
        _print_json({"throughput": tp.to_dict(), "models": [r.to_dict() for r in results]})
        return 0
    width = max(15, *(len(r.name) for r in results))

    def row(r, c, h, days, usd):
        # Whole GPU-hours and dollars (the issue's table); small runs keep 3 significant digits.
        hours = f"{h:>9.0f}" if h >= 100 else f"{h:>9.3g}"
        line = f"{r.name:<{width}} C = {c:.2e}  hours = {hours}  days = {days:>5.1f}"
        return line + ("" if usd is None else
                       f"  US$ {usd:>9.0f}" if usd >= 100 else f"  US$ {usd:>9.2f}")

    for r in results:
        print(row(r, r.compute, r.gpu_hours, r.days, r.usd))
    exact = [r for r in results if r.compute_exact is not None]
    if exact:
        print("exact count from the shape (attention and output layer included):")
        for r in exact:
            print(row(r, r.compute_exact, r.gpu_hours_exact, r.days_exact, r.usd_exact)
                  + f"  ({r.compute_exact / r.compute:.3f} x 6ND)")
    g = results[0].gpus
    units = (f"units: C in FLOPs; hours in GPU-hours at {cost.sci(tp.flops_per_s, 3)} FLOP/s "
             f"achieved per GPU; days wall-clock on {g} GPU{'s' if g != 1 else ''}")
    if results[0].price_per_gpu_hour is not None:
        units += f"; US$ at {results[0].price_per_gpu_hour:g} per GPU-hour"
    print(units)
    _assumptions(a for r in results for a in r.assumptions)
    return 0


def cmd_inference(args) -> int:
    res = cost.inference_cost(args.params, args.tokens_per_request, args.requests,
                              training_tokens=args.tokens)
    if args.json:
        _print_json(res.to_dict())
        return 0
    t = res.tokens_per_request
    print(f"inference: 2 N = 2 x {cost.sci(res.n_params)} = {cost.sci(res.flops_per_token)} "
          f"FLOPs per generated token; {cost.sci(res.flops_per_request)} FLOPs per "
          f"{t:g}-token request")
    if res.training_flops is not None:
        print(f"training:  6 N D = 6 x {cost.sci(res.n_params)} x {cost.sci(res.training_tokens)} "
              f"= {cost.sci(res.training_flops)} FLOPs")
    req_w = max(len(cost.sci(r.requests, 1)) for r in res.rows)
    for r in res.rows:
        line = f"{cost.sci(r.requests, 1):>{req_w}} requests -> {cost.sci(r.flops)} FLOPs"
        if r.ratio_to_training is not None:
            line += f"  ({cost.format_ratio(r.ratio_to_training)}x training)"
        print(line)
    if res.crossover_requests is not None:
        print(f"inference overtakes training after {cost.sci(res.crossover_requests)} requests "
              f"({cost.sci(res.crossover_tokens)} generated tokens = 3 D)")
    print("units: N in parameters, D and request lengths in tokens, compute in FLOPs")
    _assumptions(res.assumptions)
    return 0


def cmd_inference_aware(args) -> int:
    law, label = _law(args)
    if args.loss is not None:
        target = args.loss
        how = "given"
    else:
        c = cost.positive(args.compute, "--compute")
        target = float(law.optimal_loss(c))
        how = f"the law's best loss at C = {cost.sci(c, 3)} FLOPs, training only"
    res = cost.inference_aware_optimum(law, target, args.inference_tokens, law_label=label)
    if args.json:
        _print_json(res.to_dict())
        return 0
    _default_law_note(args)
    print(f"inference-aware optimum (Sardana et al. 2024), law {label}, target loss "
          f"{res.target_loss:.4f} ({how})")
    print(f"training-only optimum: N = {cost.sci(res.training_only_n, 3)}, "
          f"D = {cost.sci(res.training_only_tokens, 3)}, "
          f"{res.training_only_tokens_per_param:.1f} tokens/param, "
          f"C = {cost.sci(res.training_only_compute, 3)} FLOPs")
    print(f"{'D_inf':>8} {'N':>9} {'D':>9} {'D/N':>8} {'train':>9} {'infer':>9} {'total':>9} "
          f"{'saving':>7}")
    for p in res.points:
        print(f"{cost.sci(p.inference_tokens, 2) if p.inference_tokens else '0':>8} "
              f"{cost.sci(p.n_params, 3):>9} {cost.sci(p.tokens, 3):>9} "
              f"{p.tokens_per_param:>8.1f} {cost.sci(p.training_flops, 3):>9} "
              f"{cost.sci(p.inference_flops, 3) if p.inference_flops else '0':>9} "
              f"{cost.sci(p.total_flops, 3):>9} {100 * p.saving:>6.1f}%")
    print("units: D_inf generated tokens over the model's life; N parameters; D training "
          "tokens; D/N tokens per parameter; train, infer, total in FLOPs; saving against the "
          "training-only optimum serving the same D_inf")
    worst = max(p.cross_check for p in res.points)
    agree = "within 1e-6" if worst < 1e-6 else f"to {worst:.1e}"
    print(f"check: the minimiser over log N and the Lagrange condition agree {agree} "
          "(relative, in N)")
    _assumptions(res.assumptions)
    return 0


def cmd_rules(args) -> int:
    law, label = _law(args)
    res = cost.rules_of_thumb(args.compute, fixed_params=args.params,
                              tokens_per_param=args.tokens_per_param, law=law, law_label=label)
    if args.json:
        _print_json(res.to_dict())
        return 0
    k = res.tokens_per_param_rule
    rule = res.rows[0]
    _default_law_note(args)
    print(f"C = {cost.sci(res.compute, 3)} FLOPs (C = 6 N D)")
    print(f"rule D = {k:g} N:  N* = sqrt(C/{6 * k:g}) = {cost.sci(rule.n_params)} parameters, "
          f"D = {cost.sci(rule.tokens)} tokens")
    if args.params is not None:
        fixed = res.rows[1]
        print(f"Kaplan-style N = {cost.sci(fixed.n_params)}:  D = C/(6N) = {cost.sci(fixed.tokens)} "
              f"tokens, {fixed.tokens_per_param:.2g} tokens/param, "
              f"{fixed.flops_per_generated_token / rule.flops_per_generated_token:.2f}x the "
              f"rule's FLOPs per generated token")
    lw = max(len(r.label) for r in res.rows)
    print(f"{'allocation':<{lw}} {'N':>8} {'D':>8} {'D/N':>7} {'FLOPs/token':>11} "
          f"{'x rule':>6} {'loss':>7}")
    for r in res.rows:
        print(f"{r.label:<{lw}} {cost.sci(r.n_params):>8} {cost.sci(r.tokens):>8} "
              f"{r.tokens_per_param:>7.1f} {cost.sci(r.flops_per_generated_token):>11} "
              f"{r.flops_per_generated_token / rule.flops_per_generated_token:>6.2f} "
              f"{r.loss:>7.4f}")
    print("units: N parameters; D training tokens; D/N tokens per parameter; FLOPs per "
          "generated token (2 N); loss as predicted by the law")
    _assumptions(res.assumptions)
    return 0


def cmd_memory(args) -> int:
    sections = {}
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
    if args.json:
        _print_json({k: v.to_dict() for k, v in sections.items()})
        return 0
    assumptions = []
    if "weights" in sections:
        w = sections["weights"]
        print(f"weights: {cost.sci(w.total_params)} parameters x {w.bytes_per_param:g} bytes "
              f"({w.dtype}) = {cost.format_bytes(w.weight_bytes)}")
        if w.active_params != w.total_params:
            print(f"compute: {cost.sci(w.active_params)} of {cost.sci(w.total_params)} "
                  f"parameters active per token = {100 * w.active_fraction:.0f}% of the dense "
                  f"equivalent ({cost.sci(w.flops_per_token_active)} vs "
                  f"{cost.sci(w.flops_per_token_dense)} FLOPs per token)")
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
    _assumptions(assumptions)
    return 0

