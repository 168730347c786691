"""Corpora and the token cache, on the builtin corpus and on local files."""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from scaling.config import CorpusConfig, parse_config
from scaling.data.corpus import load_documents, load_split
from scaling.data.tokens import EOS, prepare_tokens
from scaling.errors import UsageError
from tests.conftest import micro_config


def test_builtin_split_is_by_document_and_seeded():
    cfg = CorpusConfig(max_documents=40, val_fraction=0.1)
    a, b, c = load_split(cfg, 0), load_split(cfg, 0), load_split(cfg, 1)
    assert [d.id for d in a.val] == [d.id for d in b.val]
    assert [d.id for d in a.val] != [d.id for d in c.val]
    assert len(a.val) == 4 and len(a.train) == 36
    assert not {d.id for d in a.val} & {d.id for d in a.train}


def test_local_files_of_each_kind(tmp_path):
    (tmp_path / "a.txt").write_text("first document text")
    (tmp_path / "b.jsonl").write_text(json.dumps({"body": "second"}) + "\n\n" + json.dumps({"body": "third"}) + "\n")
    pd.DataFrame({"body": ["fourth", "fifth"]}).to_parquet(tmp_path / "c.parquet")
    docs = load_documents(CorpusConfig(source="files", paths=[str(tmp_path / "*")], text_field="body"))
    assert [d.text for d in docs][1:] == ["second", "third", "fourth", "fifth"]
    assert docs[0].text == "first document text"


def test_hf_source_reads_a_local_dataset(tmp_path):
    rows = [{"story": f"story number {i} " * 20} for i in range(12)]
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    cfg = CorpusConfig(source="hf", dataset=str(tmp_path), text_field="story", max_documents=10)
    docs = load_documents(cfg)
    assert len(docs) == 10 and docs[3].text.startswith("story number 3")


@pytest.mark.parametrize("setup, expected", [
    (lambda p: None, "matches no file"),
    (lambda p: (p / "x.txt").write_bytes(b"caf\xe9 latin-1"), "not UTF-8"),
    (lambda p: (p / "x.txt").write_text("   \n"), "non-empty document"),
    (lambda p: (p / "x.jsonl").write_text('{"text": "ok"}\n{broken\n'), "x.jsonl:2: not valid JSON"),
    (lambda p: (p / "x.jsonl").write_text('{"other": "ok"}\n'), "no text field 'text'"),
])
def test_bad_files(tmp_path, setup, expected):
    setup(tmp_path)
    with pytest.raises(UsageError, match=expected):
        load_documents(CorpusConfig(source="files", paths=[str(tmp_path / "x.*")]))


def test_unreachable_hub_names_the_offline_sources():
    # A fresh process with the hub switched off: huggingface_hub reads the switch at import.
    code = ("from scaling.data.corpus import load_documents; from scaling.config import CorpusConfig\n"
            "load_documents(CorpusConfig(source='hf', dataset='roneneldan/TinyStories'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert "UsageError" in done.stderr and "roneneldan/TinyStories" in done.stderr
    assert "corpus.source: builtin" in done.stderr and "corpus.source: files" in done.stderr


def test_token_cache_is_built_once_and_decodes_back(cache_dir):
    cfg = micro_config()
    cache = prepare_tokens(cfg, cache_dir)
    again = prepare_tokens(cfg, cache_dir)
    assert again.path == cache.path
    assert cache.vocab_size == 320 and cache.dtype == np.uint16
    train, val = cache.train_tokens(), cache.val_tokens()
    assert len(train) == cache.meta["train_tokens"] and len(val) == cache.meta["val_tokens"]
    split = load_split(cfg.corpus, cfg.seed)
    tok = cache.tokenizer()
    eos = tok.token_to_id(EOS)
    first_doc = val[: int(np.argmax(val == eos))]
    assert tok.decode(first_doc.tolist()) == split.val[0].text
    # Bytes per token add up to the validation text, plus one byte per document separator.
    assert cache.val_token_bytes().sum() == sum(len(d.text.encode()) + 1 for d in split.val)


def test_cache_key_follows_settings(cache_dir):
    a = prepare_tokens(micro_config(), cache_dir)
    b = prepare_tokens(micro_config(seed=1), cache_dir)
    assert a.path != b.path


def test_vocab_larger_than_corpus_allows(tmp_path):
    (tmp_path / "x.txt").write_text("ab ab ab ba")
    (tmp_path / "y.txt").write_text("ab ba ab")
    cfg = parse_config({"name": "t", "corpus": {"source": "files", "paths": [str(tmp_path / "*.txt")]},
                        "tokenizer": {"vocab_size": 5000},
                        "grid": {"models": [{"d_model": 8, "n_layers": 1, "n_heads": 1}], "tokens": [100]}})
    with pytest.raises(UsageError, match="larger than this corpus allows"):
        prepare_tokens(cfg, tmp_path / "cache")
    left = (tmp_path / "cache" / "tokens").glob("*")
    assert [p.name for p in left if not p.name.endswith(".lock")] == []  # the build's lock file, no cache
