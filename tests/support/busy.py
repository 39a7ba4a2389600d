"""Other programs keeping cores busy, for the tests and benchmarks of a shared CPU (issue 68):
`count` processes spinning at a nice level, bounded by the block and killed by their PIDs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SPIN = "while True: pass"


@contextmanager
def busy(count: int, nice: int = 0) -> Iterator[None]:
    command = [sys.executable, "-c", SPIN]
    if nice:
        command = ["nice", "-n", str(nice), *command]
    spinning = [subprocess.Popen(command, stdin=subprocess.DEVNULL) for _ in range(count)]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
        for process in spinning:
            process.wait(timeout=30)
