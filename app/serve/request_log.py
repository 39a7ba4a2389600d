"""`--log FILE.jsonl`: one line per request in `dspine bench --prompts` format
(`messages`, `category`) plus its figures, so a day of agent work is a benchmark.
It holds prompts: the file is created 0600 and only appended to."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from backends.private import open_private

from .figures import RequestFigures

CATEGORY = "serve"


def _text(content: Any) -> str:
    """Anthropic / OpenAI content blocks to plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def bench_messages(endpoint: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request as an OpenAI messages list, which `dspine bench --prompts` replays."""
    if endpoint.endswith("/completions") and "chat" not in endpoint:
        return [{"role": "user", "content": _text(body.get("prompt"))}]
    messages = body.get("messages") or body.get("input") or []
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    out: list[dict[str, Any]] = []
    if endpoint == "/v1/messages" and body.get("system"):
        out.append({"role": "system", "content": _text(body["system"])})
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == "developer":
            message = {**message, "role": "system"}  # Codex's instructions: replayed as what they are
        if isinstance(message, dict) and message.get("role") in ("system", "user", "assistant", "tool"):
            kept = dict(message)
            if endpoint == "/v1/messages":
                kept = {"role": message["role"], "content": _text(message.get("content"))}
            out.append(kept)
    return out


def log_line(figures: RequestFigures, body: dict[str, Any]) -> dict[str, Any]:
    line: dict[str, Any] = {
        "messages": bench_messages(figures.endpoint, body),
        "category": CATEGORY,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "figures": figures.to_json(),
    }
    if body.get("tools"):
        line["tools"] = body["tools"]
    return line


class RequestLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = open_private(path, os.O_WRONLY | os.O_APPEND)  # an older file may be wider

    def write(self, figures: RequestFigures, body: dict[str, Any]) -> None:
        line = log_line(figures, body)
        try:
            text = json.dumps(line, ensure_ascii=False).encode()
        except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800") is no UTF-8: keep it escaped
            text = json.dumps(line).encode()
        os.write(self._fd, text + b"\n")

    def close(self) -> None:
        os.close(self._fd)
