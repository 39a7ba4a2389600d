"""Permission modes: which tools the model is offered, and which calls go through without
a question, per mode. Pure: the session asks these, the chat only draws and sets the mode.

- `ask`: every tool is offered; edits, writes, commands and MCP calls ask (unless an
  "always" of this chat covers them).
- `accept-edits`: as `ask`, except that dspine's own edit_file and write_file go through
  without a question (the toolbox still refuses any path outside the project, and the
  chat still shows each diff). Commands and MCP calls ask as ever.
- `plan`: only the tools that need no consent (reads, listing, search, and any the toolbox
  marks so) are offered; a call to another tool is refused with `PLAN_REFUSAL` and never
  prepared. The model is asked for a plan; the user accepts it to go on in another mode.

No mode lets a command or an MCP call run unseen.
"""

from __future__ import annotations

from typing import get_args

from ..choices import PermissionMode
from .toolbox import ToolSpec

MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)  # in Shift+Tab's order
DEFAULT_MODE: PermissionMode = "ask"
LABELS: dict[PermissionMode, str] = {"ask": "ask", "accept-edits": "accept edits", "plan": "plan"}
# The tools accept-edits lets through: dspine's own, whose every path the toolbox checks.
EDIT_TOOLS = frozenset({"edit_file", "write_file"})

PLAN_REFUSAL = (
    "refused: the chat is in plan mode, where only reading tools run; nothing was changed or run. "
    "Read what you need, then answer with a plan (the steps, the files and the changes you would make); "
    "the user accepts it to go ahead."
)
# Goes with a prompt sent in plan mode (in the model's context only, not in the chat's transcript).
PLAN_NOTE = (
    "[dspine: the chat is in plan mode. Do not change anything: only the reading tools run. "
    "Read what you need, then answer with a plan; the user will accept it or ask for changes.]"
)
GO_AHEAD = "Go ahead with the plan."


def parse(word: str) -> PermissionMode | None:
    """A mode from what a user types (`accept-edits`, `accept edits`, `accept_edits`, `edits`)."""
    key = "-".join(word.strip().lower().replace("_", " ").split())
    if key == "edits":
        key = "accept-edits"
    for mode in MODES:
        if key == mode:
            return mode
    return None


def after(mode: PermissionMode) -> PermissionMode:
    """The next mode (Shift+Tab): ask → accept edits → plan → ask."""
    return MODES[(MODES.index(mode) + 1) % len(MODES)]


def offered(mode: PermissionMode, spec: ToolSpec) -> bool:
    """Whether the model is told of this tool in `mode`."""
    return mode != "plan" or not spec.needs_consent


def refused(mode: PermissionMode, spec: ToolSpec | None) -> bool:
    """Whether a call to this tool is refused outright (plan mode, a tool that would need
    consent). An unknown tool is the toolbox's to refuse."""
    return spec is not None and not offered(mode, spec)


def accepted(mode: PermissionMode, spec: ToolSpec | None) -> bool:
    """Whether a call that needs consent goes through without a question in `mode`."""
    return mode == "accept-edits" and spec is not None and spec.source == "dspine" and spec.name in EDIT_TOOLS
