"""Byte-level BPE and the token cache.

The tokenizer is trained on the training documents only. Both splits are tokenized once, in
batches, into flat arrays on disk (uint16 when the vocabulary fits, else uint32) that training
memory-maps. The cache folder is keyed by a hash of the corpus content, the split, the
tokenizer settings and the seed, so every run of a sweep, and every later sweep with the same
key, reuses it. A cache is written to a temporary folder and renamed into place when complete,
so a kill while tokenizing leaves no half cache behind. A cache is built under a lock on its key:
a second sweep wanting the same cache waits and then uses it, and the builder removes what a
killed build left. A cache found on disk is checked against its settings and the sizes of its
files before it is used; a cache folder without meta.json (damaged after it was renamed into
place) is rebuilt. Cache folders get the mode the umask gives, as a plain mkdir would.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from scaling.config import SweepConfig
from scaling.data.corpus import Document, Split, load_split
from scaling.errors import UsageError
from scaling.reading import excerpt, read_json
from scaling.runs import faults, locks, store

EOS = "<|endoftext|>"
CACHE_VERSION = 1
ENCODE_BATCH = 64  # documents per encode_batch call: bounded memory, parallel in Rust


@dataclass(frozen=True)
class TokenCache:
    """A finished cache folder: tokenizer.json, train.bin, val.bin, val_bytes.bin, meta.json."""

    path: Path
    meta: dict

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.meta["dtype"])

    def train_tokens(self) -> np.ndarray:
        return np.memmap(self.path / "train.bin", dtype=self.dtype, mode="r")

    def val_tokens(self) -> np.ndarray:
        return np.fromfile(self.path / "val.bin", dtype=self.dtype)

    def val_token_bytes(self) -> np.ndarray:
        return np.fromfile(self.path / "val_bytes.bin", dtype=np.uint8)

    def tokenizer(self) -> Tokenizer:
        return Tokenizer.from_file(str(self.path / "tokenizer.json"))

    @property
    def vocab_size(self) -> int:
        return self.meta["vocab_size"]


def default_cache_dir() -> Path:
    """$SCALING_CACHE_DIR, else $XDG_CACHE_HOME/scaling, else ~/.cache/scaling."""
    if os.environ.get("SCALING_CACHE_DIR"):
        return Path(os.environ["SCALING_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scaling"


def cache_key(cfg: SweepConfig, split: Split) -> str:
    spec = {
        "version": CACHE_VERSION,
        "corpus": cfg.corpus.model_dump(),
        "tokenizer": cfg.tokenizer.model_dump(),
        "seed": cfg.seed,
        "content": split.digest,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def train_tokenizer(split: Split, vocab_size: int, min_frequency: int) -> Tokenizer:
    """A byte-level BPE (GPT-2 style) on the training documents; fails if the vocab can't be filled."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((d.text for d in split.train), trainer=trainer, length=len(split.train))
    if tokenizer.get_vocab_size() < vocab_size:
        raise UsageError(
            f"tokenizer.vocab_size {vocab_size} is larger than this corpus allows: BPE ran out of "
            f"merges at {tokenizer.get_vocab_size()} tokens (min_frequency {min_frequency}); "
            f"use tokenizer.vocab_size <= {tokenizer.get_vocab_size()} or a larger corpus")
    return tokenizer


def token_byte_lengths(tokenizer: Tokenizer) -> np.ndarray:
    """UTF-8 bytes each token id stands for. Byte-level tokens spell one byte per character;
    the document separator counts as one byte, like the newline it replaces."""
    lengths = np.ones(tokenizer.get_vocab_size(), dtype=np.uint8)
    for token, idx in tokenizer.get_vocab().items():
        if token != EOS:
            lengths[idx] = len(token)
    return lengths


def _write_tokens(tokenizer: Tokenizer, docs: list[Document], path: Path, dtype: np.dtype) -> int:
    """Encode documents in batches, each followed by EOS, appending to a flat binary file."""
    eos = tokenizer.token_to_id(EOS)
    count = 0
    with open(path, "wb") as f:
        for start in range(0, len(docs), ENCODE_BATCH):
            batch = [d.text for d in docs[start:start + ENCODE_BATCH]]
            for encoding in tokenizer.encode_batch(batch, add_special_tokens=False):
                ids = np.asarray(encoding.ids + [eos], dtype=dtype)
                f.write(ids.tobytes())
                count += len(ids)
    return count


def token_dtype(vocab_size: int) -> np.dtype:
    """The cache's integer type: the smallest unsigned one that holds every token id."""
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def _out_of_vocabulary(path: Path, meta: dict) -> str | None:
    """Which token file holds an id outside the vocabulary (a damaged or edited cache), or None.
    Read in slices of a memory map: a pass over the file, in bounded memory."""
    for name in ("train.bin", "val.bin"):
        tokens = np.memmap(path / name, dtype=meta["dtype"], mode="r")
        for lo in range(0, tokens.size, 2**24):
            top = int(tokens[lo:lo + 2**24].max())
            if top >= meta["vocab_size"]:
                return f"{name} holds token id {top}, outside the vocabulary of {meta['vocab_size']}"
    return None


def build_cache(cfg: SweepConfig, split: Split, path: Path) -> TokenCache:
    tokenizer = train_tokenizer(split, cfg.tokenizer.vocab_size, cfg.tokenizer.min_frequency)
    dtype = token_dtype(tokenizer.get_vocab_size())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
    try:
        os.chmod(tmp, store.dir_mode())   # a cache others may share gets the umask's mode, not mkdtemp's 0700
        tokenizer.save(str(tmp / "tokenizer.json"))
        n_train = _write_tokens(tokenizer, split.train, tmp / "train.bin", dtype)
        n_val = _write_tokens(tokenizer, split.val, tmp / "val.bin", dtype)
        val = np.fromfile(tmp / "val.bin", dtype=dtype)
        val_bytes = token_byte_lengths(tokenizer)[val]
        val_bytes.tofile(tmp / "val_bytes.bin")
        meta = {
            "key": path.name,
            "dtype": np.dtype(dtype).name,
            "vocab_size": tokenizer.get_vocab_size(),
            "train_tokens": n_train,
            "val_tokens": n_val,
            "train_documents": len(split.train),
            "val_documents": len(split.val),
            "train_bytes": sum(len(d.text.encode()) for d in split.train),
            "val_bytes": int(val_bytes.sum()),
            "bytes_per_token": float(val_bytes.sum() / n_val),
            "corpus": cfg.corpus.model_dump(),
            "tokenizer": cfg.tokenizer.model_dump(),
            "seed": cfg.seed,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        faults.point("rename:tokens")
        os.replace(tmp, path)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):   # a full disk names the cache being built, not nothing or its temporary twin
            raise store.naming(exc, path) from exc
        raise
    return TokenCache(path, meta)


def _open_cache(path: Path, key: str, cfg: SweepConfig) -> TokenCache | None:
    meta_path = path / "meta.json"
    if not meta_path.exists():
        return None
    try:
        meta = read_json(meta_path)
    except UsageError:
        meta = {}
    rebuild = "; delete that folder to rebuild it"
    if not isinstance(meta, dict) or meta.get("key") != key:
        raise UsageError(f"token cache {path} does not match its settings (meta.json corrupt or from "
                         f"another version){rebuild}")
    for name, value in (("corpus", cfg.corpus.model_dump()), ("tokenizer", cfg.tokenizer.model_dump()),
                        ("seed", cfg.seed)):
        if meta.get(name) != value:
            raise UsageError(f"token cache {path} was built with {name} {meta.get(name)!r}, not this "
                             f"sweep's {value!r}{rebuild}")
    vocab = meta.get("vocab_size")
    if not isinstance(vocab, int) or isinstance(vocab, bool) or not 0 < vocab <= 2**32 or \
            meta.get("dtype") != token_dtype(vocab).name:
        raise UsageError(f"token cache {path}: meta.json's vocab_size {excerpt(vocab)} and dtype "
                         f"{excerpt(meta.get('dtype'))} are not those the cache is written with (an unsigned "
                         f"integer type holding the vocabulary){rebuild}")
    try:
        itemsize = np.dtype(meta["dtype"]).itemsize
        sizes = {"train.bin": meta["train_tokens"] * itemsize, "val.bin": meta["val_tokens"] * itemsize,
                 "val_bytes.bin": meta["val_tokens"]}
        found = {name: (path / name).stat().st_size for name in [*sizes, "tokenizer.json"]}
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise UsageError(f"token cache {path} is incomplete ({type(exc).__name__}: {exc}){rebuild}") from None
    for name, size in sizes.items():
        if found[name] != size:
            raise UsageError(f"token cache {path}: {name} has {found[name]} bytes where meta.json "
                             f"implies {size}{rebuild}")
    problem = _out_of_vocabulary(path, meta)
    if problem:
        raise UsageError(f"token cache {path}: {problem}{rebuild}")
    return TokenCache(path, meta)


def _clear_incomplete(path: Path) -> None:
    """Remove a cache folder without meta.json, so that it is rebuilt: a build renames only complete
    folders into place, so this one was damaged since, and a rename onto it would fail on every
    call. Anything else in its place (a file, a link) is not ours to delete: refused, named."""
    if not (path.exists() or path.is_symlink()):
        return
    if not path.is_dir() or path.is_symlink():
        raise UsageError(f"{path} is not a token cache folder (a file or link is in its place); move or delete it")
    shutil.rmtree(path)


def known_train_tokens(cfg: SweepConfig, cache_dir: Path | None = None) -> int | None:
    """The training tokens of a token cache already built with cfg's corpus, tokenizer and seed, or
    None: what a dry run can say about epochs without reading (or downloading) the corpus. A local
    corpus edited since the cache was built would give a stale count: it is an estimate."""
    wanted = {"corpus": cfg.corpus.model_dump(), "tokenizer": cfg.tokenizer.model_dump(), "seed": cfg.seed}
    for meta_path in sorted((Path(cache_dir or default_cache_dir()) / "tokens").glob("*/meta.json")):
        try:
            meta = read_json(meta_path)
        except (UsageError, OSError):
            continue
        if isinstance(meta, dict) and all(meta.get(k) == v for k, v in wanted.items()) and \
                isinstance(meta.get("train_tokens"), int):
            return meta["train_tokens"]
    return None


def prepare_tokens(cfg: SweepConfig, cache_dir: Path | None = None) -> TokenCache:
    """Load the corpus, then return the token cache for it, building it the first time."""
    split = load_split(cfg.corpus, cfg.seed)
    key = cache_key(cfg, split)
    path = Path(cache_dir or default_cache_dir()) / "tokens" / key
    cache = _open_cache(path, key, cfg)
    if cache is not None:
        return cache
    path.parent.mkdir(parents=True, exist_ok=True)
    with locks.locked(path.parent / f".{key}.lock"):
        cache = _open_cache(path, key, cfg)  # built by another sweep while this one waited
        if cache is None:
            for stale in path.parent.glob(f".{key}.*"):
                if stale.is_dir():  # the temporary folder of a build that was killed
                    shutil.rmtree(stale)
            _clear_incomplete(path)
            cache = build_cache(cfg, split, path)
    return cache
