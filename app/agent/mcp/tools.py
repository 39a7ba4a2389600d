"""MCP tools as records of the toolbox: one ToolSpec per server tool, named
`server__tool`, waiting for consent like run_command (an MCP server can do anything).

The toolbox's MCP records change only when `sync` is called, which the session does
at the start of a user's turn: within a reply and its tool rounds the tool list, and
so the prompt's prefix, stays the same bytes.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from ...terminal_text import one_line
from ..toolbox import Done, ProposedCall, Step, Toolbox, ToolSpec
from .manager import McpManager, McpTool

SOURCE = "mcp:"  # a record's source: "mcp:" + the server's name


def _record(tool: McpTool, manager: McpManager) -> ToolSpec:
    def handler(box: Toolbox, args: dict[str, Any]) -> Step:
        if manager.find(tool.name) is None:  # its server stopped since this turn began: nothing to ask
            return Done(f"error: the MCP server {tool.server} is not running now; its tools are gone")

        def run(stop: threading.Event | None) -> str:
            return manager.call(tool.name, args, stop)

        # The user consents to exactly this: the server, its tool, these arguments.
        body = json.dumps(args, indent=2, ensure_ascii=False) if args else "(no arguments)"
        # The names are the server's words: one line each (a line break cannot push the
        # arguments out of the question, a bidi override cannot reorder what is shown).
        name, server = one_line(tool.tool), one_line(tool.server)
        return ProposedCall(
            f"Call {name} on the MCP server {server}?",
            body,
            run,
            f"always call {server}'s {name} in this chat",
        )

    return ToolSpec(
        tool.name, tool.description, tool.parameters, handler, needs_consent=True, source=SOURCE + tool.server
    )


class McpTools:
    """Keeps the toolbox's MCP records in step with the servers that are running."""

    def __init__(self, manager: McpManager) -> None:
        self.manager = manager
        self._sent: list[dict[str, Any]] = []  # the schemas the toolbox holds now
        self._synced = False  # the first turn's tools were announced as each server got ready

    def sync(self, toolbox: Toolbox) -> str | None:
        """Bring the toolbox up to date; what changed, for the user (None: nothing)."""
        tools = self.manager.tools()
        schemas = [tool.schema for tool in tools]
        first, self._synced = not self._synced, True
        if schemas == self._sent and not first:
            return None
        before = {s["function"]["name"] for s in self._sent}
        after = {t.name for t in tools}
        toolbox.replace_source(SOURCE, [_record(tool, self.manager) for tool in tools])
        self._sent = schemas
        if first:
            return None
        added, removed = sorted(after - before), sorted(before - after)
        parts = []
        if added:
            parts.append(f"{len(added)} added ({_servers(added)})")
        if removed:
            parts.append(f"{len(removed)} removed ({_servers(removed)})")
        return "MCP tools for this turn: " + ("; ".join(parts) if parts else "definitions changed")


def _servers(names: list[str]) -> str:
    return ", ".join(dict.fromkeys(name.split("__", 1)[0] for name in names))
