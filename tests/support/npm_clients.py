"""Coding agents from npm (Claude Code, Codex, qwen-code, ...) for tests against
`dspine serve`: each package installed once per machine under
~/.cache/dspine-tests/npm/<name> (DSPINE_TEST_CACHE moves it, as for
tests/support/patched_server.py and tests/support/aider_client.py), under a file lock so test
processes running at once install it once; a test is skipped, with the reason,
only when npm or its registry cannot be reached from here.

The environments below point each agent at dspine alone: the endpoint and key
from `dspine serve --print-config TOOL`, a home folder of its own, and every
switch that keeps it from calling any other host (telemetry, update checks, error
reports, feedback surveys)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.support.caches import TEST_CACHE

CACHE = TEST_CACHE
NPM_DIR = CACHE / "npm"
# Pinned: their flags, environment variables and config formats are what the tests speak.
CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.332"
CODEX = "@openai/codex@0.171.0"
QWEN_CODE = "@qwen-code/qwen-code@0.24.4"
INSTALL_TIMEOUT_S = 900
PING_TIMEOUT_S = 30


class NpmUnavailable(Exception):
    """npm or its registry cannot be reached from here (the test is skipped with this)."""


def folder_for(package: str) -> Path:
    """`@openai/codex@0.171.0` -> NPM_DIR/openai+codex@0.171.0: one folder per pinned package."""
    return NPM_DIR / re.sub(r"[^A-Za-z0-9._@+-]", "+", package.lstrip("@"))


def npm_client(package: str, binary: str) -> Path:
    """The executable `binary` of the npm package `package` (NAME@VERSION), installing it
    first if this machine has not yet."""
    folder = folder_for(package)
    executable = folder / "node_modules" / ".bin" / binary
    done = folder / "installed"
    NPM_DIR.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists() and executable.exists():
            return executable
        _install(package, folder)
        if not executable.exists():
            raise RuntimeError(f"{package} installed no `{binary}` in {executable.parent}")
        done.write_text(package + "\n")
    return executable


def npm_client_or_skip(package: str, binary: str) -> Path:
    """`npm_client`, the test skipped with the reason where npm or its registry is out of reach."""
    import pytest

    try:
        return npm_client(package, binary)
    except NpmUnavailable as exc:
        pytest.skip(str(exc))


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise NpmUnavailable("npm is not installed here (Node.js and npm are needed for this client)")
    return npm


def registry_reachable() -> str | None:
    """None when npm's registry answers, else why not."""
    try:
        ping = subprocess.run(
            [_npm(), "ping", "--loglevel=error"],
            capture_output=True,
            text=True,
            timeout=PING_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"npm's registry did not answer `npm ping` in {PING_TIMEOUT_S} s"
    if ping.returncode != 0:
        tail = (ping.stderr or ping.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"npm's registry is not reachable (`npm ping`: {tail[0]})"
    return None


def _install(package: str, folder: Path) -> None:
    why = registry_reachable()
    if why is not None:
        raise NpmUnavailable(why)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    command = [
        _npm(),
        "install",
        "--prefix",
        str(partial),
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        "--loglevel=error",
        package,
    ]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"installing {package} took over {INSTALL_TIMEOUT_S} s") from exc
    if result.returncode != 0:
        tail = " / ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"npm install {package} failed: {tail}")
    # npm writes absolute paths into nothing it installs: the folder can be moved into place.
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


# -- environments ------------------------------------------------------------------

# Variables that would send a client elsewhere or give it someone's real key.
_FOREIGN = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "CODEX_HOME",
    "CLAUDE_CONFIG_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
)


def offline_env(home: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with a home folder of the client's
    own and every telemetry, update and error-report switch off."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in (base if base is not None else os.environ).items() if k not in _FOREIGN}
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "DO_NOT_TRACK": "1",
            "NO_UPDATE_NOTIFIER": "1",
            "npm_config_update_notifier": "false",
            "CI": "1",
            "TERM": "dumb",
            "NO_COLOR": "1",
        }
    )
    return env


def exports(printed: str, key: str | None = None) -> dict[str, str]:
    """The `export NAME=VALUE` lines of a `--print-config` snippet; `$NAME` values are the
    key variable dspine names (DSPINE_SERVE_API_KEY), resolved to `key`."""
    found = {}
    for name, value in re.findall(r"^export (\w+)=(.*)$", printed, flags=re.MULTILINE):
        if value.startswith("$"):
            if key is None:
                raise ValueError(f"{name} refers to {value}: give the key")
            value = key
        found[name] = value
    return found


def claude_code_env(printed: str, home: Path, key: str | None = None, base: dict[str, str] | None = None) -> dict:
    """For `claude -p`: what `dspine serve --print-config claude-code` printed, its own
    config folder, and Claude Code's switches for traffic other than the model's."""
    env = offline_env(home, base)
    env.update(exports(printed, key))
    env.update(
        {
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_SMALL_FAST_MODEL": env.get("ANTHROPIC_MODEL", ""),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_BUG_COMMAND": "1",
            "DISABLE_COST_WARNINGS": "1",
            "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
            "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
            "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
            "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
            "CLAUDE_CODE_USE_BEDROCK": "0",
            "CLAUDE_CODE_USE_VERTEX": "0",
        }
    )
    return env


def codex_env(printed: str, home: Path, key: str | None = None, base: dict[str, str] | None = None) -> dict:
    """For `codex exec`: the config.toml `dspine serve --print-config codex` printed, in a
    CODEX_HOME of its own, with Codex's analytics, update check and feedback off."""
    env = offline_env(home, base)
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = "\n".join(line for line in printed.splitlines() if not line.startswith("#"))
    # Top-level keys must come before the first [table]: put ours first.
    quiet = "check_for_update_on_startup = false\nhide_agent_reasoning = false\n"
    tables = '\n[analytics]\nenabled = false\n\n[feedback]\nenabled = false\n\n[otel]\nexporter = "none"\n'
    (codex_home / "config.toml").write_text(quiet + config.strip() + "\n" + tables)
    env["CODEX_HOME"] = str(codex_home)
    env_key = re.search(r'^env_key = "(\w+)"', printed, flags=re.MULTILINE)
    if env_key:
        if key is None:
            raise ValueError(f"the config reads the key from {env_key.group(1)}: give the key")
        env[env_key.group(1)] = key
    return env


# Switches qwen-code reads from the user's settings (~/.qwen/settings.json): no usage
# statistics, telemetry or update checks; its interface in English whatever the host's
# locale (the tests read its /context text); and nothing the test does not need in the
# prompt: no bundled skills listing, no auto-memory instructions (2,100 and 1,400 tokens by
# qwen-code's own /context count; its whole default prompt is 8,211 SmolLM2 tokens, over
# the 8,192 window).
QWEN_CODE_QUIET = {
    "general": {"enableAutoUpdate": False, "language": "en"},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "skills": {"disabledLevels": ["bundled", "user", "project", "extension"]},
    "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False, "enableAutoSkill": False},
}


def printed_json(printed: str) -> dict:
    """The settings file a `--print-config` snippet writes with a `<<'JSON'` heredoc."""
    return json.loads(printed.split("<<'JSON'\n", 1)[1].split("\nJSON\n", 1)[0])


def qwen_code_env(
    printed: str,
    home: Path,
    project: Path,
    reply: int | None = None,
    key: str | None = None,
    base: dict[str, str] | None = None,
) -> dict:
    """For `qwen -p`: the variables `dspine serve --print-config qwen-code` printed, its
    settings file written where it says (the project's .qwen/settings.json), the quiet
    switches in the user's settings. `reply`: the output limit instead of the printed one
    (a test's, as CLAUDE_CODE_TEST_REPLY)."""
    env = offline_env(home, base)
    env.update(exports(printed, key))
    env.update({"QWEN_TELEMETRY_ENABLED": "0", "QWEN_USAGE_STATISTICS_ENABLED": "0"})
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(QWEN_CODE_QUIET, indent=2))
    settings = printed_json(printed)
    if reply is not None:
        settings["model"]["generationConfig"]["samplingParams"]["max_tokens"] = reply
    (project / ".qwen").mkdir(parents=True, exist_ok=True)
    (project / ".qwen" / "settings.json").write_text(json.dumps(settings, indent=2))
    return env


# qwen-code, like Claude Code, gets a small output limit in tests: a 135M model decodes at
# about one token a second on a loaded 2-core machine. With a limit set, qwen-code takes a
# reply cut there as the reply (no escalation, no retry).
QWEN_CODE_TEST_REPLY = 32


# Claude Code sends temperature 1 (its default for Claude models), and at 1 a 135M model may
# run on and on; Claude Code then asks again, up to five times, each reply cut at its output
# limit (in CI once: six replies of 1,024 tokens, 560 s, then an error). A small limit keeps
# such a run short, and a reply cut there still came through the whole path: sent, streamed,
# parsed and counted by Claude Code.
CLAUDE_CODE_TEST_REPLY = "96"


def claude_code_answered(result: dict) -> bool:
    """Whether `claude -p --output-format json` got a reply: a finished one, or one cut at
    the output limit the test set (its usage counts the tokens that came back)."""
    if not result.get("is_error"):
        return bool(str(result.get("result", "")).strip())
    return result.get("api_error") == "max_output_tokens" and result.get("usage", {}).get("output_tokens", 0) > 0
