"""Which MCP servers the user switched on or off, per project, remembered.

Kept in dspine's data folder (`Settings.mcp_switches_file`), one small JSON file (0600) keyed by the project's root:
not in the project, because the choice is the user's and not the team's (a shared
`.mcp.json` stays as it is, `git status` stays clean, `git clean` does not forget it).
"""

from __future__ import annotations

import json
from pathlib import Path

from backends.private import write_private_json


class Switches:
    def __init__(self, path: Path, root: Path) -> None:
        self.path = path
        self.root = str(root.resolve())

    def _all(self) -> dict[str, dict[str, bool]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or damaged: every server as configured
        if not isinstance(data, dict):
            return {}
        return {
            root: {name: on for name, on in servers.items() if isinstance(on, bool)}
            for root, servers in data.items()
            if isinstance(servers, dict)
        }

    def get(self) -> dict[str, bool]:
        """Server name -> on (True) or off (False), for this project; absent: as configured."""
        return self._all().get(self.root, {})

    def set(self, name: str, on: bool) -> None:
        data = self._all()
        data.setdefault(self.root, {})[name] = on
        write_private_json(self.path, data)
