"""A remote server's key comes from DSPINE_API_KEY or a file, never from the command line."""

from __future__ import annotations

import pytest

from app.errors import UsageError
from app.run.remote_engine import remote_key


def test_a_key_typed_on_the_command_line_is_refused_without_repeating_it():
    with pytest.raises(UsageError) as refused:
        remote_key("sk-typed-secret", environ={})
    assert "ps" in refused.value.cause and "@FILE" in refused.value.fix
    assert "sk-typed-secret" not in refused.value.cause + refused.value.fix


def test_a_key_file_is_read_and_one_others_can_read_is_said(tmp_path):
    key = tmp_path / "key"
    key.write_text("sk-from-file\n")
    key.chmod(0o600)
    assert remote_key(f"@{key}", environ={"DSPINE_API_KEY": "other"}).key == "sk-from-file"
    assert remote_key(f"@{key}", environ={}).warning is None
    key.chmod(0o644)
    warned = remote_key(f"@{key}", environ={})
    assert warned.warning and "chmod 600" in warned.warning and "sk-from-file" not in warned.warning


def test_the_environment_gives_the_key_and_a_blank_one_is_refused(tmp_path):
    assert remote_key(None, environ={"DSPINE_API_KEY": "sk-env"}).key == "sk-env"
    assert remote_key(None, environ={}).key is None
    with pytest.raises(UsageError, match="DSPINE_API_KEY is blank"):
        remote_key(None, environ={"DSPINE_API_KEY": "  "})
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(UsageError, match="is empty"):
        remote_key(f"@{empty}", environ={})


def test_a_key_typed_after_the_at_sign_is_not_echoed():
    """`--api-key @sk-...` (the key itself after the @) printed the key in "cannot read"."""
    from app.serve.access import resolve_access

    for refuse in (lambda: remote_key("@sk-typed-secret", environ={}), lambda: resolve_access("127.0.0.1", "@sk-x9")):
        with pytest.raises(UsageError) as refused:
            refuse()
        said = refused.value.cause + refused.value.fix
        assert "no such file" in said and "sk-typed-secret" not in said and "sk-x9" not in said
