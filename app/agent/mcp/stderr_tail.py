"""A server's stderr, read on a thread of its own with only its last few KiB kept: it
never reaches the terminal under the chat, never lands on disk, and costs a fixed
amount of memory however much the server writes. Its last line explains a failure."""

from __future__ import annotations

import os
import threading
from typing import TextIO

KEEP_BYTES = 4096


class StderrTail:
    def __init__(self, keep: int = KEEP_BYTES) -> None:
        read_fd, write_fd = os.pipe()
        self.writer: TextIO = os.fdopen(write_fd, "w")  # the server's stderr
        self._keep = keep
        self._kept = bytearray()
        self._lock = threading.Lock()
        self.ended = threading.Event()  # the server and everything that shared its stderr are gone
        threading.Thread(target=self._pump, args=(read_fd,), name="mcp-stderr", daemon=True).start()

    def _pump(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 65536):
                with self._lock:
                    self._kept += chunk
                    del self._kept[: -self._keep]
        except OSError:
            pass
        finally:
            os.close(fd)
            self.ended.set()

    def spawned(self) -> None:
        """The server has its copy: ours goes, so the pipe ends when the server does."""
        if not self.writer.closed:
            self.writer.close()

    close = spawned

    def last_line(self) -> str:
        with self._lock:
            text = self._kept.decode(errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else ""
