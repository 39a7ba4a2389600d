"""An MCP tool call end to end on both local engines, with a real MCP server from the
package index (mcp-server-time) configured in the project's `.mcp.json`: the generated
model (tests/support/script_model.py) calls `time__get_current_time`, the chat asks for consent,
the server answers, and the model's next turn comes only once that answer (its
`day_of_week` field) is in its context. `/mcp` lists the server with the tokens its
tool definitions take, counted by the engine's own tokenizer."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.agent.mcp.setup import for_project
from app.agent.project import open_project
from app.chat.store import ChatStore
from app.tui.app import ChatApp
from app.tui.screens.consent import ConsentScreen
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.tool_line import ToolLine
from backends.events import Delta, End, ToolCall
from tests.support.local_engines import KINDS, Counts, Recorded, open_local
from tests.support.pilot import answer, until
from tests.support.script_model import Script, write_script_model

TIME_SERVER = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent)) or shutil.which("mcp-server-time")
pytestmark = pytest.mark.skipif(TIME_SERVER is None, reason="mcp-server-time is not installed (pip install -e .[test])")

# The Qwen3-Coder XML call; the marker is a key only the server's answer holds.
SCRIPT = Script(
    call=(
        "<tool_call>",
        "\n<function=time__get_current_time>\n",
        "<parameter=timezone>\n",
        "Asia/Kathmandu",
        "\n</parameter>\n",
        "</function>\n",
        "</tool_call>",
    ),
    answer=("The time server answered, ", "day_of_week", " included", "."),
    marker="day_of_week",
    n_ctx_train=8192,
)


@dataclass
class Counting(Counts, Recorded):
    """Recorded, plus the engine's token count (what /mcp uses)."""


@pytest.fixture(scope="module")
def script_model(tmp_path_factory) -> Path:
    return write_script_model(tmp_path_factory.mktemp("mcp-script") / "mcp-script.gguf", script=SCRIPT)


# The generated vocabulary spells most text a byte a token: the built-in and the time server's
# tool definitions alone take about 3,300 tokens, so the context is 8K.
@pytest.fixture(params=KINDS)
def engine(request, script_model, tmp_path):
    opened = open_local(request.param, script_model, 8192, tmp_path, self_draft=True)
    yield Counting(opened)
    opened.close()


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    servers = {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return root


async def test_an_mcp_call_reaches_the_server_and_its_answer_reaches_the_model(engine, repo, tmp_path):
    store = ChatStore(tmp_path / "chats.db")
    manager, trust = for_project(repo, None, tmp_path / "switches.json", tmp_path / "trust.json")
    assert manager is not None and trust is not None
    app = ChatApp(engine, store, model="script", project=open_project(repo), mcp=manager, mcp_trust=trust)
    try:
        async with app.run_test() as pilot:
            # The project's own server waits for the user's trust, then starts.
            await until(pilot, lambda: isinstance(app.screen, ConsentScreen), 60, "the trust question")
            assert manager.servers["time"].status == "untrusted"
            await answer(pilot, "y")
            await until(pilot, lambda: manager.servers["time"].status == "ready", 60, "the time server")
            app.query_one("#prompt").load_text("/mcp")
            await pilot.press("enter")
            await until(pilot, lambda: any("MCP servers" in v.answer for v in app.query(MessageView)), 60, "/mcp")
            listing = [v.answer for v in app.query(MessageView) if "MCP servers" in v.answer][-1]
            tokens, exact = manager.cost(
                "time", lambda tools: engine.count_tokens([{"role": "user", "content": "."}], tools)
            )
            assert exact and tokens > 50
            assert "**time** · ready · .mcp.json" in listing and "2 tools, " in listing and "~" not in listing

            app.query_one("#prompt").load_text("What time is it in Kathmandu?")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConsentScreen), 180, "the consent dialog")
            assert app.screen.question == "Call get_current_time on the MCP server time?"
            assert json.loads(app.screen.body) == {"timezone": "Asia/Kathmandu"}
            await answer(pilot, "y")
            await until(pilot, lambda: len(engine.replies) == 2 and not app.streaming, 180, "the second turn")

            first, second = engine.replies
            calls = [e for e in first if isinstance(e, ToolCall)]
            assert [(c.name, json.loads(c.arguments)) for c in calls] == [
                ("time__get_current_time", {"timezone": "Asia/Kathmandu"})
            ]
            assert isinstance(first[-1], End) and first[-1].reason == "tool_calls"
            (result,) = [m for m in engine.sent[1] if m["role"] == "tool"]
            answered = json.loads(result["content"])
            assert answered["timezone"] == "Asia/Kathmandu" and answered["datetime"].endswith("+05:45")
            assert "".join(e.text for e in second if isinstance(e, Delta)) == SCRIPT.answer_text
            (line,) = app.query(ToolLine)
            assert line.decision == "yes"
    finally:
        manager.close()
        store.close()
