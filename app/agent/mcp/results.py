"""An MCP tool result as the text the model gets: text kept, images, audio and binary
resources described (never pasted: base64 would fill the context with noise), the
whole capped to its head and tail like the built-in tools' output."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

MAX_RESULT_CHARS = 16_000


def head_tail(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """`text` within about `limit` characters: its head and its tail, the cut marked."""
    if len(text) <= limit:
        return text
    head_n = max(limit * 2 // 5, 1)
    tail_n = max(limit - head_n, 1)
    head, tail = text[:head_n], text[-tail_n:]
    return f"{head}\n… {len(text) - head_n - tail_n:,} characters cut here …\n{tail}"


def _size(data: str) -> str:
    try:
        return f"{len(base64.b64decode(data, validate=False)):,} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data):,} characters of base64"


def _block(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} {block.mime_type}, {_size(block.data)}: not shown to the model]"
    if kind == "resource_link":
        return f"[resource link {block.uri}" + (f" ({block.name})" if getattr(block, "name", None) else "") + "]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {resource.uri}]\n{text}"
        mime = resource.mime_type or "binary"
        return f"[resource {resource.uri}, {mime}, {_size(getattr(resource, 'blob', ''))}: not shown to the model]"
    return f"[{kind or 'unknown'} content: not shown to the model]"


def for_model(content: list[Any], structured: Any = None, is_error: bool = False) -> str:
    """The result's content blocks joined; the structured result when there is no content."""
    parts = [_block(block) for block in content]
    if not parts and structured is not None:
        parts = [json.dumps(structured, ensure_ascii=False)]
    text = "\n".join(parts) if parts else "(no output)"
    if is_error:
        text = f"error: {text}"
    return head_tail(text)
