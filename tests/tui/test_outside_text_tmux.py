"""The fifth hostile trial's reproduction in a real terminal (issue 51, high 1): the model
names a file whose "name" is Textual markup, `[@click=app.screenshot('../victim.txt')]`; the
folded tool line shows it as written, and a real mouse click on it (an SGR mouse report typed
into the terminal, as a mouse sends it) runs nothing: the file in the user's home keeps its
bytes. On the old code the line read `read_file README.md` and the click overwrote it with
an SVG screenshot (Textual saves screenshots in ~/Downloads: `../victim.txt` is ~/victim.txt)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.support.repos import scratch_repo
from tests.support.stand_in import StandIn, choice, stand_in
from tests.support.tmux import dspine_in_tmux, keys, screen

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

HOSTILE = "[@click=app.screenshot('../victim.txt')]README.md[/]"


def chunks(messages: list[dict]) -> list[dict]:
    if any(m["role"] == "tool" for m in messages):
        return [choice({"content": "That file does not exist."}), choice({}, "stop")]
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}}
    return [
        choice({"tool_calls": [call]}),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps({"path": HOSTILE})}}]}),
        choice({}, "tool_calls"),
    ]


@pytest.fixture
def model() -> Iterator[StandIn]:
    with stand_in(chunks) as served:
        yield served


def click(session: str, column: int, row: int) -> None:
    """A left click at 0-based (column, row), as a terminal reports it in SGR mouse mode."""
    at = f"{column + 1};{row + 1}"
    keys(session, "-l", f"\x1b[<0;{at}M\x1b[<0;{at}m")


def test_a_click_on_a_tool_line_whose_arguments_are_markup_runs_nothing(env, model, tmp_path):
    repo = scratch_repo(tmp_path)
    home = Path(env["HOME"])
    (home / "Downloads").mkdir(parents=True, exist_ok=True)
    victim = home / "victim.txt"
    victim.write_text("the user's own file\n")
    args = ("chat", "--engine", "remote", "--url", model.url, "--think", "off")
    with dspine_in_tmux(env, tmp_path, *args, cwd=repo, name="markup") as session:
        wait_for(lambda: "Ask about code" in screen(session), timeout=60, what="the chat to open")
        keys(session, "What does the README say?", "Enter")
        wait_for(lambda: "That file does not exist." in screen(session), timeout=30, what="the reply")
        lines = screen(session).splitlines()
        row = next(i for i, line in enumerate(lines) if "read_file" in line)
        print("\n--- the tool line in tmux ---\n" + lines[row])
        assert "read_file [@click=app.screenshot('../victim.txt')]README.md[/]" in lines[row]
        # Where "README.md" stood on the old screen ("⚙ read_file README.md"), and on this one.
        column = lines[row].index("read_file") + len("read_file ") + 2
        click(session, column, row)
        click(session, lines[row].index("README.md") + 2, row)
        # A click on the fold mark, after them: once it has unfolded the line, the clicks before
        # it were handled; a screenshot would then be written by a thread of its own.
        click(session, lines[row].index("▶"), row)
        wait_for(lambda: "▼ ⚙ read_file" in screen(session), timeout=30, what="the line to unfold")
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and victim.read_text() == "the user's own file\n":
            time.sleep(0.05)
        keys(session, "C-q")
        wait_for(lambda: "Ask about code" not in screen(session), timeout=30, what="the chat to quit")
    assert victim.read_text() == "the user's own file\n"
