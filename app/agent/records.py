"""What dspine itself recorded of the work a compaction folds away: the files read, the
files changed, the commands run and how each ended.

The records are kept as data on the summary message, under FACTS_KEY, and never read back
from text. The summary goes back to the model as a message, and anything the model wrote
in it (a line that looks like one of dspine's lists: "- `curl ... | sh`: exit code 0",
"Files changed: ~/.ssh/authorized_keys") would otherwise become one of dspine's own
records at the next compaction and be carried on for ever. The key is dspine's: the
session takes it off (`for_engine`) before any engine sees or counts the history, and the
chats database saves it with the compacted context, so --continue keeps the records.

Every entry and every list is bounded: one 60 KB command, even one the user declined,
must not make the summary, and with it every later request, too large to send.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FACTS_KEY = "dspine_facts"
ENTRY_CHARS = 200  # a command or a path longer than this is cut, the cut saying how much
OUTCOME_CHARS = 80  # how a command ended: the first line of its result
SAVED_ENTRY_CHARS = 1000  # an entry read back from a saved chat is cut past this (dspine writes none as long)
LIST_ENTRIES = 50  # each list keeps its newest entries and says how many earlier ones it let go
KINDS = ("read", "changed", "commands")
_TITLES = {"read": "Files read", "changed": "Files changed", "commands": "Commands run"}


def bounded(text: str, limit: int = ENTRY_CHARS) -> str:
    """`text` on one line (its line breaks shown as \\n), cut after `limit` characters with
    the cut said: a list entry can neither run on nor look like several entries."""
    line = text.replace("\r", "\\r").replace("\n", "\\n")
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… ({len(line) - limit:,} more characters cut)"


@dataclass
class Facts:
    """What the work touched, listed by dspine itself (not by the model), newest last."""

    read: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    earlier: dict[str, int] = field(default_factory=dict)  # entries each list let go, the oldest

    def add(self, kind: str, item: str) -> None:
        """`item` as the newest entry of the list `kind` (one listed before moves to the end)."""
        if not item:
            return
        items: list[str] = getattr(self, kind)
        if item in items:
            items.remove(item)
        items.append(item)
        if len(items) > LIST_ENTRIES:
            del items[0]
            self.earlier[kind] = self.earlier.get(kind, 0) + 1

    def merge(self, older: Facts) -> None:
        """An earlier compaction's records, as older than anything added since."""
        for kind in KINDS:
            if older.earlier.get(kind):
                self.earlier[kind] = self.earlier.get(kind, 0) + older.earlier[kind]
            for item in getattr(older, kind):
                self.add(kind, item)

    def text(self) -> str:
        parts = []
        for kind in KINDS:
            items: list[str] = getattr(self, kind)
            if not items:
                continue
            title = _TITLES[kind]
            if self.earlier.get(kind):
                title += f" (the newest {len(items)}, and {self.earlier[kind]:,} earlier not listed)"
            if kind == "commands":
                parts.append(f"{title}:\n" + "\n".join(f"- {c}" for c in items))
            else:
                parts.append(f"{title}: " + ", ".join(items))
        return "\n".join(parts)

    def to_data(self) -> dict[str, Any]:
        return {
            "read": list(self.read),
            "changed": list(self.changed),
            "commands": list(self.commands),
            "earlier": dict(self.earlier),
        }

    @classmethod
    def from_data(cls, data: object) -> Facts:
        """Records as saved: anything malformed is left out, and each entry and list is bounded
        again (a database written by an older dspine, or damaged, brings nothing unbounded)."""
        found = cls()
        if not isinstance(data, dict):
            return found
        earlier = data.get("earlier")
        for kind in KINDS:
            items = data.get(kind)
            for item in items if isinstance(items, list) else []:
                if isinstance(item, str):
                    found.add(kind, bounded(item, SAVED_ENTRY_CHARS))
            before = earlier.get(kind) if isinstance(earlier, dict) else None
            if isinstance(before, int) and before > 0:
                found.earlier[kind] = found.earlier.get(kind, 0) + before
        return found


def for_engine(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as an engine takes it: dspine's own records taken off."""
    return [{k: v for k, v in m.items() if k != FACTS_KEY} if FACTS_KEY in m else m for m in history]
