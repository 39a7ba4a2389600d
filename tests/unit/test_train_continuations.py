"""The trainer's continuations kept in the repository (issue 70): chunks written whole and
byte-identical for the same records, only the missing ones made, chunks made another way
refused rather than mixed, and the sequences file the rest of the recipe reads. No JAX."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from train_dspine import continuations as kept
from train_dspine.corpus import Prompt


def prompts(n: int) -> list[Prompt]:
    return [Prompt("code", "code.f", (("user", f"write f{i}"),), held_out=i % 7 == 0) for i in range(n)]


def fake_model():
    calls: list[list[int]] = []

    def tokenize(text: str) -> list[int]:
        return [len(text), text.count("f")]

    def greedy(tokens: list[int], n_predict: int) -> list[int]:
        calls.append(tokens)
        return [tokens[0] + k for k in range(n_predict)]

    return tokenize, greedy, calls


def test_only_missing_chunks_are_made_and_a_chunk_is_the_same_bytes_every_time(tmp_path):
    made = kept.header("a" * 64, "b1234", 0, 4)
    corpus = prompts(kept.CHUNK * 2 + 30)
    assert kept.missing(corpus, 250, tmp_path, made) == [0, 1, 2]
    assert kept.missing(corpus, 150, tmp_path, made) == [0, 1]
    tokenize, greedy, calls = fake_model()
    records = kept.make_chunk(corpus, 1, tokenize, greedy, 4, slots=3)
    assert [r["text"] for r in records] == [p.text for p in corpus[100:200]]  # the corpus's order
    path = kept.chunk_path(tmp_path, 1)
    kept.write_chunk(path, made, records)
    first = path.read_bytes()
    kept.write_chunk(path, made, records)
    assert path.read_bytes() == first and not list(tmp_path.glob("*.part"))
    assert kept.missing(corpus, 250, tmp_path, made) == [0, 2]
    header, back = kept.read_chunk(path)
    assert (
        header == made and back == records and back[0]["continuation"] == [back[0]["prompt"][0] + k for k in range(4)]
    )
    # Another server build of the same llama.cpp: its chunks are kept (greedy is greedy).
    assert kept.missing(corpus, 250, tmp_path, {**made, "server_version": "b9999"}) == [0, 2]


def test_chunks_made_another_way_are_refused_not_mixed(tmp_path):
    made = kept.header("a" * 64, "b1", 0, 4)
    corpus = prompts(120)
    tokenize, greedy, _ = fake_model()
    kept.write_chunk(kept.chunk_path(tmp_path, 0), made, kept.make_chunk(corpus, 0, tokenize, greedy, 4, 2))
    with pytest.raises(kept.Mismatch, match="target_sha256 'a+' \\(this run: 'c+'\\)"):
        kept.missing(corpus, 100, tmp_path, {**made, "target_sha256": "c" * 64})
    with pytest.raises(kept.Mismatch, match="n_predict 4 \\(this run: 8\\)"):
        kept.missing(corpus, 100, tmp_path, {**made, "n_predict": 8})
    with pytest.raises(kept.Mismatch, match="other prompts"):
        kept.missing(list(reversed(corpus)), 100, tmp_path, made)


def test_the_sequences_file_is_every_chunk_in_order(tmp_path):
    made = kept.header("a" * 64, "b1", 0, 2)
    corpus = prompts(150)
    tokenize, greedy, _ = fake_model()
    for index in (1, 0):
        kept.write_chunk(kept.chunk_path(tmp_path, index), made, kept.make_chunk(corpus, index, tokenize, greedy, 2, 2))
    out = tmp_path / "data" / "sequences.jsonl"
    assert kept.sequences(out, tmp_path) == 150
    import json

    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == [p.text for p in corpus]


def corpus_texts(seed: int) -> list[str]:
    """The corpus's prompt keys as a plain Python makes them, the way the generator runs: under
    pytest, `warnings.catch_warnings(record=True)` swaps `warnings._showwarnmsg_impl` for a
    list's append, so one stdlib function less is found and the shuffle differs."""
    import json
    import subprocess

    code = f"import json; from train_dspine.corpus import build; print(json.dumps([p.text for p in build({seed})]))"
    done = subprocess.run([sys.executable, "-c", code], cwd=kept.FOLDER.parent.parent, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_repositorys_chunks_are_whole_and_made_alike():
    """What is committed: each chunk reads back, holds CHUNK prompts of the corpus in order (the
    last may hold fewer) and says how it was made, all alike but for the server's version."""
    paths = sorted(kept.FOLDER.glob("chunk-*.jsonl.gz"))
    if not paths:
        pytest.skip("no continuations committed yet")
    first = kept.read_chunk(paths[0])[0]
    # The code prompts are cut from the stdlib's source: another Python makes other prompts.
    same_python = first["python"] == kept.header("", "", 0, 0)["python"]
    corpus = corpus_texts(first["seed"]) if same_python else []
    for index, path in enumerate(paths):
        assert path == kept.chunk_path(kept.FOLDER, index)
        made, records = kept.read_chunk(path)
        kept.check_made_alike(path, made, first)
        if same_python:
            expected = corpus[index * kept.CHUNK : (index + 1) * kept.CHUNK]
            assert [r["text"] for r in records] == expected
        assert all(len(r["continuation"]) <= made["n_predict"] and r["prompt"] for r in records)
