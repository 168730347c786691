"""`scaling tune CONFIG`: each shape's learning rate measured by a short sweep, and lr_opt(N) fitted.

    scaling tune configs/tiny.yaml --dry-run                  # the tuning runs, trained nothing
    scaling tune configs/tiny.yaml --tokens 5e5 --lrs 1e-3,2e-3,4e-3,8e-3,1.6e-2

Trains `<name>-tune` into the run store (scaling.tuning.shapes), prints per shape the rates tried,
their final losses and the rate chosen, fits lr_opt = c N^k over the shapes whose optimum lies
inside their grid (scaling.tuning.lr_law, with a 95% interval), and writes into --out: tune.json
(the table, the fit, the budget and where they came from) and `<name>-tuned.yaml` (the config at
the chosen rates) and tune.png/.svg (loss against lr per shape; lr_opt against N, drawn by
scaling.report.tuning), the three as one unit by scaling.tuning.files.write_tuning. --out is checked before any training
(scaling.tuning.files.check_tuning_output): a `<name>-tuned.yaml` that tune did not write is replaced only with
--force, the input config never. This module parses, calls and prints.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from scaling.cli.sweep import console, require_torch, resumable, show_plan
from scaling.config import SweepConfig, load_config
from scaling.errors import UsageError
from scaling.formats import positive, sci

if TYPE_CHECKING:
    from scaling.sweeps.job import Job


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "tune", help="measure each shape's best learning rate; fit lr_opt against N",
        description="For each shape of the config's grid, train a log grid of learning rates at one token "
                    "budget (into the run store, as the sweep `<name>-tune`), choose the rate of lowest "
                    "final loss (a parabola in log lr through the best rate and its neighbours), fit "
                    "lr_opt = c N^k, and write tune.json, a tuned config and a figure.",
        epilog="examples:\n"
               "  scaling tune configs/tiny.yaml --dry-run            # the tuning runs and their wall time\n"
               "  scaling tune configs/tiny.yaml                      # 7 rates per shape at the smallest D\n"
               "  scaling tune configs/tiny.yaml --budgets --dry-run  # at the sweep's own cells: lr = c N^p D^q")
    p.add_argument("config", type=Path, metavar="CONFIG", help="sweep YAML, e.g. configs/tiny.yaml")
    p.add_argument("--tokens", help="token budget of every tuning run (default: the smallest D of the sweep's runs)")
    p.add_argument("--lrs", help="comma-separated learning rates, at least 3 (default: 7 from 1e-3 to 3e-2)")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="run store root (default: runs)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="token cache root (default: $SCALING_CACHE_DIR or ~/.cache/scaling)")
    p.add_argument("--out", type=Path, metavar="DIR", help="output folder (default: fits/<name>-tune)")
    p.add_argument("--budgets", action="store_true",
                   help="tune at the sweep's own cells (shape and D) instead of one token budget, and fit "
                        "lr_opt = c N^p D^q (scaling.tuning.budgets)")
    p.add_argument("--cells", default="corners", choices=("corners", "all"),
                   help="with --budgets: the 3 cells spanning the plan's N and D (default), or every cell")
    p.add_argument("--seeds", help="with --budgets: comma-separated training seeds; each rate is trained once "
                                   "per seed and judged by its mean loss (default: the config's seed alone)")
    p.add_argument("--beta2", help="with --budgets: comma-separated AdamW beta2 values to tune the cells at; the one "
                                   "whose cells reach the lowest mean loss goes into the tuned config (default: the "
                                   "config's)")
    p.add_argument("--force", action="store_true",
                   help="replace a <name>-tuned.yaml in --out that tune did not write (never the input config)")
    p.add_argument("--dry-run", action="store_true", help="print the tuning runs; train and write nothing")
    p.add_argument("--json", action="store_true", help="print tune.json instead of the tables (no line per run)")
    p.set_defaults(func=cmd_tune)


def parse_flags(args: argparse.Namespace) -> tuple[SweepConfig, tuple[float, ...], int | None]:
    """The config, the rates and the budget, each checked under its flag's name."""
    from scaling.tuning.shapes import DEFAULT_LRS, learning_rates

    cfg = load_config(args.config)
    try:
        lrs = learning_rates(args.lrs.split(",")) if args.lrs is not None else DEFAULT_LRS
    except UsageError as exc:
        raise UsageError(f"--lrs {args.lrs!r}: {exc}") from None
    tokens = positive(args.tokens, "--tokens", integer=True) if args.tokens is not None else None
    return cfg, lrs, tokens


class LineReporter:
    """One line per run as it ends, with its learning rate (the run id holds it only as a digest)."""

    def begin(self, jobs: list[Job]) -> None:
        console.print(f"{len(jobs)} tuning runs to train")

    def started(self, job: Job) -> None: pass

    def progress(self, job: Job, tokens_done: int, tokens_total: int, tokens_per_s: float) -> None: pass

    def finished(self, job: Job, summary: dict) -> None:
        loss = summary.get("final_val_loss")
        console.print(f"{job.spec.run_id}  lr {sci(job.spec.lr)}: {summary['status']}"
                      + (f", val loss {loss:.4f}" if loss is not None else "") + f", {summary.get('wall_s', 0):.0f} s")


def parse_seeds(text: str) -> list[int]:
    from scaling.tuning.run import training_seeds

    try:
        return training_seeds([int(s) for s in text.split(",")])
    except (ValueError, UsageError):
        raise UsageError(f"--seeds {text!r}: give distinct non-negative integers, comma-separated") from None


def parse_beta2(text: str) -> list[float]:
    from scaling.tuning.run import beta2_values

    values = [positive(item, "--beta2") for item in text.split(",")]
    try:
        return beta2_values(values)
    except UsageError:
        raise UsageError(f"--beta2 {text!r}: each value must lie in (0, 1)") from None


def checked_out(args: argparse.Namespace, cfg: SweepConfig) -> Path:
    """--out (default fits/<name>-tune), checked before any training rather than after it."""
    from scaling.tuning.files import check_tuning_output

    out = args.out or Path("fits") / f"{cfg.name}-tune"
    check_tuning_output(out, args.config, cfg.name, args.force)
    return out


def cmd_tune_budgets(args: argparse.Namespace) -> int:
    from scaling.tuning.budgets import budget_sweep_name, select_cells, sweep_cells

    cfg = load_config(args.config)
    out = checked_out(args, cfg)
    seeds = None if args.seeds is None else parse_seeds(args.seeds)
    betas = None if args.beta2 is None else parse_beta2(args.beta2)
    cells = select_cells(sweep_cells(cfg), args.cells)
    if args.dry_run and args.json:
        print(json.dumps([{"run_id": run.run_id, "lr": run.spec.lr, "flops_exact": run.flops("exact")}
                          for run in cells], indent=2))
        return 0
    if args.dry_run:
        console.print(f"tune {cfg.name} at its budgets: {len(cells)} cells x 3 rates (0.71, 1 and 1.41 x each cell's "
                      "rate; one rung further, twice at most, where the best is at an edge)"
                      + (f" x beta2 {', '.join(f'{b:g}' for b in betas)}" if betas else "") + ", into "
                      f"{args.runs_dir / budget_sweep_name(cfg)}")
        for run in cells:
            console.print(f"  {run.run_id}  lr {sci(run.spec.lr)}  {sci(run.flops('exact'))} FLOPs each")
        return 0
    from scaling.tuning.budgets import format_cells
    from scaling.tuning.files import write_budget_tuning
    from scaling.tuning.run import tune

    with resumable("tune") as stopped:          # training loads torch: not for a dry run
        tried = tune(cfg, budgets=True, cells=args.cells, seeds=seeds, beta2=betas, runs_dir=args.runs_dir,
                     cache_dir=args.cache_dir)
    if stopped.code is not None:
        return stopped.code
    record, tuned, stale = write_budget_tuning(out, args.config, tried, args.force)
    code = 0 if tried.chosen.law else 1
    if args.json:
        print(record.read_text(), end="")   # tune.json: every cell, each beta2's law, the choice
        return code
    for tuning in tried.tunings:
        print(format_cells(tuning))
        print(tuning.law.describe() if tuning.law else f"lr law not fitted: {tuning.why}")
    if len(tried.tunings) > 1:
        print(f"beta2 {tried.chosen.beta2:g}: the lowest mean loss over the cells at their chosen rates")
    print(tried.describe_cost())
    removed = f"; removed the earlier tune's {stale}, whose rates are not this tuning's" if stale else ""
    print(f"wrote {record}" + (f", {tuned}" if tuned else f"; no tuned config, as no lr law was fitted{removed}"))
    return code


def cmd_tune(args: argparse.Namespace) -> int:
    if not args.dry_run:
        require_torch("tune")
    from scaling.tuning.run import check_mode
    from scaling.tuning.shapes import tuning_config, tuning_tokens

    check_mode(args.budgets, {"tokens": args.tokens, "lrs": args.lrs, "seeds": args.seeds, "beta2": args.beta2,
                              "cells": args.cells != "corners" or None}, spell=lambda option: f"--{option}")
    if args.budgets:
        return cmd_tune_budgets(args)
    cfg, lrs, tokens = parse_flags(args)
    out = checked_out(args, cfg)
    if args.dry_run:
        tune_cfg = tuning_config(cfg, lrs, tokens)
        if not args.json:
            console.print(f"tune {cfg.name}: {len(tune_cfg.grid.models) // len(lrs)} shapes x {len(lrs)} learning "
                          f"rates ({', '.join(sci(x) for x in lrs)}) at {tuning_tokens(tune_cfg):,} tokens each, "
                          f"into {args.runs_dir / tune_cfg.name}")
        show_plan(tune_cfg, args)
        return 0
    from scaling.report.tuning import figure_files
    from scaling.tuning.files import write_tuning
    from scaling.tuning.lr_law import format_table
    from scaling.tuning.run import tune

    with resumable("tune") as stopped:          # training loads torch: not for a dry run
        # --json: stdout holds the JSON alone, so no line per run
        tuned = tune(cfg, lrs=lrs, tokens=tokens, runs_dir=args.runs_dir, cache_dir=args.cache_dir,
                     reporter=None if args.json else LineReporter())
    if stopped.code is not None:
        return stopped.code
    tuning, law = tuned.tuning, tuned.law
    record, tuned_path = write_tuning(out, args.config, tuning, law, args.force,
                                      figures=figure_files(tuning.shapes, law.power))
    png = out / "tune.png"
    code = 1 if tuned.failed else 0
    if args.json:
        print(record.read_text(), end="")   # tune.json: each shape's rates and losses, the law
        return code
    console.print(f"{tuning.sweep_dir}: trained {tuning.trained}, already done {tuning.skipped}; "
                  f"{tuning.tokens:,} tokens per run")
    print(format_table(tuning.shapes))
    print(law.describe())
    print(f"wrote {record}, {tuned_path}, {png}")
    return code
