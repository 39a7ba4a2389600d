"""A command's output in bounded memory: the head is kept, the tail in a ring buffer,
and once it outgrows both, the whole output is streamed to a scratch file (up to
its own disk cap). `cat /dev/zero` costs a fixed amount of memory, never more."""

from __future__ import annotations

import codecs
import threading
from collections import deque
from pathlib import Path
from typing import BinaryIO

from .scratch import MAX_FILE_BYTES, Scratch

HEAD_BYTES = 8_000
TAIL_BYTES = 8_000


def saved_hint(saved: str | None) -> str:
    if saved is None:
        return "the whole output could not be saved"
    return f"the whole output is in {saved}: read_file it with start_line and end_line"


def cut_marker(cut: int, hint: str) -> str:
    return f"\n… {cut:,} characters cut here; {hint} …\n"


def head_tail(text: str, limit: int, hint: str) -> str:
    """`text` within `limit` characters: its head and its tail (a test run's summary is at the
    end), the cut marked and saying where the whole of it is."""
    if len(text) <= limit:
        return text
    head_n = max(limit * 2 // 5, 1)
    tail_n = max(limit - head_n, 1)
    head, tail = text[:head_n], text[-tail_n:]
    # Cut at line ends where one is near, so no line is shown half.
    newline = head.rfind("\n")
    if newline > head_n // 2:
        head = head[: newline + 1]
    newline = tail.find("\n")
    if 0 <= newline < tail_n // 2:
        tail = tail[newline + 1 :]
    return head + cut_marker(len(text) - len(head) - len(tail), hint) + tail


class OutputCapture:
    def __init__(self, scratch: Scratch | None, label: str = "output") -> None:
        self.scratch = scratch
        self.label = label
        self.total = 0  # bytes seen
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.path: Path | None = None
        self._file: BinaryIO | None = None
        self._written = 0
        # A background child may still write after the command ended: reads and writes take turns.
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        with self._lock:
            self._feed(data)

    def _feed(self, data: bytes) -> None:
        self.total += len(data)
        if self._file is not None:
            self._write(data)
        room = HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_size += len(data)
            if self._file is None and self.total > HEAD_BYTES + TAIL_BYTES and self.scratch is not None:
                self._start_file()  # nothing was dropped yet: the file gets all of it
            while self.tail_size > TAIL_BYTES:
                excess = self.tail_size - TAIL_BYTES
                if len(self.tail[0]) <= excess:
                    self.tail_size -= len(self.tail.popleft())
                else:
                    self.tail[0] = self.tail[0][excess:]
                    self.tail_size -= excess

    def _start_file(self) -> None:
        assert self.scratch is not None
        try:
            self.path, self._file = self.scratch.create(self.label)
        except OSError:
            self.path = None
            return
        self._write(bytes(self.head) + b"".join(self.tail))

    def _write(self, data: bytes) -> None:
        assert self._file is not None
        room = MAX_FILE_BYTES - self._written
        if room <= 0:
            return
        try:
            self._file.write(data[:room])
        except OSError:
            self._file.close()
            self._file = None
            return
        self._written += min(len(data), room)

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._file is not None:
            if self.total > MAX_FILE_BYTES:
                self._file.write(
                    f"\n… stopped here: the output went on for {self.total - MAX_FILE_BYTES:,} bytes\n".encode()
                )
            self._file.close()
            self._file = None

    @property
    def cut(self) -> bool:
        return self.total > HEAD_BYTES + self.tail_size

    def text(self) -> str:
        with self._lock:
            return self._text()

    def _text(self) -> str:
        head = codecs.decode(bytes(self.head), "utf-8", errors="replace")
        tail_bytes = b"".join(self.tail)
        if not self.cut:
            return codecs.decode(bytes(self.head) + tail_bytes, "utf-8", errors="replace")
        # The ring may begin mid-character or mid-line: start the tail at its first full line.
        newline = tail_bytes.find(b"\n")
        if 0 <= newline < len(tail_bytes) // 2:
            tail_bytes = tail_bytes[newline + 1 :]
        tail = codecs.decode(tail_bytes, "utf-8", errors="replace")
        saved = self.scratch.shown(self.path) if self.scratch is not None and self.path is not None else None
        return head + cut_marker(self.total - len(self.head) - len(tail_bytes), saved_hint(saved)) + tail
