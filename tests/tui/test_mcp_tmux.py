"""`dspine chat` in a real terminal (tmux) with an MCP server from the project's `.mcp.json`:
the server (and the child it starts) is gone after the chat is interrupted (SIGINT, what
Ctrl-C sends outside the TUI's raw mode) and after it is killed outright (SIGKILL), both
asserted by pid."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.support.mcp_servers import alive, entry, pids, write_mcp_json, write_server
from tests.support.repos import scratch_repo
from tests.support.stand_in import StandIn, choice, stand_in
from tests.support.tmux import dspine_in_tmux, keys, screen

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="asserts by /proc"),
]


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def answers(messages: list[dict]) -> list[dict]:
    return [choice({"content": "ok"}), choice({}, "stop")]


def calls_echo_once(messages: list[dict]) -> list[dict]:
    """A model that calls the MCP tool once, then answers."""
    if any(m["role"] == "tool" for m in messages):
        return [choice({"content": "The server said it back."}), choice({}, "stop")]
    function = {"name": "kid__echo", "arguments": json.dumps({"text": "over the wire"})}
    return [
        choice({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": function}]}),
        choice({}, "tool_calls"),
    ]


@pytest.fixture
def model() -> Iterator[StandIn]:
    with stand_in(answers) as served:
        yield served


@pytest.fixture
def echo_model() -> Iterator[StandIn]:
    with stand_in(calls_echo_once) as served:
        yield served


def trust_the_project(session: str) -> None:
    """Say yes to the question about the project's own servers, once it takes keys."""
    wait_for(lambda: "Trust them?" in screen(session) and "y yes" in screen(session), 60, "the trust question")
    keys(session, "y")


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_no_mcp_server_outlives_the_chat(env, model, tmp_path, how):
    repo = scratch_repo(tmp_path)
    pidfile = tmp_path / "pids"
    write_mcp_json(repo, {"kid": entry(write_server(tmp_path), "ok-child", pidfile)})
    args = ("chat", "--engine", "remote", "--url", model.url, "--think", "off")
    with dspine_in_tmux(env, tmp_path, *args, cwd=repo, name="mcp") as session:
        trust_the_project(session)
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


def test_no_tools_starts_no_mcp_server(env, model, tmp_path):
    repo = scratch_repo(tmp_path)
    pidfile = tmp_path / "pids"
    write_mcp_json(repo, {"kid": entry(write_server(tmp_path), "ok", pidfile)})
    args = ("chat", "--engine", "remote", "--url", model.url, "--no-tools")
    with dspine_in_tmux(env, tmp_path, *args, cwd=repo, name="mcp-off") as session:
        wait_for(lambda: "Ask about code" in screen(session), 60, "the chat to open")
        keys(session, "/mcp", "Enter")
        wait_for(lambda: "None started: the chat began with --no-tools" in screen(session), 30, "the /mcp note")
        assert not pidfile.exists()
        keys(session, "C-q")


def test_an_mcp_call_through_a_remote_engine_waits_for_consent(env, echo_model, tmp_path):
    repo = scratch_repo(tmp_path)
    write_mcp_json(repo, {"kid": entry(write_server(tmp_path), "ok", tmp_path / "pids")})
    args = ("chat", "--engine", "remote", "--url", echo_model.url, "--think", "off")
    with dspine_in_tmux(env, tmp_path, *args, cwd=repo, name="mcp-remote") as session:
        trust_the_project(session)
        wait_for(lambda: "MCP kid (.mcp.json): ready" in screen(session), 60, "the server")
        keys(session, "Echo something", "Enter")
        # The keys show once the question takes them (a moment of quiet keyboard after it appears).
        wait_for(lambda: "y yes" in screen(session) and "Call echo on the MCP server kid?" in screen(session), 30,
                 "the consent dialog")  # fmt: skip
        shown = screen(session)
        print("\n--- dspine chat in tmux: an MCP call waiting for consent ---\n" + shown)
        assert '"text": "over the wire"' in shown and "always call kid's echo in this chat" in shown
        assert len(echo_model.requests) == 1  # nothing went on before the user said yes
        names = [t["function"]["name"] for t in echo_model.requests[0]["tools"]]
        assert "kid__echo" in names and "read_file" in names
        keys(session, "y")
        wait_for(lambda: "The server said it back." in screen(session), 30, "the next turn")
        (result,) = [m for m in echo_model.requests[-1]["messages"] if m["role"] == "tool"]
        assert result["content"] == "echo: over the wire"
        keys(session, "C-q")


@contextlib.contextmanager
def recording_http() -> Iterator[tuple[str, list[bytes]]]:
    """A listener on 127.0.0.1 that keeps every request it gets (line, headers and body) and
    answers 404: what a project's http server would receive."""
    seen: list[bytes] = []

    class Keep(http.server.BaseHTTPRequestHandler):
        def _keep(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append(self.requestline.encode() + b"\n" + bytes(self.headers) + body)
            self.send_error(404)

        do_GET = do_POST = do_DELETE = _keep

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Keep)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_project_server_starts_only_after_the_user_trusts_the_project(env, model, tmp_path):
    """The issue's check: a `.mcp.json` command that leaves a marker, and an http server whose
    URL takes `${SECRET}`: nothing runs and nothing is sent before the user says yes, and then
    the server gets what the question showed (SECRET), not the user's other variables."""
    repo = scratch_repo(tmp_path)
    marker = tmp_path / "pids"
    with recording_http() as (url, seen):
        write_mcp_json(
            repo,
            {
                "kid": entry(write_server(tmp_path), "ok", marker),
                "web": {"type": "http", "url": url + "/mcp?k=${SECRET}"},
            },
        )
        args = ("chat", "--engine", "remote", "--url", model.url, "--think", "off")
        secrets = {"SECRET": "shown-secret-4711", "OTHER_SECRET": "unshown-secret-0815"}
        with dspine_in_tmux(env, tmp_path, *args, cwd=repo, name="trust", extra_env=secrets) as session:
            wait_for(lambda: "Trust them?" in screen(session) and "y yes" in screen(session), 60, "the trust question")
            shown = screen(session)
            print("\n--- dspine chat in tmux: the project's MCP servers waiting for trust ---\n" + shown)
            assert "gets your variables: SECRET" in shown and "${SECRET}" in shown
            assert "shown-secret-4711" not in shown
            assert not marker.exists() and seen == []  # nothing ran, nothing was sent
            keys(session, "y")
            pids(marker)  # the project's command ran, once trusted
            wait_for(lambda: bool(seen), 30, "the http server's first request")
            received = b"".join(seen)
            assert b"k=shown-secret-4711" in received and b"unshown-secret-0815" not in received
            keys(session, "C-q")
