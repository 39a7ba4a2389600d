"""The answer text in a streamed reply, whichever API the client asked through (OpenAI chat
completions, Responses, Anthropic messages), read from the raw bytes serve passes on: what
the loop watch (backends/reply_guard.py) reads, so serve stops a looping reply as the chat
does. Pure; events may split across pieces. Thinking and tool-call arguments are not answer."""

from __future__ import annotations

import json
from typing import Any

MAX_EVENT = 1 << 20  # a line longer than this is not an answer delta: skipped, not kept


class StreamedText:
    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> list[str]:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_EVENT:
            self._partial = b""
        found = []
        for line in lines:
            if line.startswith(b"data:"):
                text = answer_text(line[5:].strip())
                if text:
                    found.append(text)
        return found


def answer_text(payload: bytes) -> str:
    """The answer text one event's JSON carries ("" for anything else)."""
    if not payload.startswith(b"{"):
        return ""  # [DONE]
    try:
        event = json.loads(payload)
    except ValueError:
        return ""
    if not isinstance(event, dict):
        return ""
    return _text(event)


def _text(event: dict[str, Any]) -> str:
    kind = event.get("type")
    delta = event.get("delta")
    if kind == "content_block_delta" and isinstance(delta, dict) and delta.get("type") == "text_delta":
        return _str(delta.get("text"))  # Anthropic messages
    if kind == "response.output_text.delta":
        return _str(delta)  # Responses
    choices = event.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        inner = choices[0].get("delta")
        if isinstance(inner, dict):
            return _str(inner.get("content"))  # chat completions
    return ""


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
