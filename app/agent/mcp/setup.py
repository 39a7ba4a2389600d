"""The MCP servers of a chat on one project: discovered, not started (the chat starts
them once it is on screen, so it is usable at once), and whether the user trusts the
project's own servers and hooks yet (one question covers both)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...terminal_text import one_line
from ..hooks import Hooks
from ..skills import SkillSet
from ..trust import TrustQuestion, TrustStore, fingerprint, hook_files_digest, named_by, question
from .config import discover
from .manager import McpManager
from .switches import Switches


@dataclass
class ProjectTrust:
    """The question about one project's MCP files and hooks as they were read, and its
    remembered answer."""

    root: Path
    files: str  # the fingerprint of the files the servers and hooks were read from
    store: TrustStore
    manager: McpManager | None
    hooks: Hooks | None = None
    skills: SkillSet | None = None
    named: list[Path] = field(default_factory=list)  # what the servers and hooks run (app/agent/guarded.py)

    def decision(self) -> bool | None:
        return self.store.decision(self.root, self.files)

    def not_used(self) -> list[str]:
        """What the project carries that does not run until the user trusts it, each named (one
        line a thing: a script reads which guard is off, not just how many)."""
        servers = self.manager.project_servers if self.manager is not None else []
        hooks = self.hooks.config.project_hooks if self.hooks is not None else []
        skills = self.skills.project_skills if self.skills is not None else []
        return [
            *(f"MCP server {one_line(server.name)}" for server in servers),
            *(f"{hook.event} hook `{one_line(hook.command)}` ({hook.source})" for hook in hooks),
            *(f"skill {one_line(skill.name)} ({skill.shown})" for skill in skills),
        ]

    def changed_since_yes(self) -> bool:
        """The user trusted this project, and its files changed since (a guard may be off)."""
        return self.decision() is None and self.store.once_trusted(self.root)

    def question(self) -> TrustQuestion:
        servers = self.manager.project_servers if self.manager is not None else []
        not_used = [p for p in self.manager.problems if "is not used" in p] if self.manager is not None else []
        project_hooks = self.hooks.config.project_hooks if self.hooks is not None else []
        skills = [(s.name, s.shown, s.description) for s in self.skills.project_skills] if self.skills else []
        return question(self.root, servers, not_used, project_hooks, skills)

    def answer(self, trusted: bool) -> None:
        self.store.remember(self.root, self.files, trusted)
        if self.manager is not None:
            self.manager.trust(trusted)
        if self.hooks is not None:
            self.hooks.project_trusted = trusted
            self.hooks.pin()
        if self.skills is not None:
            self.skills.project_trusted = trusted


def for_project(
    root: Path,
    settings_servers: Mapping[str, Any] | None,
    switches_file: Path,
    trust_file: Path,
    hooks: Hooks | None = None,
    skills: SkillSet | None = None,
) -> tuple[McpManager | None, ProjectTrust | None]:
    """The manager (None when nothing is configured anywhere and nothing was wrong), and the
    trust question when the project carries servers or hooks of its own. A remembered yes
    for these exact files trusts them at once; a no keeps them off without asking."""
    seen: dict[str, bytes] = {}
    specs, problems = discover(root, settings_servers, seen)
    manager = None
    if specs or problems:
        manager = McpManager(specs, root, Switches(switches_file, root), problems=[str(p) for p in problems])
    servers = manager.project_servers if manager is not None else []
    project_hooks = hooks.config.project_hooks if hooks is not None else []
    project_skills = skills.seen if skills is not None and skills.project_skills else {}
    if not servers and not project_hooks and not project_skills:
        return manager, None
    files = fingerprint(seen, root, servers, project_hooks, project_skills)
    trust = ProjectTrust(
        root,
        files,
        TrustStore(trust_file),
        manager,
        hooks if project_hooks else None,
        skills if project_skills else None,
        named_by(root, servers, project_hooks),
    )
    trusted = trust.decision() is True
    if manager is not None:
        manager.project_trusted = trusted
    if hooks is not None:
        hooks.project_trusted = trusted
        hooks.files_digest = lambda hook: hook_files_digest(root, hook)
        hooks.pin()  # as they were when the remembered yes (or this chat's) was given: they are unchanged
    if skills is not None:
        skills.project_trusted = trusted
    return manager, trust
