"""One tool call in the conversation: a folded line (what was called, the user's
decision), its result or streamed command output inside, shown on click; for a change
applied, its diff above the result."""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Collapsible, Static

from ...terminal_text import controls_shown, for_terminal
from ..plain import plain

MAX_SHOWN = 20_000  # characters of output kept on screen; the model's copy is capped apart


def call_title(name: str, arguments: str) -> str:
    """`read_file src/a.py`: the tool and its main argument, on one line."""
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        args = {}
    if not isinstance(args, dict):
        args = {}
    main = args.get("command") or args.get("path") or args.get("pattern") or ""
    if not main and "__" in name:  # an MCP server's tool: its first arguments, key=value
        main = " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in list(args.items())[:3])
    text = controls_shown(f"{name} {main}".strip())
    return text if len(text) <= 100 else text[:99] + "…"


class ToolLine(Vertical):
    def __init__(self, name: str, arguments: str, result: str = "", decision: str = "", **kwargs) -> None:
        super().__init__(classes="message tool", **kwargs)
        self.tool = name
        self.arguments = arguments
        self.result = for_terminal(result)
        self.decision = decision
        self.shown = ""  # the diff of a change applied

    def _title(self) -> Content:
        # The model's arguments and an MCP tool's name are text, never markup (a `[@click=...]`
        # in them would make the folded line a button that runs an app action).
        return plain(f"⚙ {call_title(self.tool, self.arguments)}" + (f" · {self.decision}" if self.decision else ""))

    def compose(self) -> ComposeResult:
        with Collapsible(title=self._title(), collapsed=True):  # type: ignore[arg-type]
            yield Static(self._text(), markup=False, classes="tool-output")

    def _text(self) -> str:
        return f"{self.shown}\n{self.result}" if self.shown else self.result

    def append(self, text: str) -> None:
        """Streamed command output: shown as it comes, the line unfolded while it runs."""
        # Command output may colour itself or worse: no escape sequence reaches the terminal.
        self.result = (self.result + for_terminal(text))[-MAX_SHOWN:]
        self.query_one(Collapsible).collapsed = False
        self.query_one(".tool-output", Static).update(self.result)

    def finish(self, result: str, decision: str, shown: str = "") -> None:
        """`shown`: what the user sees beside the result (the diff of a change applied)."""
        self.result, self.decision = for_terminal(result)[-MAX_SHOWN:], decision
        self.shown = for_terminal(shown)[:MAX_SHOWN]
        box = self.query_one(Collapsible)
        box.title = self._title()  # type: ignore[assignment]
        box.collapsed = True
        self.query_one(".tool-output", Static).update(self._text())
