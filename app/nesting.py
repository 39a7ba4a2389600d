"""How deep a parsed JSON or TOML value nests: input from outside (a request body, a
setting) is refused past a depth before anything walks it recursively."""

from __future__ import annotations

from typing import Any


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether `value` nests dicts and lists deeper than `limit` (counted without recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False
