"""Corpora and the token cache, on the builtin corpus and on local files."""

import json
import math
import os
import random
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from scaling.config import CorpusConfig, parse_config
from scaling.data.corpus import load_documents, load_split
from scaling.data.tokens import EOS, prepare_tokens
from scaling.errors import UsageError
from scaling.sweeps.driver import run_sweep
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
    (lambda p: (p / "x.jsonl").write_text('{"text": "ok"}\n{broken\n'), "x.jsonl:2 is not valid JSON"),
    (lambda p: (p / "x.jsonl").write_text('{"other": "ok"}\n'), "no text field 'text'"),
])
def test_bad_files(tmp_path, setup, expected):
    setup(tmp_path)
    with pytest.raises(UsageError, match=expected):
        load_documents(CorpusConfig(source="files", paths=[str(tmp_path / "x.*")]))


def test_a_latin_1_corpus_is_refused_naming_the_option_then_decoded_when_asked(tmp_path):
    for name in ("a.txt", "b.txt"):               # two documents: the split needs two
        (tmp_path / name).write_bytes("Caf\u00e9 au lait, na\u00efve.".encode("latin-1"))
    files = {"source": "files", "paths": [str(tmp_path / "*.txt")]}
    with pytest.raises(UsageError, match="not UTF-8 text .* set corpus.encoding"):
        load_documents(CorpusConfig(**files))
    docs = load_documents(CorpusConfig(**files, encoding="latin-1"))
    assert [d.text for d in docs] == ["Caf\u00e9 au lait, na\u00efve."] * 2
    with pytest.warns(UserWarning, match="2 undecodable byte sequence"):
        docs = load_documents(CorpusConfig(**files, decode_errors="replace"))
    assert [d.text for d in docs] == ["Caf\ufffd au lait, na\ufffdve."] * 2
    with pytest.raises(ValueError, match="unknown text encoding"):
        CorpusConfig(**files, encoding="klingon-8")


def test_a_dataset_saved_with_save_to_disk_is_read(tmp_path):
    import datasets

    texts = [f"Story {i}: the cat sat on the mat." for i in range(12)]
    datasets.Dataset.from_dict({"story": texts}).save_to_disk(str(tmp_path / "one"))
    cfg = CorpusConfig(source="hf", dataset=str(tmp_path / "one"), text_field="story")
    assert [d.text for d in load_documents(cfg)] == texts
    splits = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"story": texts[:8]}),
                                   "test": datasets.Dataset.from_dict({"story": texts[8:]})})
    splits.save_to_disk(str(tmp_path / "two"))
    cfg = CorpusConfig(source="hf", dataset=str(tmp_path / "two"), text_field="story", split="test")
    assert [d.text for d in load_documents(cfg)] == texts[8:]
    with pytest.raises(UsageError, match="no split 'valid' \\(splits: train, test\\)"):
        load_documents(cfg.model_copy(update={"split": "valid"}))


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


def byte_level_alphabet() -> dict[str, int]:
    """The byte each character of a byte-level BPE token spells: GPT-2's bytes_to_unicode (Radford
    et al. 2019), inverted. Printable Latin-1 bytes spell themselves; the others, in order, are
    spelled by the characters from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    shifted = iter(range(256, 512))
    return {(chr(b) if b in printable else chr(next(shifted))): b for b in range(256)}


# Words of 1-, 2-, 3- and 4-byte UTF-8 characters, so that BPE learns tokens of several bytes that
# hold whole or partial multi-byte characters.
WORDS = ["café", "naïve", "crème", "brûlée", "Zürich", "5 €", "€uro", "日本語", "テキスト", "😀", "🚀🚀",
         "the", "plain", "words"]


def test_bits_per_byte_count_the_utf8_bytes_of_multibyte_tokens(tmp_path):
    """Bits per byte = loss in nats x tokens / (UTF-8 bytes x ln 2), with the bytes counted here by
    spelling out each predicted token (one byte per document separator, as documented)."""
    rng = random.Random(0)
    for i in range(30):
        (tmp_path / f"doc{i:02d}.txt").write_text(" ".join(rng.choice(WORDS) for _ in range(80)), encoding="utf-8")
    T, eval_tokens = 16, 512
    cfg = parse_config({
        "name": "utf8", "corpus": {"source": "files", "paths": [str(tmp_path / "*.txt")], "val_fraction": 0.1},
        "tokenizer": {"vocab_size": 300}, "model": {"context_length": T},
        "grid": {"models": [{"d_model": 16, "n_layers": 1, "n_heads": 2}], "tokens": [2048]},
        "train": {"batch_tokens": 256, "eval_tokens": eval_tokens, "eval_interval": 8, "log_interval": 4}})
    summary, = run_sweep(cfg, tmp_path / "runs", tmp_path / "cache").trained

    cache = prepare_tokens(cfg, tmp_path / "cache")
    tokenizer, alphabet = cache.tokenizer(), byte_level_alphabet()
    eos = tokenizer.token_to_id(EOS)

    def spelled(token: int) -> bytes:
        return bytes(alphabet[c] for c in tokenizer.id_to_token(token))

    val = cache.val_tokens().tolist()
    documents = b"".join(b"\0" if t == eos else spelled(t) for t in val).split(b"\0")[:-1]
    assert [d.decode("utf-8") for d in documents] == [d.text for d in load_split(cfg.corpus, cfg.seed).val]

    predicted = val[1:(min(eval_tokens, len(val) - 1) // T) * T + 1]  # the targets of the eval windows
    n_bytes = sum(1 if t == eos else len(spelled(t)) for t in predicted)
    wide = {spelled(t) for t in predicted if t != eos and len(spelled(t)) > 1 and max(spelled(t)) >= 0x80}
    for char in "é€🚀":  # tokens that hold a whole character of 2, 3 and 4 bytes (and more besides)
        assert any(char.encode() in w and len(w) > len(char.encode()) for w in wide), char
    assert n_bytes > 1.5 * len(predicted)
    expected = summary["final_val_loss"] * len(predicted) / (n_bytes * math.log(2))
    assert summary["final_val_bpb"] == pytest.approx(expected, rel=1e-12)
    assert summary["final_val_bpb"] != pytest.approx(summary["final_val_loss"] / math.log(2), rel=0.1)
