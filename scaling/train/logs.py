"""A run's curves written where researchers look, as it trains: TensorBoard (train.log_to).

    with run_logs(spec, run_dir) as log:     # a no-op where train.log_to is empty
        log(record)                          # each metrics.jsonl record, as it is appended

The run store is the same with or without: the event file sits in the run's own folder, so
`tensorboard --logdir runs/<sweep>` shows one run per training run, named by its run id. Each
record's numbers become scalars at its step (train/loss, val/loss, val/bpb, lr,
throughput/tokens_per_s, tokens); the run's size and budget are written once as its hparams,
so `scaling import tensorboard` reads the run back without flags.

A resumed run opens a new event file whose first step purges the steps a killed attempt logged
past its checkpoint (SummaryWriter's purge_step), as metrics.jsonl's reader drops them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from scaling.errors import UsageError
from scaling.train.shape import param_counts
from scaling.train.spec import RunSpec

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

# metrics.jsonl field -> TensorBoard tag.
TAGS = {"train_loss": "train/loss", "val_loss": "val/loss", "val_bpb": "val/bpb", "lr": "lr",
        "val_context_use": "val/context_use", "tokens_per_s": "throughput/tokens_per_s", "tokens": "tokens"}


def _summary_writer() -> type[SummaryWriter]:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UsageError("train.log_to: [tensorboard] needs the tensorboard extra: "
                         "pip install 'scaling[tensorboard]'") from None
    return SummaryWriter


def hparams(spec: RunSpec) -> dict:
    """What the run is, as TensorBoard's hparams: its size N (total and non-embedding), its budget
    D and its learning rate."""
    n_total, n_non_embedding = param_counts(spec.model)
    return {"n_params": n_total, "n_params_non_embedding": n_non_embedding, "tokens_budget": spec.tokens,
            "batch_tokens": spec.train.batch_tokens, "lr": spec.lr, "d_model": spec.model.d_model,
            "n_layers": spec.model.n_layers, "n_heads": spec.model.n_heads}


@contextmanager
def run_logs(spec: RunSpec, run_dir: Path) -> Iterator[Callable[[dict], None]]:
    """A function writing each metrics record to the viewers of train.log_to, closed on exit."""
    if "tensorboard" not in spec.train.log_to:
        yield lambda record: None
        return
    SummaryWriter = _summary_writer()
    writer = None

    def log(record: dict) -> None:
        nonlocal writer
        step = record["step"]
        if writer is None:   # opened at the first record, whose step a resumed run purges from
            writer = SummaryWriter(log_dir=str(run_dir), purge_step=step)
            from torch.utils.tensorboard.summary import hparams as hparams_summaries
            assert writer.file_writer is not None     # opened by the constructor
            for summary in hparams_summaries(hparams(spec), {}):
                writer.file_writer.add_summary(summary)
        for key, tag in TAGS.items():
            if record.get(key) is not None:
                writer.add_scalar(tag, record[key], step)
        writer.flush()   # a kill loses at most the record being written, as with metrics.jsonl

    try:
        yield log
    finally:
        if writer is not None:
            writer.close()
