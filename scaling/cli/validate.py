"""`scaling validate FIT --compute C`: train the model the fit recommends at C, and its two
neighbours at the same compute, and compare their losses with the law's prediction.

Thin layer over scaling.validation.run: the runs go to the store `<sweep>-validate` beside the
fit's run store, and the result to validate.json beside fit.json (or in --out), where `scaling
report` finds it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scaling.cli.law_choice import FIT, FIT_HELP
from scaling.cli.sweep import RichReporter, console, progress_bars, require_torch, resumable
from scaling.errors import UsageError
from scaling.formats import json_safe, positive
from scaling.laws.optimal.allocation import check_allocatable
from scaling.laws.results.fit_file import FILENAME, load_fit
from scaling.runs.store import check_output

if TYPE_CHECKING:
    from scaling.config import SweepConfig
    from scaling.sweeps.plan import PlannedRun
    from scaling.sweeps.state import SweepState
    from scaling.validation.result import Validation


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "validate", help="train the model a fit recommends, and two neighbours",
        description="At compute C: the sweep's model family's shape nearest the fit's N_opt, trained on "
                    "the tokens C buys it in the fit's count of C (a shape's own FLOPs per token, as the sweep "
                    "counted them; 6N for a fit of 6ND) with the sweep's recipe, and two neighbours (about N/2.5 "
                    "and 2.5N) at the same C. Prints each run's predicted loss with its 95% prediction interval beside "
                    "the observed one, and whether the predicted optimum beats both neighbours. A fit "
                    "whose verdict is 'not identified' is refused unless --force.",
        epilog="examples:\n"
               "  scaling validate fits/tiny --compute 6e12 --dry-run   # the three runs and their predictions\n"
               "  scaling validate fits/tiny --compute 6e12             # train them, into runs/tiny-validate")
    p.add_argument("fit", metavar=FIT, type=Path, help=FIT_HELP)
    p.add_argument("--compute", required=True, metavar="C",
                   help="training compute in FLOPs, counted in the fit's compute measure (the C = ... that "
                        "`scaling fit` prints: exact FLOPs, or 6ND for a table); one budget, as validate.json "
                        "holds one validation")
    p.add_argument("--config", type=Path, default=None,
                   help="the sweep's YAML (default: read back from the runs of the fit's store)")
    p.add_argument("--runs-dir", type=Path, default=None,
                   help="run store root (default: the one holding the fit's store, else runs)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="token cache root (default: $SCALING_CACHE_DIR or ~/.cache/scaling)")
    p.add_argument("--out", type=Path, default=None, help="where validate.json goes (default: beside fit.json)")
    p.add_argument("--force", action="store_true", help="validate a fit whose verdict is 'not identified'")
    p.add_argument("--dry-run", action="store_true",
                   help="print the three runs and predictions, those already done with their losses, and "
                        "the wall time left; train nothing")
    p.add_argument("--json", action="store_true",
                   help="print validate.json's content instead of a table (with --dry-run: the planned runs, "
                        "their predictions and estimated wall times)")
    p.set_defaults(func=cmd_validate)


def estimate(vcfg: SweepConfig, runs: list[PlannedRun], state: SweepState, timed: Path) -> DryEstimate:
    """Each run's estimated wall time left (0 for one that ended, from the FLOP/s of the finished
    runs in the store `timed`), what that rests on, the runs at once, and the wall time of those left."""
    from scaling.sweeps.estimates import makespan, sweep_workers, walls_left

    walls, basis = walls_left(runs, state, timed)
    workers, _ = sweep_workers(vcfg, state.todo)
    return DryEstimate(state, [walls[r.run_id] for r in runs], basis, workers,
                       makespan(sorted(walls.values(), reverse=True), workers))


@dataclass(frozen=True)
class DryEstimate:
    """What the dry run adds to the planned validation: how far its store has got, each run's
    wall time left, what the estimate rests on, the runs at once and the wall time of all left."""

    state: SweepState
    walls: list[float]
    basis: str
    workers: int
    total: float


def show_dry_run(planned: Validation, est: DryEstimate, as_json: bool) -> None:
    """The planned runs and their predictions, those that ended with what they observed: as
    validate.json would hold them, with the wall-time estimates of `scaling sweep --dry-run --json`
    (est_wall_s, wall_basis, workers, runs_reused, runs_to_train, runs_resumed); else as the table
    and one line of the work left."""
    from scaling.cli.sweep import work_left
    from scaling.validation.result import format_validation

    if as_json:
        shown = planned.to_json()
        shown["runs"] = [{**run, "est_wall_s": wall} for run, wall in zip(shown["runs"], est.walls)]
        shown.update(wall_basis=est.basis, workers=est.workers, est_wall_s=est.total, **est.state.counts())
        print(json.dumps(json_safe(shown), indent=2))
        return
    print("\n".join(format_validation(planned)))
    left = (f": est. wall {est.total / 60:.1f} min with {est.workers} run{'s' * (est.workers > 1)} at a time "
            f"(wall times from {est.basis})" if est.state.todo else ": est. wall 0 s, nothing to train")
    console.print(work_left(est.state, len(planned.runs)) + left)


def cmd_validate(args: argparse.Namespace) -> int:
    require_torch("validate")           # its dry run too: it plans with the training stack's shapes
    from scaling.sweeps.state import sweep_state
    from scaling.validation.result import format_validation, validation_path, write_validation
    from scaling.validation.run import as_dry_run, fit_store, prepare, recipe, runs_root, validate

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
        state = sweep_state(vcfg, runs, runs_dir / vcfg.name)     # where validate's sweep would train them
        show_dry_run(as_dry_run(planned, state, runs_dir / vcfg.name),
                     estimate(vcfg, runs, state, store or runs_dir / vcfg.name), as_json=args.json)
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
