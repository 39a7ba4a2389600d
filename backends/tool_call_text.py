"""Tool calls written as text, parsed as they stream (for the in-process engine,
which gets raw text where a server would send `tool_calls`).

Two forms, both inside `<tool_call>...</tool_call>`:
- Qwen3-Coder XML: `<function=NAME><parameter=P>VALUE</parameter>...</function>`
- Qwen3 / Hermes JSON: `{"name": NAME, "arguments": {...}}`
Text outside the tags goes on as answer deltas; a piece that might be the start
of a tag is held back until the next delta settles it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from .events import Delta, ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|$)", re.S)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.S)


def _types(tools: list[dict[str, Any]] | None) -> dict[tuple[str, str], str]:
    """(function, parameter) -> JSON schema type, so "42" stays a string where a string is wanted."""
    types = {}
    for tool in tools or []:
        function = tool.get("function") or {}
        for name, schema in ((function.get("parameters") or {}).get("properties") or {}).items():
            types[(function.get("name", ""), name)] = str((schema or {}).get("type", "string"))
    return types


def _value(text: str, kind: str) -> Any:
    # The template writes each value between newlines; those are not part of it.
    text = text.removeprefix("\n").removesuffix("\n")
    if kind == "string":
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_call(inner: str, types: dict[tuple[str, str], str] | None = None) -> tuple[str, str] | None:
    """(name, arguments as JSON) of one call's text, or None if it is neither form."""
    inner = inner.strip()
    function = _FUNCTION.search(inner)
    if function:
        name = function.group(1)
        values = {p: _value(v, (types or {}).get((name, p), "")) for p, v in _PARAMETER.findall(function.group(2))}
        return name, json.dumps(values)
    try:
        data = json.loads(inner)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    return data["name"], arguments if isinstance(arguments, str) else json.dumps(arguments)


def _partial_tag_at_end(text: str) -> int:
    """Where a possible beginning of `<tool_call>` starts at the end of text (len(text) if none)."""
    for size in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-size:]):
            return len(text) - size
    return len(text)


class ToolCallParser:
    def __init__(self, tools: list[dict[str, Any]] | None = None) -> None:
        self._types = _types(tools)
        self._buffer = ""
        self._inside = False
        self.calls = 0

    def _call(self, inner: str) -> Iterator[Delta | ToolCall]:
        parsed = parse_call(inner, self._types)
        if parsed is None:  # not a call after all: the model's text, as written
            yield Delta(OPEN + inner + CLOSE)
            return
        self.calls += 1
        yield ToolCall(f"call_{self.calls}", *parsed)

    def feed(self, text: str) -> Iterator[Delta | ToolCall]:
        self._buffer += text
        while True:
            if self._inside:
                end = self._buffer.find(CLOSE)
                if end < 0:
                    return
                inner, self._buffer = self._buffer[:end], self._buffer[end + len(CLOSE) :]
                self._inside = False
                yield from self._call(inner)
                continue
            start = self._buffer.find(OPEN)
            if start >= 0:
                if start:
                    yield Delta(self._buffer[:start])
                self._buffer = self._buffer[start + len(OPEN) :]
                self._inside = True
                continue
            keep = _partial_tag_at_end(self._buffer)
            if keep:
                yield Delta(self._buffer[:keep])
            self._buffer = self._buffer[keep:]
            return

    def flush(self) -> Iterator[Delta | ToolCall]:
        """The reply ended: an unclosed call still counts if it parses (a stop token may
        come where `</tool_call>` would)."""
        rest, self._buffer = self._buffer, ""
        if self._inside:
            self._inside = False
            parsed = parse_call(rest, self._types)
            if parsed is not None:
                self.calls += 1
                yield ToolCall(f"call_{self.calls}", *parsed)
                return
            rest = OPEN + rest
        if rest:
            yield Delta(rest)
