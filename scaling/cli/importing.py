"""`scaling import KIND SRC --runs-dir runs/<name>`: runs trained elsewhere, as a run store.

    scaling import tensorboard logs/ --runs-dir runs/theirs
    scaling import wandb wandb/ --runs-dir runs/theirs --n-key model.n_params
    scaling import mlflow mlruns/ --runs-dir runs/theirs --loss-tag eval_loss
    scaling import csv runs.csv --runs-dir runs/theirs --n-key params --tokens-key tokens

Each source run becomes a run of the store (scaling.runs.imports), which `scaling fit`,
`report` and `--curves` read as one of ours. Runs without N, D or a loss are listed with the reason.
"""

from __future__ import annotations

from pathlib import Path

from scaling.errors import UsageError
from scaling.runs.imports import import_runs
from scaling.runs.imports.resolve import BATCH_KEYS, LOSS_TAGS, N_KEYS, TOKENS_KEYS, Names
from scaling.runs.imports.source import KINDS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "import", help="bring runs logged with TensorBoard, W&B, MLflow or a CSV into a run store",
        description="Read each run's hyperparameters and curves from its own log format and write them as "
                    "a run store that `scaling fit` reads. N, D and the loss are named by the flags (exact "
                    "names) or found under their conventional names.")
    p.add_argument("kind", choices=KINDS, help="the log's format")
    p.add_argument("src", type=Path, metavar="SRC",
                   help="tensorboard: a folder of event files; wandb: an offline run folder, a wandb/ folder "
                        "of them, or exported histories (.csv/.json/.jsonl); mlflow: a file store mlruns/; "
                        "csv: a table")
    p.add_argument("--runs-dir", type=Path, required=True, metavar="DIR",
                   help="the run store to write, runs/<name> (a new or empty folder)")
    p.add_argument("--n-key", metavar="KEY", help=f"the hyperparameter holding N (default: {', '.join(N_KEYS)})")
    p.add_argument("--tokens-key", metavar="KEY",
                   help=f"the hyperparameter (total) or logged scalar (tokens seen) holding D "
                        f"(default: {', '.join(TOKENS_KEYS)})")
    p.add_argument("--batch-tokens-key", metavar="KEY",
                   help=f"instead of D: the hyperparameter of tokens per step, D = steps "
                        f"x it (default: {', '.join(BATCH_KEYS)})")
    p.add_argument("--loss-tag", metavar="TAG", help=f"the logged loss to fit (default: {', '.join(LOSS_TAGS)})")
    p.add_argument("--param-convention", choices=("total", "non_embedding"), default="total",
                   help="what the source's N counts (default total, as `scaling fit` assumes)")
    p.add_argument("--run-key", metavar="COLUMN",
                   help="csv: the column naming each row's run (default: run, run_id or name)")
    p.set_defaults(func=run)


def run(args) -> int:
    for flag in ("n_key", "tokens_key", "batch_tokens_key", "loss_tag", "run_key"):
        if getattr(args, flag) == "":
            raise UsageError(f"--{flag.replace('_', '-')} must name something; got an empty name")
    if args.tokens_key is not None and args.batch_tokens_key is not None:
        raise UsageError("give --tokens-key or --batch-tokens-key, not both")
    if args.run_key is not None and args.kind != "csv":
        raise UsageError("--run-key applies to csv tables only")
    names = Names(n_key=args.n_key, tokens_key=args.tokens_key, batch_tokens_key=args.batch_tokens_key,
                  loss_tag=args.loss_tag)
    result = import_runs(args.kind, args.src, args.runs_dir, names, param_convention=args.param_convention,
                         run_key=args.run_key)
    used = result.names
    d = f"D from {used.tokens_key!r}" if used.tokens_key else f"D = steps x {used.batch_tokens_key!r}"
    listed = result.listed
    print(f"imported {len(result.runs)} {args.kind} runs from {args.src} into {result.sweep_dir} "
          f"(N from {used.n_key!r}, {d}, loss {used.loss_tag!r}): {len(result.runs) - len(listed)} fit points")
    for run_id, r in listed:
        print(f"  not a fit point: {run_id}: {r.status}: {r.reason}")
    print(f"next: scaling fit {result.sweep_dir}")
    return 0
