"""`scaling cost ...`: compute, time, money and memory sums, each printed with its assumptions.

    scaling cost train            C = 6 N D (and the exact count from a shape), GPU-hours, days, US$
    scaling cost inference        2 N per generated token over a model's life, against training
    scaling cost inference-aware  the N, D minimising training + inference FLOPs at a target loss
    scaling cost rules            D = 20 N and a fixed-N split beside a law's optimum
    scaling cost memory           weights by dtype, attention scores n^2, SSM state, n = d crossover

Thin layer over `scaling.cost`: parse, call, print. Numbers are parsed here (not by argparse)
so that a bad value is a UsageError (exit 2, one line saying what is allowed). `--json` prints
the result dataclasses, units and assumptions included. The library's messages name quantities;
where a rule is about which flags go together, it is checked here first, in flag names.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import replace

from scaling import cost
from scaling.cli import cost_memory
from scaling.cli.cost_common import NumberArgs, print_assumptions, print_json
from scaling.cli.law_choice import FIT, add_fit_option
from scaling.errors import UsageError
from scaling.formats import positive
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import REFERENCES
from scaling.laws.optimal.allocation import check_compute, check_size
from scaling.laws.results.law_choice import LawChoice, choose_law


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "cost", help="compute, time, money and memory of training and inference",
        description="Back-of-the-envelope planning sums, each printed with its units and the "
                    "assumptions that produced it.",
        epilog="examples:\n"
               "  scaling cost train --model Chinchilla:70e9:1.4e12 --gpu h100 --mfu 0.4 --gpus 1024\n"
               "  scaling cost rules --compute 1e21 1e23    # D = 20 N beside the law's optimum\n"
               "  scaling cost memory --params 7e9          # the weights in bf16\n"
               "each subcommand's flags and examples: scaling cost SUBCOMMAND --help")
    sub = group.add_subparsers(dest="cost_command", required=True, metavar="SUBCOMMAND",
                               parser_class=NumberArgs)
    for add in (_add_train, _add_inference, _add_inference_aware, _add_rules, cost_memory.add_memory):
        add(sub)


def _add_train(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train", help="training FLOPs, GPU-hours, wall-clock days and dollars for some models",
        description="C = 6 N D per model (and the exact count when a shape is given); "
                    "GPU-hours = C / achieved FLOP/s / 3600; days = GPU-hours / GPUs / 24; "
                    "US$ = GPU-hours x price.",
        epilog="examples:\n"
               "  scaling cost train --model Chinchilla:70e9:1.4e12 --gpu h100 --mfu 0.4 --gpus 1024 --price 2\n"
               "  scaling cost train --model a:1e9:2e10 --model b:3e9:6e10 --flops-per-gpu 400e12   # two models")
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


def _add_inference(sub: argparse._SubParsersAction) -> None:
    inf = sub.add_parser(
        "inference", help="lifetime inference FLOPs and when they overtake training",
        description="C_inf = 2 N FLOPs per generated token, times tokens per request, times "
                    "requests; with --tokens, against training's 6 N D.",
        epilog="examples:\n"
               "  scaling cost inference --params 70e9 --tokens-per-request 500 --requests 1e6 1e9\n"
               "  scaling cost inference --params 70e9 --tokens-per-request 500 --requests 1e9 --tokens 1.4e12"
               "   # beside training")
    inf.add_argument("--params", required=True, help="parameters N (active ones for a MoE)")
    inf.add_argument("--tokens-per-request", required=True, help="generated tokens per request")
    inf.add_argument("--requests", nargs="+", required=True, help="request counts, e.g. 1e6 1e9")
    inf.add_argument("--tokens", default=None, help="training tokens D (to compare with training)")
    inf.add_argument("--json", action="store_true", help="print JSON instead of a table")
    inf.set_defaults(func=cmd_inference)


def _add_inference_aware(sub: argparse._SubParsersAction) -> None:
    aware = sub.add_parser(
        "inference-aware", help="N, D minimising training + inference FLOPs at a target loss",
        description="Sardana et al. 2024 (arXiv:2401.00448): minimise 6 N D + 2 N D_inf "
                    "subject to L(N, D) = target, for each expected number of generated tokens.",
        epilog="examples:\n"
               "  scaling cost inference-aware --compute 1e23                 # the target: the law's best loss at C\n"
               "  scaling cost inference-aware --loss 2.0 --fit fits/tiny     # your own law's units\n"
               "  scaling cost inference-aware --compute 1e23 --inference-tokens 0 1e12 1e13")
    _law_args(aware)
    target = aware.add_mutually_exclusive_group(required=True)
    target.add_argument("--loss", default=None, help="target loss (in the law's units)")
    target.add_argument("--compute", nargs="+", default=None, metavar="C",
                        help="training-only budget C in FLOPs: the target is the law's best loss at C; "
                             "several give a table each (--json: a list)")
    aware.add_argument("--inference-tokens", nargs="+",
                       default=["0", "1e10", "1e11", "1e12", "1e13", "1e14", "1e15"],
                       help="generated tokens over the model's life (default: 0 1e10 ... 1e15)")
    aware.add_argument("--json", action="store_true", help="print JSON instead of a table")
    aware.set_defaults(func=cmd_inference_aware)


def _add_rules(sub: argparse._SubParsersAction) -> None:
    rules = sub.add_parser(
        "rules", help="D = 20 N and a fixed-N (Kaplan-style) split beside a law's optimum",
        description="At C FLOPs: the rule D = k N (N = sqrt(C / 6k)), a fixed N spent on "
                    "D = C / 6N, and the law's compute-optimal N, D, each with its predicted "
                    "loss and cost per generated token.",
        epilog="examples:\n"
               "  scaling cost rules --compute 1e21 1e23                 # D = 20 N beside Chinchilla's optimum\n"
               "  scaling cost rules --compute 1e23 --params 1e11        # and 1e11 parameters, Kaplan-style\n"
               "  scaling cost rules --compute 1e23 --fit fits/tiny      # beside your own law's optimum")
    rules.add_argument("--compute", nargs="+", required=True, metavar="C",
                       help="training compute C in FLOPs; several give a block each (--json: a list)")
    rules.add_argument("--params", default=None,
                       help="a fixed N to spend C on Kaplan-style (e.g. 1e11)")
    rules.add_argument("--tokens-per-param", default="20", help="the rule's D / N (default 20)")
    _law_args(rules)
    rules.add_argument("--json", action="store_true", help="print JSON instead of a table")
    rules.set_defaults(func=cmd_rules)


def _throughput_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--flops-per-gpu", default=None,
                        help="achieved FLOP/s per GPU (utilisation included), e.g. 400e12")
    parser.add_argument("--gpu", default=None,
                        help=f"accelerator preset, dense peak: {', '.join(cost.GPU_PRESETS)} "
                             "(needs --mfu)")
    parser.add_argument("--peak-flops", default=None, help="dense peak FLOP/s per GPU (needs --mfu)")
    parser.add_argument("--mfu", default=None, help="model-FLOPs utilisation in (0, 1], e.g. 0.4")


def _law_args(parser: argparse.ArgumentParser) -> None:
    laws = [k for k, ref in REFERENCES.items() if ref.law is not None]
    parser.add_argument("--law", default=None,
                        help=f"published law: {', '.join(laws)} (default chinchilla)")
    add_fit_option(parser, "your own fit's law (a fit folder, or a fit.json with 'params': E, A, B, alpha, beta)")


# ----------------------------------------------------------------------------- helpers

def _law(args: argparse.Namespace) -> LawChoice:
    """The law of --fit or --law, of the Chinchilla form: these sums are that form's (its closed-form
    optimum, the Lagrange condition). The median of the forms (the default) plans by the fitted law's
    allocation, so it is costed by that law, and says so. A fit whose `--form` chose another law to
    predict and plan with is costed by that law where it is of this form (tied), and refused where it
    is not (kaplan, farseer), rather than costed by a law it does not plan with."""
    choice = choose_law(args.fit, args.law, parametric=True)
    fit = choice.fit
    if fit is None:
        return choice
    if (entry := fit.form_entry) is None:
        return choice if fit.median is None else replace(
            choice, label=f"{choice.label} (the allocation the median of the forms plans by)")
    if entry.params is not None and isinstance(entry.law, Law):
        return replace(choice, law=entry.law, name=f"{choice.name} ({fit.form} form)",
                       label=f"{choice.label}, its {fit.form} form")
    raise UsageError(f"`scaling cost` needs a law of the Chinchilla form, E + A/N^alpha + B/D^beta; the fit {args.fit} "
                     f"predicts and plans with the {fit.form} form (`scaling fit --form {fit.form}`): refit without "
                     "--form, or "
                     f"see its optimum with `scaling plan --fit {args.fit}`")


def _law_note(choice: LawChoice) -> None:
    """Which law, when it is the default; a fit's verdict before any number drawn from it."""
    if choice.is_default:
        print("law: the published chinchilla law (Hoffmann et al. 2022), by default; "
              f"--fit {FIT} for yours")
    if choice.fit is not None:
        from scaling.laws.results.summary import verdict_preamble  # late, as choose_law loads the fitter only for --fit

        print("\n".join(verdict_preamble(choice.fit)))


def _parse_model(spec: str) -> tuple[str, float, float, tuple[int, int, int, int] | None]:
    """NAME, N, D and, where given, the shape's LAYERS, D_MODEL, CONTEXT, VOCAB of one --model."""
    parts = spec.split(":")
    fmt = "NAME:N:D or NAME:N:D:LAYERS:D_MODEL:CONTEXT:VOCAB (e.g. 'GPT-3:175e9:300e9')"

    def numbers(items: Iterable[str]) -> list[float] | None:
        try:
            return [float(x) for x in items]
        except ValueError:
            return None

    shape_text: list[str] = []
    if len(parts) >= 7 and numbers(parts[-6:]) is not None:
        name, (n_text, d_text), shape_text = ":".join(parts[:-6]), parts[-6:-4], parts[-4:]
    elif len(parts) >= 3 and numbers(parts[-2:]) is not None:
        name, (n_text, d_text) = ":".join(parts[:-2]), parts[-2:]
    else:
        raise UsageError(f"--model {spec!r}: expected {fmt}")
    name = name.strip()
    if not name:
        raise UsageError(f"--model {spec!r}: the name is empty; expected {fmt}")
    # Past 1e30 a count is a unit slip: its FLOPs, hours and dollars would be stated as answers.
    n = check_size(positive(n_text, f"--model {name}: N"), f"--model {name}: N")
    d = check_size(positive(d_text, f"--model {name}: D"), f"--model {name}: D")
    if not shape_text:
        return name, n, d, None
    layers, d_model, context, vocab = (positive(v, f"--model {name}: {label}", integer=True)
                                       for v, label in zip(shape_text, ("LAYERS", "D_MODEL", "CONTEXT", "VOCAB")))
    return name, n, d, (layers, d_model, context, vocab)


def _throughput(args: argparse.Namespace) -> cost.Throughput:
    """`cost.throughput` from the flags, which go together as it requires: checked here so that
    the message names the flags."""
    given = [flag for flag, value in (("--flops-per-gpu", args.flops_per_gpu), ("--gpu", args.gpu),
                                      ("--peak-flops", args.peak_flops)) if value is not None]
    if len(given) != 1:
        raise UsageError(
            "give exactly one of --flops-per-gpu (achieved FLOP/s per GPU), --gpu PRESET "
            f"(one of {', '.join(cost.GPU_PRESETS)}) with --mfu, or --peak-flops with --mfu"
            + (f"; got {' and '.join(given)}" if given else ""))
    if args.flops_per_gpu is not None and args.mfu is not None:
        raise UsageError("--mfu applies to a peak (--gpu or --peak-flops); an achieved "
                         "--flops-per-gpu already includes utilisation")
    if args.flops_per_gpu is None and args.mfu is None:
        raise UsageError("a peak FLOP/s figure needs --mfu, the fraction of peak actually "
                         "achieved, in (0, 1]; large dense runs typically reach 0.3 to 0.5")
    if args.gpu is not None and args.gpu.strip().lower() not in cost.GPU_PRESETS:
        raise UsageError(f"unknown GPU preset {args.gpu!r}; known: {', '.join(cost.GPU_PRESETS)} "
                         "(or give --peak-flops)")
    return cost.throughput(achieved=args.flops_per_gpu, gpu=args.gpu, peak=args.peak_flops,
                           mfu=args.mfu)


# ----------------------------------------------------------------------------- commands

def cmd_train(args: argparse.Namespace) -> int:
    models = [_parse_model(spec) for spec in args.model]
    tp = _throughput(args)
    results = []
    for name, n, d, shape in models:
        ms = None if shape is None else cost.ModelShape(*shape, tied_embeddings=args.tied_embeddings)
        results.append(cost.training_cost(name, n, d, tp, gpus=args.gpus, price=args.price,
                                          shape=ms))
    if args.json:
        print_json({"throughput": tp.to_dict(), "models": [r.to_dict() for r in results]})
        return 0
    width = max(15, *(len(r.name) for r in results))

    def row(r: cost.TrainingCost, c: float, h: float, days: float, usd: float | None) -> str:
        # Whole GPU-hours and dollars (the issue's table); small runs keep 3 significant digits.
        hours = f"{h:>9.0f}" if h >= 100 else f"{h:>9.3g}"
        line = f"{r.name:<{width}} C = {c:.2e}  hours = {hours}  days = {days:>5.1f}"
        return line + ("" if usd is None else
                       f"  US$ {usd:>9.0f}" if usd >= 100 else f"  US$ {usd:>9.2f}")

    for r in results:
        print(row(r, r.compute, r.gpu_hours, r.days, r.usd))
    # A shape gives the exact count, its hours and days together.
    exact = [(r, r.compute_exact, r.gpu_hours_exact, r.days_exact) for r in results
             if r.compute_exact is not None and r.gpu_hours_exact is not None and r.days_exact is not None]
    if exact:
        print("exact count from the shape (attention and output layer included):")
        for r, compute_exact, hours_exact, days_exact in exact:
            print(row(r, compute_exact, hours_exact, days_exact, r.usd_exact)
                  + f"  ({compute_exact / r.compute:.3f} x 6ND)")
    g = results[0].gpus
    units = (f"units: C in FLOPs; hours in GPU-hours at {cost.fixed_sci(tp.flops_per_s, 3)} FLOP/s "
             f"achieved per GPU; days wall-clock on {g} GPU{'s' if g != 1 else ''}")
    if results[0].price_per_gpu_hour is not None:
        units += f"; US$ at {results[0].price_per_gpu_hour:g} per GPU-hour"
    print(units)
    print_assumptions(a for r in results for a in r.assumptions)
    return 0


def cmd_inference(args: argparse.Namespace) -> int:
    res = cost.inference_cost(args.params, args.tokens_per_request, args.requests,
                              training_tokens=args.tokens)
    if args.json:
        print_json(res.to_dict())
        return 0
    t = res.tokens_per_request
    print(f"inference: 2 N = 2 x {cost.fixed_sci(res.n_params)} = {cost.fixed_sci(res.flops_per_token)} "
          f"FLOPs per generated token; {cost.fixed_sci(res.flops_per_request)} FLOPs per "
          f"{t:g}-token request")
    if res.training_flops is not None and res.training_tokens is not None:    # (given together)
        print(f"training:  6 N D = 6 x {cost.fixed_sci(res.n_params)} x {cost.fixed_sci(res.training_tokens)} "
              f"= {cost.fixed_sci(res.training_flops)} FLOPs")
    req_w = max(len(cost.fixed_sci(r.requests, 1)) for r in res.rows)
    for r in res.rows:
        line = f"{cost.fixed_sci(r.requests, 1):>{req_w}} requests -> {cost.fixed_sci(r.flops)} FLOPs"
        if r.ratio_to_training is not None:
            line += f"  ({cost.format_ratio(r.ratio_to_training)}x training)"
        print(line)
    if res.crossover_requests is not None and res.crossover_tokens is not None:
        print(f"inference overtakes training after {cost.fixed_sci(res.crossover_requests)} requests "
              f"({cost.fixed_sci(res.crossover_tokens)} generated tokens = 3 D)")
    print("units: N in parameters, D and request lengths in tokens, compute in FLOPs")
    print_assumptions(res.assumptions)
    return 0


def cmd_inference_aware(args: argparse.Namespace) -> int:
    choice = _law(args)
    assert choice.law is not None, "choose_law(parametric=True) refuses a law without L(N, D)"
    law, label = cost.check_allocation(choice.law, choice.name), choice.name
    targets = [(args.loss, "given")] if args.loss is not None else []
    for text in args.compute or ():
        c = check_compute(positive(text, "--compute"))     # past 1e30 FLOPs the best loss is E itself
        targets.append((float(law.optimal_loss(c)), f"the law's best loss at C = {cost.fixed_sci(c, 3)} FLOPs, "
                                                    "training only"))
    results = [(cost.inference_aware_optimum(law, target, args.inference_tokens, law_label=label), how)
               for target, how in targets]
    if args.json:
        print_json(results[0][0].to_dict() if len(results) == 1 else [res.to_dict() for res, _ in results])
        return 0
    _law_note(choice)
    for i, (res, how) in enumerate(results):
        if i:
            print()
        print_inference_aware(res, label, how)
    if choice.fit is not None:
        print("no intervals: the inference-aware optimum is computed for the fit's law only; `scaling plan "
              "--fit` gives the training-only optimum with its intervals")
    print_assumptions(a for res, _ in results for a in res.assumptions)
    return 0


def print_inference_aware(res: cost.InferenceAwareOptimum, label: str, how: str) -> None:
    """One target loss's table: the optimum at each inference demand beside the training-only one."""
    print(f"inference-aware optimum (Sardana et al. 2024), law {label}, target loss "
          f"{res.target_loss:.4f} ({how})")
    print(f"training-only optimum: N = {cost.fixed_sci(res.training_only_n, 3)}, "
          f"D = {cost.fixed_sci(res.training_only_tokens, 3)}, "
          f"{res.training_only_tokens_per_param:.1f} tokens/param, "
          f"C = {cost.fixed_sci(res.training_only_compute, 3)} FLOPs")
    print(f"{'D_inf':>8} {'N':>9} {'D':>9} {'D/N':>8} {'train':>9} {'infer':>9} {'total':>9} "
          f"{'saving':>7}")
    for p in res.points:
        print(f"{cost.fixed_sci(p.inference_tokens, 2) if p.inference_tokens else '0':>8} "
              f"{cost.fixed_sci(p.n_params, 3):>9} {cost.fixed_sci(p.tokens, 3):>9} "
              f"{p.tokens_per_param:>8.1f} {cost.fixed_sci(p.training_flops, 3):>9} "
              f"{cost.fixed_sci(p.inference_flops, 3) if p.inference_flops else '0':>9} "
              f"{cost.fixed_sci(p.total_flops, 3):>9} {100 * p.saving:>6.1f}%")
    print("units: D_inf generated tokens over the model's life; N parameters; D training "
          "tokens; D/N tokens per parameter; train, infer, total in FLOPs; saving against the "
          "training-only optimum serving the same D_inf")
    worst = max(p.cross_check for p in res.points)
    agree = "within 1e-6" if worst < 1e-6 else f"to {worst:.1e}"
    print(f"check: the minimiser over log N and the Lagrange condition agree {agree} "
          "(relative, in N)")


def cmd_rules(args: argparse.Namespace) -> int:
    choice = _law(args)
    law, label = choice.law, choice.name
    results = [cost.rules_of_thumb(c, fixed_params=args.params, tokens_per_param=args.tokens_per_param, law=law,
                                   law_label=label) for c in args.compute]
    if args.json:
        print_json(results[0].to_dict() if len(results) == 1 else [res.to_dict() for res in results])
        return 0
    _law_note(choice)
    for i, res in enumerate(results):
        if i:
            print()
        print_rules(res, choice, args.params is not None)
    print_assumptions(a for res in results for a in res.assumptions)
    return 0


def print_rules(res: cost.RulesCheck, choice: LawChoice, fixed_n: bool) -> None:
    """One budget's block: the rule D = k N, a fixed N if given, the law's optimum, and its intervals."""
    law = choice.law
    k = res.tokens_per_param_rule
    rule = res.rows[0]
    print(f"C = {cost.fixed_sci(res.compute, 3)} FLOPs (C = 6 N D)")
    if law is not None and not law.flops.is_six_n:
        print(f"note: the fit's own optimum spends C as {law.flops.describe()}; the rules below count 6 N D")
    print(f"rule D = {k:g} N:  N* = sqrt(C/{6 * k:g}) = {cost.fixed_sci(rule.n_params)} parameters, "
          f"D = {cost.fixed_sci(rule.tokens)} tokens")
    if fixed_n:
        fixed = res.rows[1]
        print(f"Kaplan-style N = {cost.fixed_sci(fixed.n_params)}:  D = C/(6N) = {cost.fixed_sci(fixed.tokens)} "
              f"tokens, {fixed.tokens_per_param:.2g} tokens/param, "
              f"{fixed.flops_per_generated_token / rule.flops_per_generated_token:.2f}x the "
              f"rule's FLOPs per generated token")
    lw = max(len(r.label) for r in res.rows)
    print(f"{'allocation':<{lw}} {'N':>8} {'D':>8} {'D/N':>7} {'FLOPs/token':>11} "
          f"{'x rule':>6} {'loss':>7}")
    for r in res.rows:
        print(f"{r.label:<{lw}} {cost.fixed_sci(r.n_params):>8} {cost.fixed_sci(r.tokens):>8} "
              f"{r.tokens_per_param:>7.1f} {cost.fixed_sci(r.flops_per_generated_token):>11} "
              f"{r.flops_per_generated_token / rule.flops_per_generated_token:>6.2f} "
              f"{r.loss:>7.4f}")
    print("units: N parameters; D training tokens; D/N tokens per parameter; FLOPs per "
          "generated token (2 N); loss as predicted by the law")
    optimum = choice.fit.optimum_at(res.compute) if choice.fit is not None else None
    if optimum is not None:
        n_lo, n_hi, d_lo, d_hi = (cost.fixed_sci(x) for x in (*optimum.n, *optimum.d))
        print(f"the law's optimum, {100 * optimum.level:g}% bootstrap intervals: N [{n_lo}, {n_hi}], "
              f"D [{d_lo}, {d_hi}], D/N "
              f"[{optimum.tokens_per_param[0]:.3g}, {optimum.tokens_per_param[1]:.3g}], loss "
              f"[{optimum.loss[0]:.4f}, {optimum.loss[1]:.4f}] (with the runs' scatter)")
