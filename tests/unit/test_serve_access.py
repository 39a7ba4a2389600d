"""Who may connect to `dspine serve`: the key file and the printed address (pure)."""

from __future__ import annotations

import os
import threading

import pytest

from app.errors import UsageError
from app.serve.access import resolve_access
from app.serve.service import endpoint_url


def test_a_key_file_gives_its_first_line(tmp_path):
    key = tmp_path / "key"
    key.write_text("s3cret-key\nsecond line is a comment\n")
    key.chmod(0o600)
    access = resolve_access("0.0.0.0", f"@{key}", environ={})
    assert access.key == "s3cret-key" and access.warning is None


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "key"
    os.mkfifo(fifo)
    result: list[BaseException] = []
    worker = threading.Thread(target=lambda: _catch(result, f"@{fifo}"), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "reading a FIFO key file blocked"
    assert isinstance(result[0], UsageError) and "not a regular file" in str(result[0])


def _catch(into: list[BaseException], given: str) -> None:
    try:
        resolve_access("0.0.0.0", given, environ={})
    except BaseException as exc:
        into.append(exc)


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b"x" * 5000])
def test_a_file_that_is_not_a_key_is_refused(tmp_path, content):
    key = tmp_path / "key"
    key.write_bytes(content)
    with pytest.raises(UsageError) as raised:
        resolve_access("0.0.0.0", f"@{key}", environ={})
    assert str(key) in str(raised.value)


def test_a_device_is_refused():
    with pytest.raises(UsageError, match="not a regular file"):
        resolve_access("0.0.0.0", "@/dev/zero", environ={})


def test_a_key_readable_by_others_is_warned_about(tmp_path):
    key = tmp_path / "key"
    key.write_text("k\n")
    key.chmod(0o644)
    warning = resolve_access("0.0.0.0", f"@{key}", environ={}).warning
    assert warning and "chmod 600" in warning and "k\n" not in warning


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8080/v1"),
        ("0.0.0.0", "http://127.0.0.1:8080/v1"),
        ("::", "http://127.0.0.1:8080/v1"),
        ("::1", "http://[::1]:8080/v1"),
        ("fe80::1", "http://[fe80::1]:8080/v1"),
        ("localhost", "http://localhost:8080/v1"),
    ],
)
def test_the_printed_address_is_a_url(host, url):
    assert endpoint_url(host, 8080) == url


@pytest.mark.parametrize("key", [" ", "   ", "\t", " s3cret", "s3cret\n", "s3\x1bcret"])
def test_a_blank_or_untransmittable_key_is_refused(key):
    # Issue 34: DSPINE_SERVE_API_KEY=" " was taken as a key.
    with pytest.raises(UsageError) as caught:
        resolve_access("0.0.0.0", None, environ={"DSPINE_SERVE_API_KEY": key})
    assert "DSPINE_SERVE_API_KEY" in caught.value.cause and "\x1b" not in caught.value.cause
    with pytest.raises(UsageError) as given:
        resolve_access("127.0.0.1", key, environ={})
    assert "--api-key" in given.value.cause


def test_a_key_with_an_inner_space_still_works():
    assert resolve_access("0.0.0.0", None, environ={"DSPINE_SERVE_API_KEY": "two words"}).key == "two words"
