"""Other programs keeping cores busy, for the tests and benchmarks of a shared CPU (issue 68):
`count` processes spinning at a nice level, bounded by the block and killed by their PIDs; in a
session of their own where asked, as a program started in another terminal is (its own
autogroup, where Linux schedules by session)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SPIN = "while True: pass"


@contextmanager
def busy(count: int, nice: int = 0, own_session: bool = False) -> Iterator[None]:
    command = [sys.executable, "-c", SPIN]
    if nice:
        command = ["nice", "-n", str(nice), *command]
    spinning = [
        subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=own_session) for _ in range(count)
    ]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
        for process in spinning:
            process.wait(timeout=30)
