"""Issue 37: `run` and `serve` start thinking the way `chat` does: on, unless the model's
own chat template has no thinking mode (SmolLM2's ChatML), where "on" would only cost the
think preset's penalties. A --think the user gives always wins."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx2
import pytest

from app.run.think_default import starting_think
from tests.support.gguf_models import chat_model, write_model
from tests.support.serve_harness import ServeProcess
from tests.unit.test_thinking_mode import CHATML


@pytest.fixture(scope="module")
def chatml_target(tmp_path_factory):
    """A generated model whose template is plain ChatML: no thinking mode."""
    folder = tmp_path_factory.mktemp("chatml")
    return write_model(folder / "chatml-target.gguf", replace(chat_model(), chat_template=CHATML), scale=0.02)


@pytest.fixture(scope="module")
def thinking_target(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("qwen-like") / "qwen-like.gguf", chat_model(), scale=0.02)


def test_the_default_follows_the_template_and_a_given_mode_wins(chatml_target, thinking_target, tmp_path):
    assert starting_think(None, chatml_target) == (False, True)
    assert starting_think(None, thinking_target) == (True, False)
    assert starting_think("on", chatml_target) == (True, False)
    assert starting_think("off", thinking_target) == (False, False)
    assert starting_think(None, None) == (True, False)  # a remote model: nothing to read
    # A file that cannot be read keeps the default; the engine says what is wrong with it.
    assert starting_think(None, tmp_path / "missing.gguf") == (True, False)


def run_json(dspine, target, *extra: str):
    done = dspine("run", "--model", str(target), "hi", "-n", "2", "--engine", "inproc", "--temp", "0", "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["stats"]["think"]


def test_run_thinks_only_where_the_model_can(dspine, chatml_target, thinking_target):
    assert run_json(dspine, chatml_target) is False
    assert run_json(dspine, thinking_target) is True
    assert run_json(dspine, chatml_target, "--think", "on") is True


def test_run_says_why_thinking_is_off(dspine, chatml_target):
    done = dspine("run", "--model", str(chatml_target), "hi", "-n", "2", "--engine", "inproc", "--temp", "0")
    assert done.returncode == 0, done.stderr
    assert "chatml-target.gguf has no thinking mode: thinking is off\n" in done.stderr


def test_serve_defaults_to_no_thinking_for_a_model_without_it(env, chatml_target):
    served = ServeProcess(env, "--model", str(chatml_target), "--ctx", "1024")
    try:
        listed = httpx2.get(served.url + "/models", timeout=30).json()
        assert listed["data"][0]["meta"]["think"] is False
        assert any("has no thinking mode" in line for line in served.errors)
        assert served.stop() == 0
    finally:
        served.process.kill()
    served = ServeProcess(env, "--model", str(chatml_target), "--ctx", "1024", "--think", "on")
    try:
        assert httpx2.get(served.url + "/models", timeout=30).json()["data"][0]["meta"]["think"] is True
        assert served.stop() == 0
    finally:
        served.process.kill()
