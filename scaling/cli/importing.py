"""`scaling import KIND SRC --runs-dir runs/<name>`: runs trained elsewhere, as a run store.

    scaling import tensorboard logs/ --runs-dir runs/theirs
    scaling import wandb wandb/ --runs-dir runs/theirs --n model.n_params
    scaling import mlflow mlruns/ --runs-dir runs/theirs --loss eval_loss     # or mlflow.db, a sqlite store
    scaling import csv runs.csv --runs-dir runs/theirs --n params --d tokens

N, D and the loss are named as `scaling fit --csv` names its columns: --n, --d, --loss (the older
--n-key, --tokens-key, --loss-tag, --batch-tokens-key and --run-key still work, unlisted).

Each source run becomes a run of the store (scaling.runs.imports), which `scaling fit`,
`report` and `--curves` read as one of ours. Runs without N, D or a loss are listed with the reason.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scaling.errors import UsageError
from scaling.runs.imports import import_runs
from scaling.runs.imports.resolve import BATCH_KEYS, LOSS_TAGS, N_KEYS, TOKENS_KEYS, MissingNames, Names
from scaling.runs.imports.source import KINDS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "import", help="import runs logged with TensorBoard, W&B, MLflow or a CSV",
        description="Read each run's hyperparameters and curves from its own log format and write them as "
                    "a run store that `scaling fit` reads. N, D and the loss are named by the flags (exact "
                    "names) or found under their conventional names.",
        epilog="examples:\n"
               "  scaling import tensorboard logs/ --runs-dir runs/mine      # then: scaling fit runs/mine\n"
               "  scaling import wandb wandb/ --runs-dir runs/mine --loss eval/loss --n n_params\n"
               "  scaling import csv curves.csv --runs-dir runs/mine --run name")
    p.add_argument("kind", choices=KINDS, help="the log's format")
    p.add_argument("src", type=Path, metavar="SRC",
                   help="tensorboard: a folder of event files; wandb: an offline run folder, a wandb/ folder "
                        "of them, or exported histories (.csv/.json/.jsonl); mlflow: a file store mlruns/ or a "
                        "sqlite database file (mlflow.db); csv: a table")
    p.add_argument("--runs-dir", type=Path, required=True, metavar="DIR",
                   help="the run store to write, runs/<name> (a new or empty folder)")
    _name(p, "--n", "--n-key", "n_key", "KEY", f"the hyperparameter holding N (default: the one named "
                                                 f"{', '.join(N_KEYS)})")
    _name(p, "--d", "--tokens-key", "tokens_key", "KEY",
          f"D: a hyperparameter (the run's total tokens: the evaluation at step s saw s x D / the last "
          f"step) or a logged scalar (tokens seen at each evaluation) (default: the one named "
          f"{', '.join(TOKENS_KEYS)})")
    _name(p, "--batch-tokens", "--batch-tokens-key", "batch_tokens_key", "KEY",
          f"instead of D: the hyperparameter of tokens per step, step s saw s x it (default: the one named "
          f"{', '.join(BATCH_KEYS)})")
    _name(p, "--loss", "--loss-tag", "loss_tag", "TAG", f"the logged loss to fit (default: the one named "
                                                        f"{', '.join(LOSS_TAGS)})")
    p.add_argument("--param-convention", choices=("total", "non_embedding"), default="total",
                   help="what the source's N counts (default total, as `scaling fit` assumes)")
    _name(p, "--run", "--run-key", "run_key", "COLUMN", "csv: the column naming each row's run (default: run, "
                                                        "run_id or name)")
    p.set_defaults(func=run)


def _name(p: argparse.ArgumentParser, flag: str, old: str, dest: str, metavar: str, help: str) -> None:
    """A name flag, and its older spelling kept working but unlisted."""
    p.add_argument(flag, dest=dest, metavar=metavar, help=help)
    p.add_argument(old, dest=dest, help=argparse.SUPPRESS)


# The flag that gives each of what the import may not find (MissingNames.missing).
FLAGS = {"n": "--n KEY", "d": "--d KEY (or --batch-tokens KEY)", "loss": "--loss TAG"}


def run(args: argparse.Namespace) -> int:
    for dest, flag in (("n_key", "--n"), ("tokens_key", "--d"), ("batch_tokens_key", "--batch-tokens"),
                       ("loss_tag", "--loss"), ("run_key", "--run")):
        if getattr(args, dest) == "":
            raise UsageError(f"{flag} must name something; got an empty name")
    if args.tokens_key is not None and args.batch_tokens_key is not None:
        raise UsageError("give --d or --batch-tokens, not both")
    if args.run_key is not None and args.kind != "csv":
        raise UsageError("--run applies to csv tables only")
    names = Names(n_key=args.n_key, tokens_key=args.tokens_key, batch_tokens_key=args.batch_tokens_key,
                  loss_tag=args.loss_tag)
    try:
        result = import_runs(args.kind, args.src, args.runs_dir, names, param_convention=args.param_convention,
                             run_key=args.run_key)
    except MissingNames as e:
        raise UsageError(f"{e}; give {', '.join(FLAGS[m] for m in e.missing)}") from None
    except UsageError as e:     # the API's run_key is the command line's --run (--run-key: its older spelling)
        raise UsageError(str(e), options=tuple("run" if o == "run_key" else o for o in e.options)) from None
    used = result.names
    d = f"D from {used.tokens_key!r}" if used.tokens_key else f"D = steps x {used.batch_tokens_key!r}"
    listed = result.listed
    print(f"imported {len(result.runs)} {args.kind} runs from {args.src} into {result.sweep_dir} "
          f"(N from {used.n_key!r}, {d}, loss {used.loss_tag!r}): {len(result.runs) - len(listed)} fit points")
    for run_id, r in listed:
        print(f"  not a fit point: {run_id}: {r.status}: {r.reason}")
    print(f"next: scaling fit {result.sweep_dir}")
    return 0
