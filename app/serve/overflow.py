"""A prompt too long for the slot, answered in each API's own words, pure.

llama-server answers an overflow with HTTP 400 and its own error type on every endpoint
(`exceed_context_size_error`, with `n_prompt_tokens` and `n_ctx`). Clients decide to
compact on the error they know: OpenAI's `context_length_exceeded` code (Codex, the
openai SDK, litellm), Anthropic's `invalid_request_error` whose message starts "prompt is
too long" (Claude Code, the anthropic SDK). The token counts stay in the message and as
fields of their own."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

LLAMA_OVERFLOW = "exceed_context_size_error"
ANTHROPIC_PATHS = ("/v1/messages",)


@dataclass(frozen=True)
class Overflow:
    prompt_tokens: int | None
    n_ctx: int | None


def read_overflow(body: bytes) -> Overflow | None:
    """llama-server's overflow error, or None for any other body."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict) or error.get("type") != LLAMA_OVERFLOW:
        return None
    prompt, n_ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
    return Overflow(prompt if isinstance(prompt, int) else None, n_ctx if isinstance(n_ctx, int) else None)


def _counts(o: Overflow) -> tuple[str, str]:
    return (str(o.prompt_tokens) if o.prompt_tokens is not None else "more", str(o.n_ctx or "the"))


def openai_error(o: Overflow) -> dict[str, Any]:
    prompt, n_ctx = _counts(o)
    return {
        "error": {
            "message": (
                f"This model's maximum context length is {n_ctx} tokens. However, your messages resulted in "
                f"{prompt} tokens. Please reduce the length of the messages."
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
            "n_prompt_tokens": o.prompt_tokens,
            "n_ctx": o.n_ctx,
        }
    }


def anthropic_error(o: Overflow) -> dict[str, Any]:
    prompt, n_ctx = _counts(o)
    return {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {prompt} tokens > {n_ctx} maximum",
            "n_prompt_tokens": o.prompt_tokens,
            "n_ctx": o.n_ctx,
        },
    }


def translate_error(path: str, status: int, body: bytes, upstream: str = "llama-server") -> tuple[int, bytes]:
    """The (status, body) to send the client for the upstream's error reply: an overflow
    in the words of the API at `path`; another JSON error unchanged; a body that is not
    JSON (a remote server's plain-text 404) wrapped in an error object both OpenAI and
    Anthropic clients read, as the response's content type says it is."""
    overflow = read_overflow(body)
    if overflow is None:
        try:
            json.loads(body)
            return status, body
        except (ValueError, UnicodeDecodeError):
            text = body[:500].decode("utf-8", errors="replace").strip()
            message = f"{upstream} answered {status}" + (f": {text}" if text else "")
            kind = "not_found_error" if status == 404 else "api_error"
            return status, json.dumps({"type": "error", "error": {"message": message, "type": kind}}).encode()
    shaped = anthropic_error(overflow) if path in ANTHROPIC_PATHS else openai_error(overflow)
    return 400, json.dumps(shaped).encode()
