"""`scaling report`: figures and a readable report from a run store, a fit.json or a packaged dataset.

    scaling report runs/tiny                       # fit the store here; figures + report.md
    scaling report fits/tiny [--format html]       # an existing fit.json (and the runs it names)
    scaling report runs/tiny --fit fits/tiny       # a store, with the numbers of an existing fit
    scaling report --dataset chinchilla --drop-highest-loss 5

Thin layer over `scaling.report.report.make_report`; prints the hold-out check and the files written.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

from scaling.cli.law_choice import FIT, FIT_HELP, add_fit_option
from scaling.cli.plan import add_compute_option, parse_computes
from scaling.errors import UsageError
from scaling.formats import json_safe
from scaling.laws.fitting import fitdata, readers
from scaling.runs.store import check_output

if TYPE_CHECKING:
    from scaling.report.page import Report


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report", help="a fit's report: figures, tables, hold-out check",
        description="Draw the loss curves, final losses with the fitted law, IsoFLOP profiles, iso-loss "
                    "contours with compute-optimal frontiers, residuals and bootstrap distributions; "
                    "refit without the top-compute runs and predict them (hold-out check); write a "
                    "report with the verdict, the sweep, the run table, the constants with intervals, the "
                    "backtest (how far beyond its data the law predicts), the law's forms side by side, the "
                    "four estimates of the allocation exponent, the published laws, a plan at 1x, 3x, 10x "
                    "and 30x the largest fitted run's compute (and at --compute), evidence and limitations.",
        epilog="examples:\n"
               "  scaling report fits/tiny                    # a fit folder: fits/tiny/report/report.md\n"
               "  scaling report fits/tiny --format html      # one self-contained file, figures embedded\n"
               "  scaling report fits/tiny --compute 1e15     # the plan at your own budget too\n"
               "  scaling report --dataset chinchilla --drop-highest-loss 5   # fitted here")
    p.add_argument("source", nargs="?", type=Path, metavar=f"{FIT}_OR_RUNS_DIR",
                   help=f"{FIT_HELP}; or a run store runs/<sweep>, fitted here")
    p.add_argument("--dataset", metavar="NAME", help=f"a packaged dataset instead: {', '.join(readers.DATASETS)}")
    add_fit_option(p, "with a run store: use this fit's numbers instead of fitting here")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="where the report goes (default: FIT_DIR/report, or fits/<name>/report)")
    p.add_argument("--format", default="md", choices=("md", "html"),
                   help="md (default; figures beside it) or html (one self-contained file, figures embedded)")
    p.add_argument("--bootstrap", type=int, metavar="K",
                   help="bootstrap resamples of a fit made here (default 1000, as `scaling fit`); a fit.json "
                        "has its own, in fit.bootstrap.csv")
    p.add_argument("--seed", type=int, default=0, help="seed of a fit made here (default 0)")
    p.add_argument("--holdout-fraction", type=float, metavar="F",
                   help="share of points, by largest compute, held out of a hold-out refit made here (default: "
                        "the fit's own check, top 0.2, which its verdict judged; another F refits)")
    p.add_argument("--drop-highest-loss", type=int, default=0, metavar="K",
                   help="for a fit made here: leave out the K highest losses (Besiroglu et al.: 5)")
    p.add_argument("--curves", action="store_true",
                   help="a run store fitted here: also fit the law to its training curves, as `scaling fit --curves` "
                        "(a fit.json shows its own curve fit, if it was made with --curves)")
    p.add_argument("--param-convention", choices=fitdata.PARAM_CONVENTIONS,
                   help="for a run store fitted here: count N as total (default, as `scaling fit`) or "
                        "non_embedding parameters")
    add_compute_option(p, "budgets (FLOPs, counted as the fit counts C) the plan adds to its own: 1x, 3x, 10x and "
                          "30x the largest fitted run")
    p.add_argument("--json", action="store_true",
                   help="print what was written, the hold-out check and what the report lacks, as JSON")
    p.set_defaults(func=cmd_report)


def default_out(args: argparse.Namespace) -> Path:
    if args.dataset is not None:
        return Path("fits") / args.dataset / "report"
    src = args.source
    if src.is_file():
        return src.parent / "report"
    if (src / "fit.json").is_file():
        return src / "report"
    return Path("fits") / src.resolve().name / "report"


def cmd_report(args: argparse.Namespace) -> int:
    # matplotlib is imported only by this command
    from scaling.laws.checks.holdout import format_holdout
    from scaling.report.document import FIGURE_DIR
    from scaling.report.report import make_report

    f = args.holdout_fraction
    if f is not None and not (math.isfinite(f) and 0 < f < 1):
        raise UsageError(f"--holdout-fraction must be between 0 and 1 (exclusive); got {f!r}")
    if args.source is not None and not args.source.exists():
        raise UsageError(f"{args.source} does not exist (expected a run store runs/<sweep>, a fit folder or a "
                         "fit.json)")
    if (args.source is None) == (args.dataset is None):
        raise UsageError(f"give exactly one input: {FIT}_OR_RUNS_DIR or --dataset NAME")
    out = args.out if args.out is not None else default_out(args)
    check_output(out, [f"report.{args.format}"])       # refused before the work, not after it
    start = time.perf_counter()
    rep, paths = make_report(args.source, out=out, fmt=args.format, dataset=args.dataset, fit=args.fit,
                                    bootstrap=args.bootstrap, seed=args.seed, holdout_fraction=f,
                                    drop_highest_loss=args.drop_highest_loss,
                                    param_convention=args.param_convention, curves=args.curves,
                                    compute=parse_computes(args.compute or []))
    elapsed = time.perf_counter() - start
    main = paths[-1]
    if args.json:
        print(json.dumps(json_safe(report_json(rep, paths)), indent=2))
        return 0
    print(format_holdout(rep.holdout))
    left = len(rep.left_out)
    if left or rep.inputs.notes or rep.missing_figures:
        where = [f'"{h}"' for h, shown in (("What was left out, and why", left or rep.inputs.notes),
                                            ("Figures not drawn", rep.missing_figures)) if shown]
        print(f"note: {left} run(s)/point(s) left out, {len(rep.inputs.notes)} note(s), "
              f"{len(rep.missing_figures)} figure(s) not drawn: see the report's {' and '.join(where)}")
    n_fig = sum(1 for p in paths if p.suffix == ".png")
    print(f"wrote {main} and {n_fig} figures (PNG and SVG) in {main.parent / FIGURE_DIR} "
          f"in {elapsed:.1f} s")
    return 0


def report_json(rep: Report, paths: list[Path]) -> dict:
    """What `scaling report` tells, typed: the files written, the hold-out check (as fit.json holds
    it), and what the report lacks (runs left out, notes, figures not drawn and why)."""
    return {"report": str(paths[-1]), "files": [str(p) for p in paths[:-1]],
            "holdout": None if rep.holdout is None else rep.holdout.to_json(),
            "left_out": [{"what": what, "why": why} for what, why in rep.left_out],
            "notes": list(rep.inputs.notes), "missing_figures": dict(rep.missing_figures)}
