"""`dspine chat` in a real terminal (tmux) with an MCP server from the project's `.mcp.json`:
the server (and the child it starts) is gone after the chat is interrupted (SIGINT, what
Ctrl-C sends outside the TUI's raw mode) and after it is killed outright (SIGKILL), both
asserted by pid."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, dspine_cmd, wait_for
from tests.mcp_servers import entry, write_mcp_json, write_server
from tests.test_chat_tools_tmux import keys, screen, stand_in  # noqa: F401 (a fixture)
from tests.test_mcp import alive, pids

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="asserts by /proc"),
]


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_no_mcp_server_outlives_the_chat(env, stand_in, tmp_path, how):  # noqa: F811
    repo = tmp_path / "scratch"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    pidfile = tmp_path / "pids"
    write_mcp_json(repo, {"kid": entry(write_server(tmp_path), "ok-child", pidfile)})
    variables = {k: env[k] for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME") if k in env}
    variables |= {"DSPINE_CHATS_DB": str(tmp_path / "chats.db"), "PYTHONPATH": str(ROOT)}
    command = shlex.join(dspine_cmd("chat", "--engine", "remote", "--url", stand_in, "--think", "off"))
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
    session = f"dspine-mcp-{tmp_path.name}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "110", "-y", "32", "-c", str(repo)], check=True)
    try:
        keys(session, f"env {exports} {command}", "Enter")
        server, child = pids(pidfile)
        wait_for(lambda: "MCP kid (.mcp.json): ready, 2 tools" in screen(session), 60, "the ready notice")
        guard = parent(server)
        chat = parent(guard)
        assert (
            "dspine" in Path(f"/proc/{chat}/cmdline").read_text() or "app" in Path(f"/proc/{chat}/cmdline").read_text()
        )
        os.kill(chat, how)
        wait_for(lambda: not alive(chat), 30, "the chat to end")
        wait_for(lambda: not any(alive(p) for p in (server, child, guard)), 15, "the server, its child and its guard")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_no_tools_starts_no_mcp_server(env, stand_in, tmp_path):  # noqa: F811
    repo = tmp_path / "scratch"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    pidfile = tmp_path / "pids"
    write_mcp_json(repo, {"kid": entry(write_server(tmp_path), "ok", pidfile)})
    variables = {k: env[k] for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME") if k in env}
    variables |= {"DSPINE_CHATS_DB": str(tmp_path / "chats.db"), "PYTHONPATH": str(ROOT)}
    command = shlex.join(dspine_cmd("chat", "--engine", "remote", "--url", stand_in, "--no-tools"))
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
    session = f"dspine-mcp-off-{tmp_path.name}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "110", "-y", "32", "-c", str(repo)], check=True)
    try:
        keys(session, f"env {exports} {command}", "Enter")
        wait_for(lambda: "Ask about code" in screen(session), 60, "the chat to open")
        keys(session, "/mcp", "Enter")
        wait_for(lambda: "None started: the chat began with --no-tools" in screen(session), 30, "the /mcp note")
        assert not pidfile.exists()
        keys(session, "C-q")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
