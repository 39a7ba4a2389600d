"""The reply limit a request gets when it sets none, pure.

llama-server lets a reply without a limit run until the slot is full. A client that
sets none (Codex has no setting for it) then waits minutes for a model that rambles,
and the reply eats the room its own next prompt needed. dspine declares a reply
reserve for the window (`window.budget`); a request that sets no limit of its own
gets that reserve as its limit. A limit the request sets, any of the four spellings
llama-server reads, is left as it is."""

from __future__ import annotations

from typing import Any

# OpenAI chat, OpenAI chat (newer), Responses, llama.cpp's own: llama-server reads each.
LIMIT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "n_predict")


def sets_limit(body: dict[str, Any]) -> bool:
    return any(body.get(name) is not None for name in LIMIT_FIELDS)


def with_reply_limit(body: dict[str, Any], limit: int) -> dict[str, Any]:
    """The body with `max_tokens` set to `limit` when it sets no limit (limit <= 0: none)."""
    if limit <= 0 or sets_limit(body):
        return body
    return {**body, "max_tokens": limit}
