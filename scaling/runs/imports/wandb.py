"""Weights & Biases offline runs (`wandb/offline-run-*/run-<id>.wandb`), read with the wandb package
(the `wandb` extra), or a run history exported to CSV or JSON lines.

An offline run's log is a W&B transaction file: a 7-byte header, then LevelDB-log blocks of
32 KiB whose records (crc32, length, type: full, first, middle or last chunk) carry the
protobuf `wandb.proto.wandb_internal_pb2.Record`s of the run: its config, each history row
(`wandb.log`), its exit. wandb 0.31 reads the file only in its Go service, with no Python API,
so the chunks are reassembled here (about 20 lines) and every record decoded by wandb's own
protobuf classes. A run without an exit record was still running or was killed; a non-zero
exit code is a failed run: both are kept, not fitted.

An exported history (`run.history()` written with to_csv or to_json(lines=True), one file per
run, the file's name the run's) has one row per logged step (`_step`) and no config: name N and
D as its columns.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scaling.errors import UsageError
from scaling.formats import flatten
from scaling.reading import check_header, read_bounded
from scaling.runs.imports.source import LARGEST_STEP, SourceRun, needs

# A ConfigItem record: protobuf builds its classes at import time, so none is visible to mypy.
ConfigItem = Any

HEADER = struct.Struct("<4sHB")          # ":W&B", magic 0xBEE1, version
CHUNK = struct.Struct("<IHB")            # crc32 (seeded with the type byte), length, type
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
RUN_FILES = "run-*.wandb"
EXPORTS = (".csv", ".json", ".jsonl")


def _records(path: Path) -> Iterator[bytes]:
    """The payloads of a transaction file, chunks joined; a UsageError where it is damaged."""
    data = read_bounded(path, what="W&B log")    # a regular file, size-capped
    if len(data) < HEADER.size or HEADER.unpack_from(data)[:2] != (b":W&B", 0xBEE1):
        raise UsageError(f"{path}: not a W&B transaction file (no ':W&B' header)")
    pos = HEADER.size
    parts: list[bytes] = []
    while pos < len(data):
        if BLOCK - pos % BLOCK < CHUNK.size:      # a block's tail too short for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        crc, length, kind = CHUNK.unpack_from(data, pos) if pos + CHUNK.size <= len(data) else (None, 0, 0)
        if (crc, length, kind) == (0, 0, 0):       # zero fill to the block's end
            pos += BLOCK - pos % BLOCK
            continue
        payload = data[pos + CHUNK.size:pos + CHUNK.size + length]
        if crc is None or len(payload) < length or zlib.crc32(payload, zlib.crc32(bytes([kind]))) != crc:
            raise UsageError(f"{path}: truncated or corrupt record at byte {pos}")
        pos += CHUNK.size + length
        parts = [payload] if kind in (FULL, FIRST) else parts + [payload]
        if kind in (FULL, LAST):
            yield b"".join(parts)


def _key(item: ConfigItem) -> str:
    return item.key or "/".join(item.nested_key)


def _value(item: ConfigItem, path: Path) -> Any:
    """An item's value, decoded from its JSON; UsageError naming the file and the key."""
    try:
        return json.loads(item.value_json)
    except ValueError as exc:
        raise UsageError(f"{path}: the value of {_key(item)!r} is not valid JSON ({exc})") from None


def _config(items: Iterable[ConfigItem], path: Path) -> dict:
    """A config update's items, each value decoded from JSON (and W&B's {"value": ...} wrapping)."""
    config = {}
    for item in items:
        key = _key(item)
        if key.startswith("_"):
            continue
        value = _value(item, path)
        config[key] = value["value"] if isinstance(value, dict) and set(value) <= {"value", "desc"} and \
            "value" in value else value
    return flatten(config)


def _read_offline(path: Path, src: Path) -> SourceRun:
    pb = needs("wandb.proto.wandb_internal_pb2", "wandb")
    name, exit_code = path.stem.removeprefix("run-"), None
    params: dict = {}
    scalars: dict = {}
    decode_error = needs("google.protobuf.message", "wandb").DecodeError
    for payload in _records(path):
        try:
            record = pb.Record.FromString(payload)
        except decode_error as exc:
            raise UsageError(f"{path}: corrupt W&B record, not a protobuf Record ({exc})") from None
        kind = record.WhichOneof("record_type")
        if kind == "run":
            name = record.run.display_name or record.run.run_id
            params.update(_config(record.run.config.update, path))
        elif kind == "config":
            params.update(_config(record.config.update, path))
        elif kind == "history":
            step = record.history.step.num
            for item in record.history.item:
                key, value = _key(item), _value(item, path)   # NaN stays NaN: a diverged run
                if not key.startswith("_") and isinstance(value, (int, float)) and not isinstance(value, bool):
                    scalars.setdefault(key, []).append((step, float(value)))
        elif kind == "exit":
            exit_code = record.exit.exit_code
    problem = "no exit record: W&B logged no end (still running, or killed)" if exit_code is None else \
        f"W&B exit code {exit_code}" if exit_code != 0 else None
    return SourceRun(name=name, params=params, scalars=scalars, problem=problem,
                     origin={"file": str(path.relative_to(src)) if path != src else path.name})


def _read_export(path: Path) -> SourceRun:
    if path.suffix == ".csv":
        check_header(path)
    try:
        frame = pd.read_csv(path) if path.suffix == ".csv" else pd.read_json(path, lines=path.suffix == ".jsonl")
    except ValueError as exc:
        raise UsageError(f"cannot read {path} as an exported W&B history: {exc}") from None
    if "_step" not in frame:
        raise UsageError(f"{path}: an exported W&B history has a '_step' column; "
                         f"found {', '.join(map(str, frame.columns))}")
    numeric = frame.apply(pd.to_numeric, errors="coerce")
    step = numeric["_step"]
    # Checked in range before astype(int), which wraps a step past int64 (1e19) to a negative one.
    bad = ~np.isfinite(step) | (step != step.round()) | (step < 0) | (step > float(LARGEST_STEP))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        held = frame["_step"].iloc[row]
        held = held.item() if isinstance(held, np.generic) else held      # 1e+19, not np.float64(1e+19)
        raise UsageError(f"{path}: '_step' must be whole numbers from 0 to 2^63 - 1; row {row + 1} holds {held!r}")
    steps = step.astype(int).tolist()
    scalars = {col: [(s, v) for s, v in zip(steps, numeric[col]) if v == v]
               for col in frame.columns if not col.startswith("_") and numeric[col].notna().any()}
    constant = {col: numeric[col].dropna().iloc[0] for col in scalars if numeric[col].dropna().nunique() == 1}
    return SourceRun(name=path.stem, params=constant, scalars=scalars, origin={"file": path.name})


def read(src: Path) -> list[SourceRun]:
    """The offline runs under `src` (a run folder, or a `wandb/` folder of them), or the exported
    histories in `src` (a file, or a folder of them)."""
    offline = sorted(src.rglob(RUN_FILES)) if src.is_dir() else [src] if src.suffix == ".wandb" else []
    if offline:
        return [_read_offline(p, src) for p in offline]
    exports = sorted(p for p in src.iterdir() if p.suffix in EXPORTS) if src.is_dir() else \
        [src] if src.suffix in EXPORTS else []
    if not exports:
        raise UsageError(f"{src}: no W&B offline run ({RUN_FILES}) and no exported history "
                         f"({', '.join(EXPORTS)})")
    return [_read_export(p) for p in exports]
