"""TensorBoard event files, read by the tensorboard package (the `tensorboard` extra).

A run is a folder holding event files (`events.out.tfevents.*`), named by its path under the
source; its scalars come from EventAccumulator, its hyperparameters from the hparams plugin's
session record (what SummaryWriter.add_hparams and scaling's own train.log_to write). PyTorch's
add_hparams puts them in a subfolder of the run; such a subfolder's hyperparameters go to the
run above it. TensorBoard's reader stops quietly at a truncated record; here each file is first
read to its end by the package's record reader, so a damaged file is an error, not a short curve.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from scaling.errors import UsageError
from scaling.runs.imports.source import SourceRun, needs

if TYPE_CHECKING:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

EVENTS = "*tfevents*"


def _check_whole(path: Path) -> None:
    """Read every record of an event file; a truncated or corrupt one is an error naming the file."""
    records = needs("tensorboard.compat.tensorflow_stub.pywrap_tensorflow", "tensorboard")
    errors = needs("tensorboard.compat.tensorflow_stub.errors", "tensorboard")
    reader = records.PyRecordReader_New(str(path).encode(), 0, b"", None)
    try:
        while True:
            reader.GetNext()
    except errors.OutOfRangeError:
        return
    except errors.DataLossError:
        raise UsageError(f"{path}: truncated or corrupt event file (a record ends early or fails its "
                         f"checksum)") from None


def _hparams(accumulator: EventAccumulator) -> dict:
    """The run's hyperparameters from the hparams plugin's session start record ({} if none)."""
    data = needs("tensorboard.plugins.hparams.plugin_data_pb2", "tensorboard")
    try:
        content = accumulator.PluginTagToContent("hparams").get("_hparams_/session_start_info")
    except KeyError:
        return {}
    if content is None:
        return {}
    values = data.HParamsPluginData.FromString(content).session_start_info.hparams
    return {key: getattr(value, value.WhichOneof("kind")) for key, value in values.items()
            if value.WhichOneof("kind") in ("number_value", "string_value", "bool_value")}


def _read_run(folder: Path, name: str) -> SourceRun:
    accumulators = needs("tensorboard.backend.event_processing.event_accumulator", "tensorboard")
    files = sorted(folder.glob(EVENTS))
    for path in files:
        _check_whole(path)
    accumulator = accumulators.EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    events = {tag: accumulator.Scalars(tag) for tag in accumulator.Tags()["scalars"]}
    scalars = {tag: [(e.step, e.value) for e in logged] for tag, logged in events.items()}
    times = [e.wall_time for logged in events.values() for e in logged]
    return SourceRun(name=name, params=_hparams(accumulator), scalars=scalars,
                     origin={"event_files": [p.name for p in files]},
                     wall_s=max(times) - min(times) if times else None)   # first to last scalar logged


def read(src: Path) -> list[SourceRun]:
    """One SourceRun per folder of event files under `src` (or `src` itself)."""
    needs("tensorboard", "tensorboard")   # first: a missing extra is the problem to name
    folders = sorted({p.parent for p in src.rglob(EVENTS)})
    if not folders:
        raise UsageError(f"{src}: no TensorBoard event files ({EVENTS}) in it or below it")
    runs = {f: _read_run(f, src.name if f == src else str(f.relative_to(src))) for f in folders}
    for folder, run in list(runs.items()):
        parent = runs.get(folder.parent)
        if run.params and parent is not None and not parent.params:   # add_hparams' subfolder
            runs[folder.parent] = SourceRun(parent.name, run.params, parent.scalars, origin={
                **parent.origin, "hparams_from": str(folder.relative_to(src))}, wall_s=parent.wall_s)
            del runs[folder]
    return list(runs.values())
