"""Whether the user trusts what a project would start: its MCP servers.

A project's `.mcp.json` and `opencode.json` are the project's words: a downloaded
repository can name any command there, or a URL that gets the user's secrets through
`${VAR}`. So, as Claude Code does, the first chat in a project says what it would start or
reach (each server, its command or URL, and which of the user's variables it would get)
and asks. The answer is kept in dspine's data folder, never in the project, for this
project and for these files' exact contents: a change to either file asks again. Until
the user says yes, no project server starts and no variable is expanded for one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from backends.private import write_private_json

from .mcp.config import PROJECT_FILES, ServerSpec, variables

MAX_SHOWN = 400  # characters of one command or URL in the question; the rest is said to be cut


def fingerprint(seen: Mapping[str, bytes]) -> str:
    """The project's MCP files as they were read (`config.discover`'s `seen`): names and bytes."""
    digest = hashlib.sha256()
    for name, _, _ in PROJECT_FILES:
        data = seen.get(name)
        digest.update(name.encode() + b"\0")
        digest.update(b"-" if data is None else hashlib.sha256(data).digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class TrustQuestion:
    title: str
    body: str


def _cut(text: str) -> str:
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[: MAX_SHOWN // 2]} [… {len(text) - MAX_SHOWN:,} characters …] {text[-MAX_SHOWN // 2 :]}"


def question(root: Path, servers: Sequence[ServerSpec], not_used: Sequence[str] = ()) -> TrustQuestion:
    """What the project would start or reach, as the user is asked it: nothing expanded."""
    lines = []
    for spec in servers:
        where = Path(spec.source).name
        if spec.transport == "http":
            lines.append(f"- {spec.name} ({where}): connects to {_cut(spec.url)}")
            if spec.headers:
                lines.append(f"  headers: {', '.join(spec.headers)}")
        else:
            lines.append(f"- {spec.name} ({where}): runs {_cut(spec.describe())}")
        given = variables(spec)
        lines.append("  gets your variables: " + ", ".join(given) if given else "  gets none of your variables by name")
        if not spec.enabled:
            lines.append("  (switched off in the file: starts only with /mcp on)")
    for problem in not_used:
        lines.append(f"- {problem}")
    lines += [
        "",
        "y: trust these files as they are now (asked again if they change).",
        "n: start none of them; /mcp trust asks again.",
    ]
    return TrustQuestion(f"{root} would start or reach these MCP servers. Trust them?", "\n".join(lines))


class TrustStore:
    """The user's answers, per project and per content of its files: one small JSON file (0600)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _all(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}  # none yet, or damaged: every project asks again
        return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}

    def decision(self, root: Path, files: str) -> bool | None:
        """True (trusted) or False (declined) for the project's files with this `fingerprint`;
        None: not asked about them yet."""
        entry = self._all().get(str(root.resolve()))
        if entry is None or entry.get("fingerprint") != files:
            return None
        trusted = entry.get("trusted")
        return trusted if isinstance(trusted, bool) else None

    def remember(self, root: Path, files: str, trusted: bool) -> None:
        data = self._all()
        data[str(root.resolve())] = {"fingerprint": files, "trusted": trusted}
        write_private_json(self.path, data)
