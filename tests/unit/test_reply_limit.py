"""The reply limit of a request that sets none (app/serve/reply_limit.py)."""

from __future__ import annotations

import pytest

from app.serve.reply_limit import LIMIT_FIELDS, with_reply_limit
from app.serve.window import budget


def test_a_request_without_a_limit_gets_the_reserve():
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert with_reply_limit(body, 1024) == {**body, "max_tokens": 1024}
    assert "max_tokens" not in body  # the client's body is not changed in place


@pytest.mark.parametrize("field", LIMIT_FIELDS)
@pytest.mark.parametrize("value", [1, 5000, -1, 0])
def test_a_limit_the_request_sets_is_kept(field, value):
    # Larger than the reserve, llama.cpp's -1 (no limit) and 0 (prompt only) are the client's choice too.
    body = {"input": "hi", field: value}
    assert with_reply_limit(body, 1024) == body


def test_a_null_limit_counts_as_none():
    assert with_reply_limit({"max_tokens": None}, 700)["max_tokens"] == 700


def test_no_reserve_no_limit():
    assert with_reply_limit({"prompt": "x"}, 0) == {"prompt": "x"}


def test_the_reserve_is_the_windows_reply():
    assert budget(8192).reply == 1024 and budget(4096).reply == 512
