"""The MCP servers of a chat on one project: discovered, not started (the chat starts
them once it is on screen, so it is usable at once), and whether the user trusts the
project's own servers yet."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..trust import TrustQuestion, TrustStore, fingerprint, question
from .config import discover
from .manager import McpManager
from .switches import Switches


@dataclass
class ProjectTrust:
    """The question about one project's MCP files as they were read, and its remembered answer."""

    root: Path
    files: str  # the fingerprint of the files the servers were read from
    store: TrustStore
    manager: McpManager

    def decision(self) -> bool | None:
        return self.store.decision(self.root, self.files)

    def question(self) -> TrustQuestion:
        not_used = [p for p in self.manager.problems if "is not used" in p]
        return question(self.root, self.manager.project_servers, not_used)

    def answer(self, trusted: bool) -> None:
        self.store.remember(self.root, self.files, trusted)
        self.manager.trust(trusted)


def for_project(
    root: Path, settings_servers: Mapping[str, Any] | None, switches_file: Path, trust_file: Path
) -> tuple[McpManager | None, ProjectTrust | None]:
    """The manager (None when nothing is configured anywhere and nothing was wrong), and the
    trust question when the project carries servers of its own. A remembered yes for these
    exact files trusts them at once; a no keeps them off without asking."""
    seen: dict[str, bytes] = {}
    specs, problems = discover(root, settings_servers, seen)
    if not specs and not problems:
        return None, None
    switches = Switches(switches_file, root)
    manager = McpManager(specs, root, switches, problems=[str(p) for p in problems])
    if not manager.project_servers:
        return manager, None
    trust = ProjectTrust(root, fingerprint(seen, root, manager.project_servers), TrustStore(trust_file), manager)
    manager.project_trusted = trust.decision() is True
    return manager, trust
