"""Split a stream of text into thinking and answer parts at <think> tags,
also when a tag arrives cut across two chunks."""

from __future__ import annotations

from .events import Delta

OPEN, CLOSE = "<think>", "</think>"


class ThinkSplitter:
    def __init__(self, inside: bool = False) -> None:
        self.inside = inside  # the prompt may already have opened the block
        self._pending = ""
        self._drafted = 0

    def feed(self, text: str, drafted: int = 0) -> list[Delta]:
        """`drafted`: the accepted draft tokens `text` came from, passed on with it."""
        self._drafted = drafted
        out: list[Delta] = []
        buffer = self._pending + text
        self._pending = ""
        while buffer:
            tag = CLOSE if self.inside else OPEN
            index = buffer.find(tag)
            if index >= 0:
                self._emit(out, buffer[:index])
                buffer = buffer[index + len(tag) :]
                self.inside = not self.inside
                if not self.inside:
                    buffer = buffer.lstrip("\n")
                continue
            # Keep a possible start of the tag for the next chunk.
            keep = next((n for n in range(min(len(tag) - 1, len(buffer)), 0, -1) if tag.startswith(buffer[-n:])), 0)
            self._emit(out, buffer[: len(buffer) - keep])
            self._pending = buffer[len(buffer) - keep :]
            break
        return out

    def flush(self) -> list[Delta]:
        out: list[Delta] = []
        self._emit(out, self._pending)
        self._pending = ""
        return out

    def _emit(self, out: list[Delta], text: str) -> None:
        if text:
            out.append(Delta(text, "thinking" if self.inside else "answer", self._drafted))
