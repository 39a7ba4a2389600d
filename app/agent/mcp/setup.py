"""The MCP servers of a chat on one project: discovered, not started (the chat starts
them once it is on screen, so it is usable at once)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import discover
from .manager import McpManager
from .switches import Switches


def for_project(root: Path, settings_servers: Mapping[str, Any] | None, switches_file: Path) -> McpManager | None:
    """None when nothing is configured anywhere (and nothing was wrong)."""
    specs, problems = discover(root, settings_servers)
    if not specs and not problems:
        return None
    switches = Switches(switches_file, root)
    return McpManager(specs, root, switches, problems=[str(p) for p in problems])
