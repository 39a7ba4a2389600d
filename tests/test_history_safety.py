"""The chats database: private, set aside when damaged, clear when unwritable (issue 14, items 6, 7, 9)."""

from __future__ import annotations

import os

import pytest

from app.errors import ConfigError
from app.tui.history import ChatStore


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
