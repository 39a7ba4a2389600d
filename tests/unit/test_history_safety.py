"""The chats database: private, set aside when damaged, clear when unwritable (issue 14, items 6, 7, 9)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.chat.store import ChatStore
from app.errors import ConfigError


def test_chats_are_private(tmp_path):
    path = tmp_path / "new" / "chats.db"
    store = ChatStore(path)
    store.new_chat("secret")
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    for extra in (path.with_name("chats.db-wal"), path.with_name("chats.db-shm")):
        if extra.exists():
            assert extra.stat().st_mode & 0o077 == 0
    store.close()


def test_an_older_world_readable_database_is_narrowed(tmp_path):
    path = tmp_path / "chats.db"
    ChatStore(path).close()
    path.chmod(0o644)
    ChatStore(path).close()
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("damage", ["junk", "truncated"])
def test_a_damaged_database_is_set_aside_and_chats_start_fresh(tmp_path, damage):
    path = tmp_path / "chats.db"
    store = ChatStore(path)
    chat = store.new_chat("kept", model="m")
    with store.db:
        store.db.executemany(
            "INSERT INTO messages (chat_id, role, content, created) VALUES (?, 'user', ?, 0)",
            [(chat.id, f"prompt {i} " * 100) for i in range(300)],
        )
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    original = path.read_bytes()
    damaged = os.urandom(50_000) if damage == "junk" else original[: len(original) // 2]
    path.write_bytes(damaged)

    again = ChatStore(path)
    assert again.set_aside is not None and again.set_aside.read_bytes() == damaged
    assert again.set_aside.name.startswith("chats.db.damaged-")
    assert path.stat().st_mode & 0o777 == 0o600  # the fresh database is private as well
    assert again.chats() == []
    again.new_chat("fresh")
    assert [c.title for c in again.chats()] == ["fresh"]
    again.close()


def test_an_unusable_database_path_is_a_clear_error(tmp_path):
    # A folder in the way (root can write anywhere, so no permission trick is portable here).
    (tmp_path / "chats.db").mkdir()
    (tmp_path / "file").write_text("x")
    for path in (tmp_path / "chats.db", tmp_path / "file" / "chats.db"):
        with pytest.raises(ConfigError, match="chats database") as caught:
            ChatStore(path)
        assert "chats_db" in caught.value.fix


# -- issue 22, point 8: a lock is "busy", never "damaged" ---------------------------------

HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "lock":  # as the sqlite3 shell or another tool can: the whole file, for writing
    db.execute("PRAGMA locking_mode=EXCLUSIVE")
    db.execute("BEGIN EXCLUSIVE")
    db.execute("CREATE TABLE IF NOT EXISTS other_program (x)")
else:  # only open, reading now and then, as a second program using the chats would
    db.execute("SELECT count(*) FROM chats").fetchone()
print("holding", flush=True)
sys.stdin.readline()
if sys.argv[2] == "lock":
    db.execute("COMMIT")
db.close()
"""


class Holder:
    """Another program with the chats database open, until told to let go."""

    def __init__(self, path: Path, how: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path), how], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "holding"

    def release(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        assert self.process.wait(timeout=30) == 0


def _store_with_chats(path: Path) -> None:
    store = ChatStore(path)
    for title in ("first", "second"):
        chat = store.new_chat(title)
        store.add_message(chat.id, "user", f"{title} prompt")
    store.close()


def test_a_database_another_program_holds_locked_is_busy_not_damaged(tmp_path):
    path = tmp_path / "chats.db"
    _store_with_chats(path)
    holder = Holder(path, "lock")
    before = sorted(p.name for p in tmp_path.iterdir())
    try:
        started = time.monotonic()
        with pytest.raises(ConfigError) as caught:
            ChatStore(path, busy_s=0.5)
        assert time.monotonic() - started >= 0.5  # it waited for the lock before giving up
        message = caught.value.cause
        assert "locked by" in message and f"pid {holder.process.pid}" in message and "not damaged" in message
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing renamed, nothing new
    finally:
        holder.release()
    store = ChatStore(path)
    assert store.set_aside is None
    assert [c.title for c in store.chats()] == ["second", "first"]
    store.close()


def test_a_lock_let_go_while_waiting_opens_the_chats(tmp_path):
    path = tmp_path / "chats.db"
    _store_with_chats(path)
    holder = Holder(path, "lock")
    opened: list[ChatStore] = []
    waiting = threading.Thread(target=lambda: opened.append(ChatStore(path, busy_s=60)))
    waiting.start()
    holder.release()
    waiting.join(60)
    assert opened and [c.title for c in opened[0].chats()] == ["second", "first"]
    assert opened[0].set_aside is None
    opened[0].close()


def test_a_damaged_database_another_program_has_open_is_left_in_place(tmp_path):
    path = tmp_path / "chats.db"
    _store_with_chats(path)
    holder = Holder(path, "open")
    try:
        with path.open("r+b") as handle:
            handle.write(b"not a database, not at all")  # over SQLite's header
        with pytest.raises(ConfigError) as caught:
            ChatStore(path)
        assert "damaged" in caught.value.cause and f"pid {holder.process.pid}" in caught.value.cause
        assert not list(tmp_path.glob("*.damaged-*"))
        assert path.with_name("chats.db-shm").exists()
    finally:
        holder.release()
    again = ChatStore(path)  # now no one has it: set aside, -wal and -shm with it
    assert again.set_aside is not None and again.chats() == []
    again.close()


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder no file can be made in, even by root (an immutable folder, where the file
    system has them; else its mode, which binds users other than root)."""
    folder = tmp_path / "chats"
    folder.mkdir()

    def lock() -> None:
        if os.geteuid() == 0:
            if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode != 0:
                pytest.skip("running as root, and the file system cannot make a folder immutable")
        else:
            folder.chmod(0o500)

    yield folder, lock
    if shutil.which("chattr"):
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    folder.chmod(0o700)


@pytest.mark.parametrize("state", ["healthy", "damaged", "new"])
def test_a_read_only_chats_folder_is_a_clear_error(read_only_folder, state):
    folder, lock = read_only_folder
    path = folder / "chats.db"
    if state != "new":
        _store_with_chats(path)
    if state == "damaged":
        path.write_bytes(os.urandom(8192))
    kept = path.read_bytes() if path.exists() else None
    lock()
    with pytest.raises(ConfigError) as caught:
        ChatStore(path)
    assert str(folder) in caught.value.fix and "chats_db" in caught.value.fix
    assert "cannot be opened for writing" in caught.value.cause
    assert (path.read_bytes() if path.exists() else None) == kept
