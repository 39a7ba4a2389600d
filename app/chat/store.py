"""Chats in SQLite: saved while they stream, so a crash or Ctrl-C never loses a
reply. stdlib sqlite3, WAL, a versioned schema upgraded in place."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from backends.private import make_private, private_dir

from ..agent import modes
from ..agent.rewind import RecordedChange
from ..agent.toolbox import TOOLS
from ..choices import PermissionMode
from ..errors import ConfigError
from .file_locks import lock_holders, locked_by_others

if TYPE_CHECKING:
    from backends.stats import Stats


class SavedReply(Protocol):
    """What the store keeps of a reply as it streams (the screen's Reply, app/tui/reply.py)."""

    @property
    def answer(self) -> str: ...
    @property
    def thinking(self) -> str: ...
    @property
    def complete(self) -> bool: ...
    @property
    def stats(self) -> Stats | None: ...
    @property
    def answer_drafted(self) -> Sequence[object]: ...
    @property
    def thinking_drafted(self) -> Sequence[object]: ...
    @property
    def drafted(self) -> dict: ...


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
    # version 2: tool turns. An assistant message keeps the calls it made (OpenAI's
    # `tool_calls`, JSON); a "tool" message keeps its call, its result and the user's decision.
    """
    ALTER TABLE messages ADD COLUMN tool_calls TEXT;
    ALTER TABLE messages ADD COLUMN tool_call_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE messages ADD COLUMN decision TEXT NOT NULL DEFAULT '';
    """,
    # version 3: which text of a reply came from accepted draft tokens (JSON
    # {"answer": [[start, end], ...], "thinking": [...]}), so an old reply can be tinted too
    """
    ALTER TABLE messages ADD COLUMN drafted TEXT;
    """,
    # version 4: the model's context apart from the transcript. A compaction saves the context
    # it made (the system prompt apart) and the last message it covers: the model's context is
    # that, then every message after it. `project`: the folder a chat worked on (--continue).
    """
    CREATE TABLE contexts (
        id INTEGER PRIMARY KEY,
        chat_id INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
        upto INTEGER NOT NULL,
        messages TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        before_tokens INTEGER NOT NULL DEFAULT 0,
        after_tokens INTEGER NOT NULL DEFAULT 0,
        created REAL NOT NULL
    );
    CREATE INDEX contexts_by_chat ON contexts(chat_id, id);
    ALTER TABLE chats ADD COLUMN project TEXT NOT NULL DEFAULT '';
    """,
    # version 5: the thinking mode a chat was left in (NULL: never switched), so going on
    # with it (--continue, --resume, the list) goes on in that mode
    """
    ALTER TABLE chats ADD COLUMN think INTEGER;
    """,
    # version 6: the model files a chat was made with (JSON {"model": a catalog name or a GGUF's
    # absolute path, "draft": a drafter file, "none", or null for the bundle's own}), so going
    # on with it comes back on the same model, a local file included
    """
    ALTER TABLE chats ADD COLUMN model_files TEXT NOT NULL DEFAULT '';
    """,
    # version 7: the file changes a chat applied, each under the prompt it answered, so /rewind
    # can put the files back as they were before any earlier prompt (a resumed chat too)
    """
    CREATE TABLE changes (
        id INTEGER PRIMARY KEY,
        chat_id INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
        prompt_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        before TEXT,
        after TEXT NOT NULL,
        created REAL NOT NULL
    );
    CREATE INDEX changes_by_chat ON changes(chat_id, id);
    """,
    # version 8: the permission mode a chat was left in ("ask", "accept-edits", "plan"; NULL:
    # never set), so going on with it goes on in that mode
    """
    ALTER TABLE chats ADD COLUMN mode TEXT;
    """,
    # version 9: the project each change was applied in (its resolved root; "" for older
    # records), so /rewind of a chat opened in another folder never writes this one's files
    """
    ALTER TABLE changes ADD COLUMN root TEXT NOT NULL DEFAULT '';
    """,
    # version 10: the model's todo list (JSON, app/agent/todos.py), kept with the chat
    """
    ALTER TABLE chats ADD COLUMN todos TEXT NOT NULL DEFAULT '';
    """,
]


BUSY_S = 10.0  # how long a chat waits for another program's lock on the database
BUSY_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
CORRUPT_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
SIDE_FILES = ("-wal", "-shm")


@dataclass
class Message:
    id: int
    role: str
    content: str
    thinking: str
    stats: dict | None
    complete: bool
    tool_calls: list[dict] | None = None  # assistant: the calls it made; tool: the one answered
    tool_call_id: str = ""
    decision: str = ""  # tool: "auto" (a read), "yes", "always", "no"
    drafted: dict | None = None  # spans of accepted draft text, per "answer" / "thinking"

    def for_engine(self) -> dict:
        """The message as the engines take it (OpenAI chat format)."""
        if self.role == "tool":
            return {"role": "tool", "tool_call_id": self.tool_call_id, "content": self.content}
        message: dict = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


@dataclass
class Chat:
    id: int
    title: str
    model: str
    project: str = ""  # the project root the chat worked on ("" for older chats)
    think: bool | None = None  # the thinking mode it was left in (None: never switched)
    model_files: str = ""  # what reopens its model (version 6's JSON; "" for older chats)
    mode: PermissionMode | None = None  # the permission mode it was left in (None: never set)
    todos: str = ""  # the model's todo list, as JSON (version 10; app/agent/todos.py)


CHAT_COLUMNS = "id, title, model, project, think, model_files, mode, todos"


def _chat(row: tuple) -> Chat:
    chat_id, title, model, project, think, model_files, mode, todos = row
    # A word this dspine does not know (a newer one wrote it, or damage) is no mode: the chat's own.
    known = modes.parse(mode) if isinstance(mode, str) else None
    return Chat(chat_id, title, model, project, None if think is None else bool(think), model_files, known, todos)


@dataclass(frozen=True)
class SavedCompaction:
    id: int
    upto: int  # the last transcript message it covers
    summary: str
    before_tokens: int
    after_tokens: int


def _sent(message: Message) -> bool:
    """Whether a saved message goes to the engine: an empty reply (stopped before its first
    token) does not."""
    return bool(message.content or message.tool_calls or message.role == "tool")


def _aside_path(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate, n = path.with_name(f"{path.name}.damaged-{stamp}"), 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return candidate


class _Corrupt(sqlite3.DatabaseError):
    """PRAGMA quick_check found damage (SQLite's own verdict, as a result row)."""


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


class ChatStore:
    def __init__(self, path: Path, busy_s: float = BUSY_S) -> None:
        self.path = path
        self.busy_s = busy_s
        self.set_aside: Path | None = None  # where a damaged database was moved, if it was
        try:
            private_dir(path.parent)
            # Chats hold prompts and code: 0600 before SQLite opens it (its -wal and -shm
            # files take the database's mode).
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            make_private(path)
        except OSError as exc:
            raise self._unwritable(exc) from exc
        try:
            self._open_when_free()
        except sqlite3.DatabaseError as exc:
            # Only SQLite's own word that the file is damaged sets it aside; a lock, a
            # read-only folder or a full disk leave every byte where it is.
            if not (isinstance(exc, _Corrupt) or _primary_code(exc) in CORRUPT_CODES):
                raise self._unwritable(exc) from exc
            self._set_aside()
            try:
                self._open_when_free()
            except sqlite3.DatabaseError as again:
                raise self._unwritable(again) from again

    def _open_when_free(self) -> None:
        """Open, retrying while another program holds the database locked (SQLite's busy
        handler covers most waits, not all: a WAL recovery or an exclusive-mode holder
        answers SQLITE_BUSY at once), up to busy_s; then say who holds it."""
        deadline = time.monotonic() + self.busy_s
        pause = 0.02
        while True:
            try:
                self._open(max(deadline - time.monotonic(), 0.0))
                return
            except sqlite3.OperationalError as exc:
                self._close_quietly()
                if _primary_code(exc) not in BUSY_CODES:
                    raise
                if time.monotonic() >= deadline:
                    raise self._busy() from exc
                time.sleep(pause)  # a lock held by another process: nothing to wait on but time
                pause = min(pause * 2, 0.5)
            except BaseException:
                self._close_quietly()
                raise

    def _open(self, busy_s: float) -> None:
        self.db = sqlite3.connect(self.path, timeout=busy_s, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a crash of dspine loses nothing committed; only a power cut can
        # lose the last moments, and a commit no longer waits for the disk.
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        # A truncated file can open and fail only later, mid-chat: look at every page now.
        if self.db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
            raise _Corrupt("quick_check failed")
        self._upgrade()
        self.db.execute(f"PRAGMA busy_timeout = {int(self.busy_s * 1000)}")

    def _close_quietly(self) -> None:
        if hasattr(self, "db"):
            self.db.close()
            del self.db

    def _files(self) -> list[Path]:
        return [self.path] + [self._beside(self.path, suffix) for suffix in SIDE_FILES]

    @staticmethod
    def _beside(path: Path, suffix: str) -> Path:
        return path.with_name(path.name + suffix)

    def _busy(self) -> ConfigError:
        holders = lock_holders(self._files())
        who = ", ".join(f"{name} (pid {pid})" for pid, name in holders) or "another program"
        return ConfigError(
            f"the chats database {self.path} is locked by {who}, still after {self.busy_s:g} s; "
            "it is not damaged and nothing was changed",
            "close the program that has it open (or let it finish), then start again",
        )

    def _set_aside(self) -> None:
        """A damaged database (junk, truncated) keeps its bytes under a dated name; chats
        start fresh. Not while another program has it open: its -wal would stay behind
        for the new database to read, and that program would write into the renamed one."""
        holders = [path for path in self._files() if path.exists() and locked_by_others(path)]
        if holders:
            named = ", ".join(f"{name} (pid {pid})" for pid, name in lock_holders(self._files()))
            raise ConfigError(
                f"the chats database {self.path} is damaged, and {named or 'another program'} has it open",
                "close that program and start again: the damaged file is then set aside and chats start fresh",
            )
        self.set_aside = _aside_path(self.path)
        try:
            os.replace(self.path, self.set_aside)
            for suffix in SIDE_FILES:
                if self._beside(self.path, suffix).exists():
                    os.replace(self._beside(self.path, suffix), self._beside(self.set_aside, suffix))
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))  # the fresh one private too
        except OSError as exc:
            raise self._unwritable(exc) from exc

    def _unwritable(self, exc: Exception) -> ConfigError:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return ConfigError(
            f"the chats database {self.path} cannot be opened for writing ({reason})",
            f"give your user write access to {self.path.parent} and the files in it, "
            "or point the chats_db setting elsewhere",
        )

    def _upgrade(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(SCHEMA[version:], start=version + 1):
            with self.db:
                self.db.executescript(script)
                self.db.execute(f"PRAGMA user_version = {number}")

    def close(self) -> None:
        self.db.close()

    def new_chat(self, title: str = "New chat", model: str = "", project: str = "", model_files: str = "") -> Chat:
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO chats (title, model, created, project, model_files) VALUES (?, ?, ?, ?, ?)",
                (title, model, time.time(), project, model_files),
            )
        assert cursor.lastrowid is not None
        return Chat(cursor.lastrowid, title, model, project, model_files=model_files)

    def chats(self, project: str | None = None) -> list[Chat]:
        """Newest first; with `project`, only the chats that worked on it."""
        if project is None:
            rows = self.db.execute(f"SELECT {CHAT_COLUMNS} FROM chats ORDER BY id DESC").fetchall()
        else:
            rows = self.db.execute(
                f"SELECT {CHAT_COLUMNS} FROM chats WHERE project = ? ORDER BY id DESC", (project,)
            ).fetchall()
        return [_chat(row) for row in rows]

    def chat(self, chat_id: int) -> Chat | None:
        row = self.db.execute(f"SELECT {CHAT_COLUMNS} FROM chats WHERE id = ?", (chat_id,)).fetchone()
        return _chat(row) if row else None

    def set_think(self, chat_id: int, on: bool) -> None:
        with self.db:
            self.db.execute("UPDATE chats SET think = ? WHERE id = ?", (int(on), chat_id))

    def set_todos(self, chat_id: int, todos: str) -> None:
        with self.db:
            self.db.execute("UPDATE chats SET todos = ? WHERE id = ?", (todos, chat_id))

    def set_mode(self, chat_id: int, mode: PermissionMode) -> None:
        with self.db:
            self.db.execute("UPDATE chats SET mode = ? WHERE id = ?", (mode, chat_id))

    # -- the model's context (compacted) ---------------------------------------------------

    def save_context(
        self, chat_id: int, messages: list[dict], summary: str = "", before: int = 0, after: int = 0
    ) -> int:
        """A compaction's context: it covers every message saved so far."""
        upto = self.db.execute("SELECT COALESCE(MAX(id), 0) FROM messages WHERE chat_id = ?", (chat_id,)).fetchone()[0]
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO contexts (chat_id, upto, messages, summary, before_tokens, after_tokens, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (chat_id, upto, json.dumps(messages), summary, before, after, time.time()),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def compactions(self, chat_id: int) -> list[SavedCompaction]:
        rows = self.db.execute(
            "SELECT id, upto, summary, before_tokens, after_tokens FROM contexts WHERE chat_id = ? ORDER BY id",
            (chat_id,),
        ).fetchall()
        return [SavedCompaction(*row) for row in rows]

    def context(self, chat_id: int) -> list[dict]:
        """What the model sees of this chat: the last compaction's context, then every message
        after it (the whole conversation when it was never compacted)."""
        row = self.db.execute(
            "SELECT upto, messages FROM contexts WHERE chat_id = ? ORDER BY id DESC LIMIT 1", (chat_id,)
        ).fetchone()
        if row is None:
            return self.conversation(chat_id)
        upto, saved = row
        later = [m for m in self.messages(chat_id) if m.id > upto]
        return json.loads(saved) + [m.for_engine() for m in later if _sent(m)]

    # -- the files a chat changed, and going back ---------------------------------------------

    def add_change(
        self, chat_id: int, prompt_id: int, name: str, before: str | None, after: str, root: str = ""
    ) -> int:
        """An applied edit or write, under the prompt (user message) it answered, in the project
        at `root`."""
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO changes (chat_id, prompt_id, name, before, after, created, root) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (chat_id, prompt_id, name, before, after, time.time(), root),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def changes(self, chat_id: int) -> list[RecordedChange]:
        rows = self.db.execute(
            "SELECT id, prompt_id, name, before, after, root FROM changes WHERE chat_id = ? ORDER BY id", (chat_id,)
        ).fetchall()
        return [RecordedChange(*row) for row in rows]

    def drop_last_change(self, chat_id: int) -> None:
        """The newest change was undone (/undo)."""
        with self.db:
            self.db.execute(
                "DELETE FROM changes WHERE id = (SELECT MAX(id) FROM changes WHERE chat_id = ?)", (chat_id,)
            )

    def drop_changes(self, chat_id: int, from_prompt: int, names: set[str] | None = None) -> None:
        """The changes made at or after a prompt (to `names` only, when given): put back, or
        no longer the chat's to put back."""
        with self.db:
            if names is None:
                self.db.execute("DELETE FROM changes WHERE chat_id = ? AND prompt_id >= ?", (chat_id, from_prompt))
                return
            self.db.executemany(
                "DELETE FROM changes WHERE chat_id = ? AND prompt_id >= ? AND name = ?",
                [(chat_id, from_prompt, name) for name in names],
            )

    def cut(self, chat_id: int, from_message: int) -> None:
        """The conversation as it was before a message: it and every later message go, and
        so does every compaction that covered any of them (an earlier one still holds)."""
        with self.db:
            self.db.execute("DELETE FROM messages WHERE chat_id = ? AND id >= ?", (chat_id, from_message))
            self.db.execute("DELETE FROM contexts WHERE chat_id = ? AND upto >= ?", (chat_id, from_message))

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

    def set_tool_calls(self, message_id: int, calls: list[dict]) -> None:
        with self.db:
            self.db.execute("UPDATE messages SET tool_calls = ? WHERE id = ?", (json.dumps(calls), message_id))

    def add_tool_result(self, chat_id: int, call: dict, result: str, decision: str) -> int:
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO messages (chat_id, role, content, complete, created, tool_calls, tool_call_id, decision)"
                " VALUES (?, 'tool', ?, 1, ?, ?, ?, ?)",
                (chat_id, result, time.time(), json.dumps([call]), call.get("id", ""), decision),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def save_reply(self, message_id: int, reply: SavedReply) -> None:
        """A reply as it stands: its text so far, its latest figures, whether it ended."""
        stats = reply.stats.to_json() if reply.stats is not None else None
        drafted = reply.drafted if reply.answer_drafted or reply.thinking_drafted else None
        self.update_message(message_id, reply.answer, reply.thinking, stats, complete=reply.complete, drafted=drafted)

    def messages(self, chat_id: int) -> list[Message]:
        rows = self.db.execute(
            "SELECT id, role, content, thinking, stats, complete, tool_calls, tool_call_id, decision, drafted"
            " FROM messages WHERE chat_id = ? ORDER BY id",
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
                r[7],
                r[8],
                json.loads(r[9]) if r[9] else None,
            )
            for r in rows
        ]

    def conversation(self, chat_id: int) -> list[dict]:
        """What the engine is sent: every message with content or tool calls, tool results included."""
        return [m.for_engine() for m in self.messages(chat_id) if _sent(m)]

    def export_prompts(self, chat_ids: list[int] | None = None) -> str:
        """Every turn the model answered (after a prompt, or after tool results), with the
        conversation before it, as the JSONL `dspine bench --prompts` reads: benchmark the
        drafter on your own work, agent sessions included (their tool turns are kept)."""
        lines = []
        for chat in self.chats() if chat_ids is None else [c for c in self.chats() if c.id in chat_ids]:
            history: list[dict] = []
            messages = self.messages(chat.id)
            for index, message in enumerate(messages):
                if message.content or message.tool_calls or message.role == "tool":
                    history.append(message.for_engine())
                after = messages[index + 1].role if index + 1 < len(messages) else None
                if message.role == "user" or (message.role == "tool" and after != "tool"):
                    record: dict = {"messages": list(history), "category": "history"}
                    if any(m.tool_calls for m in messages):
                        record["tools"] = TOOLS
                    if message.role == "tool":
                        record["category"] = "history-tools"
                    lines.append(json.dumps(record))
        return "\n".join(lines) + ("\n" if lines else "")

    def export_markdown(self, chat_id: int) -> str:
        title = self.db.execute("SELECT title FROM chats WHERE id = ?", (chat_id,)).fetchone()
        lines = [f"# {title[0] if title else 'Chat'}", ""]
        for message in self.messages(chat_id):
            lines += [f"## {message.role}", ""]
            if message.thinking:
                lines += ["<details><summary>Thinking</summary>", "", message.thinking, "", "</details>", ""]
            if message.role == "tool":
                call = (message.tool_calls or [{}])[0].get("function", {})
                lines += [f"`{call.get('name', '?')}({call.get('arguments', '')})` ({message.decision})", ""]
                lines += ["```", message.content, "```", ""]
                continue
            lines += [message.content, ""]
            for call in message.tool_calls or []:
                function = call.get("function", {})
                lines += [f"- tool call `{function.get('name')}({function.get('arguments')})`"]
            if message.tool_calls:
                lines.append("")
        return "\n".join(lines)
