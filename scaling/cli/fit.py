"""`scaling fit`: fit L(N, D) = E + A/N^alpha + B/D^beta with bootstrap intervals; write fit.json.

    scaling fit runs/tiny                                  # finished runs of a sweep
    scaling fit --csv points.csv                           # columns N, D (or C), loss found by name
    scaling fit --csv runs.csv --n params --d tokens --loss val_loss
    scaling fit --dataset chinchilla --drop-highest-loss 5 # Hoffmann et al.'s runs, as Besiroglu et al.

Thin layer over the Python API: `scaling.fit` (`scaling.laws.api.fit`: a `fitdata` loader, the filters,
`analysis.fit_data`; a `LawFit`), then `fit_file.write_fit` and `LawFit.summary()`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from scaling.errors import UsageError
from scaling.laws import api, tasks
from scaling.laws.checks import combined
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting import fitdata, readers
from scaling.laws.fitting.fit import DEFAULT_DELTA
from scaling.laws.forms import catalog
from scaling.laws.results import fit_file
from scaling.laws.results import lawfit as results
from scaling.train.counts import COMPUTE_MEASURES


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "fit", help="fit L(N, D) with bootstrap intervals; write fit.json",
        description="Fit L(N, D) = E + A/N^alpha + B/D^beta (Hoffmann et al.'s Approach 3: Huber loss "
                    "on log residuals, L-BFGS from 4,500 starts) to a run store, a table or a packaged "
                    "dataset; bootstrap 95% intervals; write DIR/fit.json and print a summary.",
        epilog="examples:\n"
               "  scaling fit runs/tiny                        # a run store: fits/tiny/fit.json\n"
               "  scaling fit --csv points.csv                 # columns N, D (or C) and loss, found by name\n"
               "  scaling fit --csv runs.csv --n params --d tokens --loss val_loss\n"
               "  scaling fit --dataset chinchilla --drop-highest-loss 5   # Besiroglu et al.'s refit")
    _points_arguments(p)
    _selection_arguments(p)
    _fitting_arguments(p)
    p.add_argument("--out", type=Path, metavar="DIR", help="where fit.json goes (default fits/<name>: the run "
                                                           "store's, the table's file name without its extension, "
                                                           "or the dataset's)")
    p.add_argument("--json", action="store_true", help="print fit.json instead of the summary")
    p.set_defaults(func=cmd_fit)


def _points_arguments(p: argparse.ArgumentParser) -> None:
    """Where the points come from (one source), which columns of a table hold what, and how a run's
    parameters and compute are counted."""
    p.add_argument("runs_dir", nargs="?", type=Path, metavar="RUNS_DIR",
                   help="a sweep's run store runs/<sweep> (finished runs are used)")
    p.add_argument("--csv", type=Path, metavar="FILE", help="a CSV or parquet table of points instead")
    p.add_argument("--dataset", metavar="NAME", help=f"a packaged dataset instead: {', '.join(readers.DATASETS)}")
    names = lambda option: ", ".join(dict.fromkeys(readers.TABLE_NAMES[option]))   # noqa: E731
    _column(p, "n", "COLUMN", f"--csv: column of parameters N (default: the one named {names('n_col')})")
    _column(p, "d", "COLUMN", f"--csv: column of training tokens D (default: the one named {names('d_col')})")
    _column(p, "c", "COLUMN", f"--csv: instead of D, column of training FLOPs C, D = C/(6N) (default, "
                              f"where no D column: the one named {names('c_col')})")
    _column(p, "loss", "COLUMN", f"--csv: column of final loss (default: the one named {names('loss_col')})")
    p.add_argument("--param-convention", choices=fitdata.PARAM_CONVENTIONS,
                   help="RUNS_DIR: count N as total (default, Chinchilla's count) or non_embedding parameters "
                        "(the fit is shown both ways); --csv: what the N column counts (recorded in fit.json)")
    p.add_argument("--compute-measure", choices=COMPUTE_MEASURES,
                   help="RUNS_DIR: count each run's compute C as exact (default: the FLOPs it spent, output layer "
                        "and attention included), 6n_total or 6n_non_embedding; the allocation is solved under it")
    _column(p, "budget", "COLUMN", "--csv: column of each run's planned compute budget (an IsoFLOP design); "
                                   "Approach 2 groups by it instead of binning C")
    _column(p, "embedding", "COLUMN", "--csv: column of embedding parameters, so N is known both ways and "
                                      "the fit is shown with each (needs --param-convention)")
    _column(p, "unique", "COLUMN", "--csv: column of the unique tokens each run drew its D from (runs with "
                                   "D above it repeat data; the data-constrained law is fitted too)")
    p.add_argument("--unique-tokens", type=float, metavar="U",
                   help="--csv: the unique tokens of every run (one corpus), instead of --unique")


def _selection_arguments(p: argparse.ArgumentParser) -> None:
    """What the law is fitted to: the metric, the final points or whole curves, and which points are
    left out."""
    p.add_argument("--data-constrained", action="store_true",
                   help="fit the data-constrained law (Muennighoff et al. 2023) even if no run repeats data")
    p.add_argument("--metric", default="loss", metavar="NAME",
                   help=f"RUNS_DIR: fit the law to another of the runs' numbers in place of the loss: "
                        f"{', '.join(tasks.FIT_METRICS)} (default loss); metrics it does not describe "
                        f"({', '.join(tasks.NOT_FITTED)}) are refused")
    p.add_argument("--curves", action="store_true",
                   help="RUNS_DIR: also fit the law to every evaluation of the runs' training curves (Tissue et "
                        "al.'s curve law per size), with intervals from resampling whole runs; fit.json's 'curves'")
    p.add_argument("--drop-highest-loss", type=int, default=0, metavar="K",
                   help="leave out the K points with the highest loss (Besiroglu et al.: 5)")
    p.add_argument("--min-tokens-per-param", type=float, metavar="X", help="leave out points with D/N below X")
    p.add_argument("--min-tokens", type=float, metavar="X", help="leave out points with D below X")


def _fitting_arguments(p: argparse.ArgumentParser) -> None:
    """How the law is fitted and its intervals drawn: the loss, what is pinned or given a prior, the
    form plan uses, the bootstrap and its seed."""
    p.add_argument("--delta", type=float, default=DEFAULT_DELTA, help=f"Huber delta (default {DEFAULT_DELTA:g})")
    p.add_argument("--fixed-e", "--E", type=float, metavar="E", dest="fixed_E",
                   help="pin the irreducible loss E (from another fit, a reference or a larger run); fit the "
                        "other four; recorded in fit.json (options.fixed_E) and held in every interval")
    p.add_argument("--fixed-E", type=float, dest="fixed_E", help=argparse.SUPPRESS)   # the older spelling
    p.add_argument("--E-prior", metavar="MEAN,SD", dest="E_prior",
                   help="a Gaussian prior on E (mean and standard deviation, in loss units), added to the fit's "
                        "objective and carried into the bootstrap and every interval; fit.json options.E_prior. "
                        "MEAN above 0 and below the lowest loss; SD above 0 and at most the lowest loss (E lies "
                        "between 0 and it, so a wider prior says nothing about E: leave it out to fit E free)")
    p.add_argument("--E-from", metavar="FIT", dest="E_from", type=Path,
                   help="the prior on E from another fit.json (a reference, or a larger run's fit): its E, "
                        "with its interval as the standard deviation")
    p.add_argument("--form", default=None, choices=(*catalog.FORMS, combined.NAME), metavar="NAME",
                   help="the one law that predicts and plans (plan is the optimum of its prediction): by default "
                        "the fitted law (chinchilla, or fixed-E with --E), beyond the data its backtest's; or "
                        f"one other form, {', '.join(f for f in catalog.FORMS if f != catalog.DEFAULT)}; or "
                        "median, the geometric median of the forms as one surface. The constants and "
                        "diagnostics stay the Chinchilla form's")
    p.add_argument("--forms", action="store_true",
                   help="also fit every other law form beside the fit, each with its backtest, and caution where "
                        "they disagree (fit.json's 'forms'; the report draws them); costs a few seconds")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="print everything the fit found (the constants, each backtest cut, the forms, every "
                        "check); by default the decision first, in about 15 lines")
    p.add_argument("--bootstrap", type=int, default=results.DEFAULT_BOOTSTRAP, metavar="K",
                   help=f"bootstrap resamples (default {results.DEFAULT_BOOTSTRAP}; 0 disables; else at least "
                        f"{resampling.MIN_RESAMPLES})")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling (default 0)")
    p.add_argument("--reference-compute", type=float, metavar="C",
                   help="FLOPs at which tokens per parameter is reported (default: the largest C of the points)")


def _column(p: argparse.ArgumentParser, name: str, metavar: str, help: str) -> None:
    """--NAME COLUMN (the API's keyword), and its older spelling --NAME-col, kept hidden."""
    p.add_argument(f"--{name}", dest=f"{name}_col", metavar=metavar, help=help)
    p.add_argument(f"--{name}-col", dest=f"{name}_col", help=argparse.SUPPRESS)


def source_of(args: argparse.Namespace) -> tuple[str | Path, str, str]:
    """The one data source the arguments name: (source, its kind for `api.points`, a name for the
    default output folder). The flags are checked here, in flag names; the loading is `api.fit`'s."""
    sources = [s for s, v in (("RUNS_DIR", args.runs_dir), ("--csv", args.csv), ("--dataset", args.dataset))
               if v is not None]
    if len(sources) != 1:
        raise UsageError("give exactly one data source: RUNS_DIR, --csv FILE or --dataset NAME"
                         + (f" (got {', '.join(sources)})" if sources else ""))
    column_flags = [f for f, v in (("--n", args.n_col), ("--d", args.d_col), ("--c", args.c_col),
                                   ("--loss", args.loss_col), ("--embedding", args.embedding_col),
                                   ("--budget", args.budget_col), ("--unique", args.unique_col),
                                   ("--unique-tokens", args.unique_tokens))
                    if v is not None]
    if column_flags and args.csv is None:
        raise UsageError(f"{', '.join(column_flags)} apply to --csv only")
    if args.param_convention is not None and args.dataset is not None:
        raise UsageError("--param-convention applies to a run store or a --csv table; a packaged dataset "
                         "records its own")
    if args.embedding_col is not None and args.param_convention is None:
        raise UsageError("--embedding needs --param-convention: does the N column count embeddings or not?")
    if args.compute_measure is not None and args.runs_dir is None:
        raise UsageError("--compute-measure applies to a run store; a table's C is 6 N D of its own N")
    if args.metric != "loss" and args.runs_dir is None:
        raise UsageError("--metric applies to a run store; a table or dataset has only its loss column")
    if args.runs_dir is not None:
        name = args.runs_dir.resolve().name + ("" if args.metric == "loss" else f"-{args.metric}")
        return args.runs_dir, "store", name
    if args.csv is not None:
        return args.csv, "table", args.csv.stem
    return args.dataset, "dataset", args.dataset


def _check_number(flag: str, value: float | None, positive: bool = True) -> None:
    if value is not None and not (math.isfinite(value) and (value > 0 or not positive)):
        raise UsageError(f"{flag} must be a positive, finite number; got {value!r}")


def _check_count(flag: str, value: int) -> None:
    if value < 0:
        raise UsageError(f"{flag} must be a whole number >= 0; got {value!r}")


def _fitting_display() -> contextlib.AbstractContextManager:
    """The time elapsed, on stderr while the fit runs, where stderr is a terminal (nothing in a pipe
    or a log): a fit of thousands of points takes minutes (docs/fitting.md, "Limits")."""
    console = Console(stderr=True)
    if not console.is_terminal:
        return contextlib.nullcontext()
    display = Progress(SpinnerColumn(), TextColumn("fitting: L-BFGS from every start, the bootstrap, the hold-out "
                                                   "and backtest refits"), TimeElapsedColumn(),
                       console=console, transient=True)
    display.add_task("fit", total=None)
    return display


def cmd_fit(args: argparse.Namespace) -> int:
    resampling.check_count(args.bootstrap, "--bootstrap")
    _check_count("--seed", args.seed)
    if args.drop_highest_loss < 0:
        raise UsageError(f"--drop-highest-loss must be a whole number >= 0; got {args.drop_highest_loss}")
    _check_number("--min-tokens-per-param", args.min_tokens_per_param)
    _check_number("--min-tokens", args.min_tokens)
    if args.d_col is not None and args.c_col is not None:
        raise UsageError("give --d or --c, not both")
    _check_number("--delta", args.delta)
    _check_number("--fixed-e", args.fixed_E)
    _check_number("--reference-compute", args.reference_compute)
    _check_number("--unique-tokens", args.unique_tokens)
    source, kind, name = source_of(args)
    out = args.out if args.out is not None else Path("fits") / name
    _check_out(out, source, kind)
    fit_file.check_fit_out(out)         # a folder where a fit file goes, a journal it cannot finish: before the fit
    start = time.perf_counter()
    with _fitting_display():
        fit = api.fit(source, kind=kind, n=args.n_col, d=args.d_col, c=args.c_col, loss=args.loss_col,
                      param_convention=args.param_convention, compute_measure=args.compute_measure,
                      embedding=args.embedding_col, budget=args.budget_col, unique=args.unique_col,
                      unique_tokens=args.unique_tokens, drop_highest_loss=args.drop_highest_loss,
                      min_tokens_per_param=args.min_tokens_per_param, min_tokens=args.min_tokens,
                      delta=args.delta, fixed_E=args.fixed_E, bootstrap=args.bootstrap, seed=args.seed,
                      reference_compute=args.reference_compute, data_constrained=args.data_constrained,
                      metric=args.metric, curves=args.curves, E_prior=_E_prior(args), form=args.form,
                      forms=args.forms)
    elapsed = time.perf_counter() - start
    path = fit_file.write_fit(out, fit)
    if args.json:
        print(fit_file.dumps_fit(fit), end="")
        return 0
    if args.metric != "loss":
        print(f"fitted to {args.metric} = {tasks.FIT_METRICS[args.metric].meaning}, in place of the loss: "
              "L below is this metric")
    print(fit.summary(verbose=args.verbose))
    print(f"fitted in {elapsed:.1f} s; wrote {path}")
    print(f"next: scaling plan --fit {out} --compute C (what to train at C FLOPs); scaling compare {out} "
          f"(beside the published laws); scaling report {out} (figures and the report)")
    return 0


def _check_out(out: Path, source: str | Path, kind: str) -> None:
    """UsageError, before the fit, for an output folder that would replace the input: a table named
    as one of the fit's files (fit.points.csv) in --out, or the run store itself, where a fit.json
    would make `scaling report RUNS_DIR` read the fit instead of the runs."""
    if kind == "table" and Path(source).resolve() in {p.resolve() for p in fit_file.fit_paths(out)}:
        raise UsageError(f"--out {out} would overwrite the table being fitted, {source}: give another folder")
    if kind == "store" and out.resolve() == Path(source).resolve():
        raise UsageError(f"--out {out} is the run store itself: a fit goes in a folder of its own "
                         "(default fits/<name>), or `scaling report` would read the store as that fit")


def _E_prior(args: argparse.Namespace) -> tuple | None:
    """--E-prior MEAN,SD or --E-from FIT as (mean, sd[, source]); None without either."""
    if args.E_prior is not None and args.E_from is not None:
        raise UsageError("give --E-prior or --E-from, not both")
    if args.E_from is not None:
        return api.E_prior_from(args.E_from)
    if args.E_prior is None:
        return None
    try:
        mean, sd = (float(v) for v in args.E_prior.split(","))
    except ValueError:
        raise UsageError(f"--E-prior takes MEAN,SD (two numbers, e.g. 1.7,0.05); got {args.E_prior!r}") from None
    _check_number("--E-prior's MEAN", mean)
    _check_number("--E-prior's SD", sd)
    return mean, sd
