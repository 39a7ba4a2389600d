"""Chats in SQLite: saved while they stream, so a crash or Ctrl-C never loses a
reply. stdlib sqlite3, WAL, a versioned schema upgraded in place."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .reply import Reply

SCHEMA = [
    # version 1
    """
    CREATE TABLE chats (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL,
        model TEXT NOT NULL DEFAULT '',
        created REAL NOT NULL
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        chat_id INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        content TEXT NOT NULL DEFAULT '',
        thinking TEXT NOT NULL DEFAULT '',
        stats TEXT,
        complete INTEGER NOT NULL DEFAULT 0,
        created REAL NOT NULL
    );
    CREATE INDEX messages_by_chat ON messages(chat_id, id);
    """,
    # version 2: which text of a reply came from accepted draft tokens (JSON
    # {"answer": [[start, end], ...], "thinking": [...]}), so an old reply can be tinted too
    """
    ALTER TABLE messages ADD COLUMN drafted TEXT;
    """,
]


@dataclass
class Message:
    id: int
    role: str
    content: str
    thinking: str
    stats: dict | None
    complete: bool
    drafted: dict | None = None  # spans of accepted draft text, per "answer" / "thinking"


@dataclass
class Chat:
    id: int
    title: str
    model: str


class ChatStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a crash of dspine loses nothing committed; only a power cut can
        # lose the last moments, and a commit no longer waits for the disk.
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self._upgrade()

    def _upgrade(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(SCHEMA[version:], start=version + 1):
            with self.db:
                self.db.executescript(script)
                self.db.execute(f"PRAGMA user_version = {number}")

    def close(self) -> None:
        self.db.close()

    def new_chat(self, title: str = "New chat", model: str = "") -> Chat:
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO chats (title, model, created) VALUES (?, ?, ?)", (title, model, time.time())
            )
        assert cursor.lastrowid is not None
        return Chat(cursor.lastrowid, title, model)

    def chats(self) -> list[Chat]:
        rows = self.db.execute("SELECT id, title, model FROM chats ORDER BY id DESC").fetchall()
        return [Chat(*row) for row in rows]

    def rename(self, chat_id: int, title: str) -> None:
        with self.db:
            self.db.execute("UPDATE chats SET title = ? WHERE id = ?", (title, chat_id))

    def delete(self, chat_id: int) -> None:
        with self.db:
            self.db.execute("DELETE FROM chats WHERE id = ?", (chat_id,))

    def add_message(self, chat_id: int, role: str, content: str = "", complete: bool = True) -> int:
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO messages (chat_id, role, content, complete, created) VALUES (?, ?, ?, ?, ?)",
                (chat_id, role, content, int(complete), time.time()),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def update_message(
        self,
        message_id: int,
        content: str,
        thinking: str,
        stats: dict | None = None,
        complete: bool = False,
        drafted: dict | None = None,
    ) -> None:
        with self.db:
            self.db.execute(
                "UPDATE messages SET content = ?, thinking = ?, stats = ?, complete = ?, drafted = ? WHERE id = ?",
                (
                    content,
                    thinking,
                    json.dumps(stats) if stats is not None else None,
                    int(complete),
                    json.dumps(drafted) if drafted else None,
                    message_id,
                ),
            )

    def save_reply(self, message_id: int, reply: Reply) -> None:
        """A reply as it stands: its text so far, its latest figures, whether it ended."""
        stats = reply.stats.to_json() if reply.stats is not None else None
        drafted = reply.drafted if reply.answer_drafted or reply.thinking_drafted else None
        self.update_message(message_id, reply.answer, reply.thinking, stats, complete=reply.complete, drafted=drafted)

    def messages(self, chat_id: int) -> list[Message]:
        rows = self.db.execute(
            "SELECT id, role, content, thinking, stats, complete, drafted FROM messages WHERE chat_id = ? ORDER BY id",
            (chat_id,),
        ).fetchall()
        return [
            Message(
                r[0],
                r[1],
                r[2],
                r[3],
                json.loads(r[4]) if r[4] else None,
                bool(r[5]),
                json.loads(r[6]) if r[6] else None,
            )
            for r in rows
        ]

    def export_prompts(self, chat_ids: list[int] | None = None) -> str:
        """Every user turn, with the conversation before it, as the JSONL `dspine bench
        --prompts` reads: benchmark the drafter on your own work."""
        lines = []
        for chat in self.chats() if chat_ids is None else [c for c in self.chats() if c.id in chat_ids]:
            history: list[dict] = []
            for message in self.messages(chat.id):
                if message.role == "user":
                    lines.append(
                        json.dumps(
                            {
                                "messages": history + [{"role": "user", "content": message.content}],
                                "category": "history",
                            }
                        )
                    )
                if message.content:
                    history.append({"role": message.role, "content": message.content})
        return "\n".join(lines) + ("\n" if lines else "")

    def export_markdown(self, chat_id: int) -> str:
        title = self.db.execute("SELECT title FROM chats WHERE id = ?", (chat_id,)).fetchone()
        lines = [f"# {title[0] if title else 'Chat'}", ""]
        for message in self.messages(chat_id):
            lines += [f"## {message.role}", ""]
            if message.thinking:
                lines += ["<details><summary>Thinking</summary>", "", message.thinking, "", "</details>", ""]
            lines += [message.content, ""]
        return "\n".join(lines)
