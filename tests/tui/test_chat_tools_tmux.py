"""`dspine chat` working on a scratch git repository in a real terminal (tmux): the model
(a stand-in OpenAI server on 127.0.0.1, through `--engine remote`) proposes one edit,
the diff waits for consent on screen, `y` applies it and the model's next turn follows.
The screen with the diff is printed into the test log."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import ROOT, dspine_cmd, wait_for

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

EDIT = {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}


def chunks(messages: list[dict]) -> list[dict]:
    """First turn: a sentence, then one edit_file call. After the tool's result: a last word."""

    def choice(delta: dict, finish: str | None = None) -> dict:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    if any(m["role"] == "tool" for m in messages):
        return [choice({"content": "Fixed: add adds now."}), choice({}, "stop")]
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "edit_file", "arguments": ""}}
    arguments = json.dumps(EDIT)
    return [
        choice({"content": "The subtraction is the bug; here is the fix."}),
        choice({"tool_calls": [call]}),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": arguments[:20]}}]}),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": arguments[20:]}}]}),
        choice({}, "tool_calls"),
    ]


class StandIn(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in chunks(body["messages"]):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args) -> None:  # keep the test log for the screen
        pass


@pytest.fixture
def stand_in() -> Iterator[str]:
    StandIn.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def keys(session: str, *typed: str) -> None:
    subprocess.run(["tmux", "send-keys", "-t", session, *typed], check=True)


def test_a_diff_waits_for_consent_in_tmux(env, stand_in, tmp_path):
    repo = tmp_path / "scratch"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    calc = repo / "calc.py"
    calc.write_text("def add(a, b):\n    return a - b\n")
    variables = {k: env[k] for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME") if k in env}
    # The chat runs in the scratch repository (its project); this checkout's code runs it.
    variables |= {"DSPINE_CHATS_DB": str(tmp_path / "chats.db"), "PYTHONPATH": str(ROOT)}
    command = shlex.join(dspine_cmd("chat", "--engine", "remote", "--url", stand_in, "--think", "off"))
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
    session = f"dspine-tools-{tmp_path.name}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "110", "-y", "32", "-c", str(repo)], check=True)
    try:
        keys(session, f"env {exports} {command}", "Enter")
        wait_for(lambda: "Ask about code" in screen(session), timeout=60, what="the chat to open")
        keys(session, "Fix the bug in calc.py", "Enter")
        # The dialog, and under it the reply so far and its folded tool line.
        wait_for(
            lambda: all(text in screen(session) for text in ("y yes", "here is the fix", "edit_file calc.py")),
            timeout=30,
            what="the consent dialog over the reply",
        )
        shown = screen(session)
        print("\n--- dspine chat in tmux: a diff waiting for consent ---\n" + shown)
        assert "edit calc.py (+1 -1)?" in shown
        assert "-    return a - b" in shown and "+    return a + b" in shown
        assert calc.read_text().endswith("a - b\n")  # nothing is written before the user says so
        keys(session, "y")
        wait_for(lambda: calc.read_text().endswith("a + b\n"), timeout=30, what="the edit")
        wait_for(lambda: "Fixed: add adds now." in screen(session), timeout=30, what="the next turn")
        assert "edit_file calc.py · yes" in screen(session)
        tool_results = [m for m in StandIn.requests[-1]["messages"] if m["role"] == "tool"]
        assert len(tool_results) == 1 and tool_results[0]["content"].startswith("applied")
        keys(session, "C-q")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
