"""`dspine chat` in a real terminal (tmux) with an MCP server from the project's `.mcp.json`:
the server (and the child it starts) is gone after the chat is interrupted (SIGINT, what
Ctrl-C sends outside the TUI's raw mode) and after it is killed outright (SIGKILL), both
asserted by pid."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import ROOT, dspine_cmd, wait_for
from tests.support.mcp_servers import alive, entry, pids, write_mcp_json, write_server
from tests.tui.test_chat_tools_tmux import keys, screen, stand_in  # noqa: F401 (a fixture)

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
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


class McpStandIn(BaseHTTPRequestHandler):
    """A remote OpenAI-compatible server whose model calls the MCP tool once, then answers."""

    requests: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def choice(delta: dict, finish: str | None = None) -> dict:
            return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        if any(m["role"] == "tool" for m in body["messages"]):
            chunks = [choice({"content": "The server said it back."}), choice({}, "stop")]
        else:
            function = {"name": "kid__echo", "arguments": json.dumps({"text": "over the wire"})}
            chunks = [choice({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": function}]})]
            chunks.append(choice({}, "tool_calls"))
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def mcp_stand_in() -> Iterator[str]:
    McpStandIn.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), McpStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_an_mcp_call_through_a_remote_engine_waits_for_consent(env, mcp_stand_in, tmp_path):
    repo = tmp_path / "scratch"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    write_mcp_json(repo, {"kid": entry(write_server(tmp_path), "ok", tmp_path / "pids")})
    variables = {k: env[k] for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME") if k in env}
    variables |= {"DSPINE_CHATS_DB": str(tmp_path / "chats.db"), "PYTHONPATH": str(ROOT)}
    command = shlex.join(dspine_cmd("chat", "--engine", "remote", "--url", mcp_stand_in, "--think", "off"))
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
    session = f"dspine-mcp-remote-{tmp_path.name}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "110", "-y", "32", "-c", str(repo)], check=True)
    try:
        keys(session, f"env {exports} {command}", "Enter")
        wait_for(lambda: "MCP kid (.mcp.json): ready" in screen(session), 60, "the server")
        keys(session, "Echo something", "Enter")
        wait_for(lambda: "Call echo on the MCP server kid?" in screen(session), 30, "the consent dialog")
        shown = screen(session)
        print("\n--- dspine chat in tmux: an MCP call waiting for consent ---\n" + shown)
        assert '"text": "over the wire"' in shown and "always call kid's echo in this chat" in shown
        assert len(McpStandIn.requests) == 1  # nothing went on before the user said yes
        names = [t["function"]["name"] for t in McpStandIn.requests[0]["tools"]]
        assert "kid__echo" in names and "read_file" in names
        keys(session, "y")
        wait_for(lambda: "The server said it back." in screen(session), 30, "the next turn")
        (result,) = [m for m in McpStandIn.requests[-1]["messages"] if m["role"] == "tool"]
        assert result["content"] == "echo: over the wire"
        keys(session, "C-q")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
