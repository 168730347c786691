"""`scaling validate FIT --compute C`: train the model the fit recommends at C, and its two
neighbours at the same compute, and compare their losses with the law's prediction.

Thin layer over scaling.validation.run: the runs go to the store `<sweep>-validate` beside the
fit's run store, and the result to validate.json beside fit.json (or in --out), where `scaling
report` finds it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from scaling.cli.law_choice import FIT, FIT_HELP
from scaling.cli.sweep import RichReporter, console, progress_bars, resumable
from scaling.errors import UsageError
from scaling.formats import json_safe, positive
from scaling.laws.optimal.allocation import check_allocatable
from scaling.laws.results.fit_file import FILENAME, load_fit
from scaling.runs.store import check_output

if TYPE_CHECKING:
    from scaling.config import SweepConfig
    from scaling.sweeps.plan import PlannedRun
    from scaling.validation.result import Validation


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "validate", help="train the model a fit recommends, and two neighbours",
        description="At compute C: the sweep's model family's shape nearest the fit's N_opt, trained on "
                    "D = C/6N tokens with the sweep's recipe, and two neighbours (about N/2.5 and 2.5N) at "
                    "the same C. Prints each run's predicted loss with its 95% prediction interval beside "
                    "the observed one, and whether the predicted optimum beats both neighbours. A fit "
                    "whose verdict is 'not identified' is refused unless --force.",
        epilog="examples:\n"
               "  scaling validate fits/tiny --compute 6e12 --dry-run   # the three runs and their predictions\n"
               "  scaling validate fits/tiny --compute 6e12             # train them, into runs/tiny-validate")
    p.add_argument("fit", metavar=FIT, type=Path, help=FIT_HELP)
    p.add_argument("--compute", required=True, metavar="C",
                   help="training compute in FLOPs (C = 6ND); one budget, as validate.json holds one validation")
    p.add_argument("--config", type=Path, default=None,
                   help="the sweep's YAML (default: read back from the runs of the fit's store)")
    p.add_argument("--runs-dir", type=Path, default=None,
                   help="run store root (default: the one holding the fit's store, else runs)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="token cache root (default: $SCALING_CACHE_DIR or ~/.cache/scaling)")
    p.add_argument("--out", type=Path, default=None, help="where validate.json goes (default: beside fit.json)")
    p.add_argument("--force", action="store_true", help="validate a fit whose verdict is 'not identified'")
    p.add_argument("--dry-run", action="store_true", help="print the three runs and predictions; train nothing")
    p.add_argument("--json", action="store_true",
                   help="print validate.json's content instead of a table (with --dry-run: the planned runs, "
                        "their predictions and estimated wall times)")
    p.set_defaults(func=cmd_validate)


def estimate(vcfg: SweepConfig, runs: list[PlannedRun], timed: Path) -> tuple[list[float], str, int, float]:
    """Each run's estimated wall time (from the FLOP/s of the finished runs in the store `timed`),
    what that rests on, the runs at once, and the wall time of all of them."""
    from scaling.sweeps.estimates import estimate_walls, makespan, sweep_workers

    walls, basis = estimate_walls(runs, timed)
    workers, _ = sweep_workers(vcfg, runs)
    return walls, basis, workers, makespan(sorted(walls, reverse=True), workers)


def show_dry_run(planned: Validation, walls: list[float], basis: str, workers: int, total: float,
                 as_json: bool) -> None:
    """The planned runs and their predictions: as validate.json would hold them before training, with
    the wall-time estimates of `scaling sweep --dry-run --json` (est_wall_s, wall_basis, workers);
    else as the table and one line of estimate."""
    from scaling.validation.result import format_validation

    if as_json:
        shown = planned.to_json()
        shown["runs"] = [{**run, "est_wall_s": wall} for run, wall in zip(shown["runs"], walls)]
        shown.update(wall_basis=basis, workers=workers, est_wall_s=total)
        print(json.dumps(json_safe(shown), indent=2))
        return
    print("\n".join(format_validation(planned)))
    console.print(f"est. wall {total / 60:.1f} min with {workers} run{'s' * (workers > 1)} at a time "
                  f"(wall times from {basis})")


def cmd_validate(args: argparse.Namespace) -> int:
    from scaling.validation.result import format_validation, validation_path, write_validation
    from scaling.validation.run import fit_store, prepare, recipe, runs_root, validate

    fit_path = args.fit / FILENAME if args.fit.is_dir() else args.fit
    fit = load_fit(fit_path)
    check_allocatable(fit.law, f"fit {fit_path}")    # no optimum to validate without one
    compute = positive(args.compute, "--compute (FLOPs, e.g. 1e13)")
    out = validation_path(args.out or fit_path.parent)
    check_output(out.parent, [out.name])             # before the training, not after it
    if out.exists() and out.samefile(fit_path):
        raise UsageError(f"--out {args.out}: validate.json would replace the fit it validates, {fit_path}")
    cfg = recipe(fit, args.config)
    store = fit_store(fit)
    runs_dir = runs_root(fit, args.runs_dir)
    if args.dry_run:
        vcfg, runs, planned = prepare(fit, cfg, compute, runs_dir=runs_dir, force=args.force, fit_path=str(fit_path))
        show_dry_run(planned, *estimate(vcfg, runs, store or runs_dir / vcfg.name), as_json=args.json)
        return 0
    with resumable("validate") as stopped, progress_bars() as bars:
        result = validate(fit, cfg, compute, runs_dir=runs_dir, cache_dir=args.cache_dir, force=args.force,
                          fit_path=str(fit_path), reporter=RichReporter(bars))
    if stopped.code is not None:
        return stopped.code
    path = write_validation(out, result)
    if args.json:
        print(json.dumps(json_safe(result.to_json()), indent=2))
        return 0
    print("\n".join(format_validation(result)))
    print(f"runs in {result.store}; wrote {path}")
    return 1 if any(r.status == "failed" for r in result.runs) else 0
