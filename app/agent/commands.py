"""run_command: one shell command in the project, with a timeout, no stdin and
capped output, streamed line by line to whoever shows it; stoppable at once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 1800
MAX_OUTPUT_CHARS = 16_000


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int | None  # None: stopped (timeout or the user)
    output: str
    timed_out: bool = False
    stopped: bool = False

    def for_model(self) -> str:
        if self.timed_out:
            head = "the command timed out and was stopped"
        elif self.stopped:
            head = "the user stopped the command"
        else:
            head = f"exit code {self.exit_code}"
        return f"{head}\n{self.output}" if self.output else head


def _kill_group(process: subprocess.Popen) -> None:
    # The shell's children (a test runner, a server) die with it.
    try:
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass


def run_command(
    root: Path,
    command: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_output: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> CommandResult:
    timeout_s = max(1.0, min(float(timeout_s), MAX_TIMEOUT_S))
    process = subprocess.Popen(
        command,
        shell=True,
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=os.name == "posix",
    )
    assert process.stdout is not None
    pieces: list[str] = []
    size = 0
    cut = False

    def read() -> None:
        nonlocal size, cut
        assert process.stdout is not None
        for raw in iter(process.stdout.readline, b""):
            line = raw.decode(errors="replace")
            if on_output is not None:
                on_output(line)
            if size < MAX_OUTPUT_CHARS:
                pieces.append(line[: MAX_OUTPUT_CHARS - size])
                size += len(pieces[-1])
            else:
                cut = True

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout_s
    timed_out = stopped = False
    while process.poll() is None:
        if stop is not None and stop.is_set():
            stopped = True
        elif time.monotonic() >= deadline:
            timed_out = True
        if stopped or timed_out:
            _kill_group(process)
            break
        # Wake at once when asked to stop; otherwise look at the process every 50 ms.
        if stop is not None:
            stop.wait(0.05)
        else:
            time.sleep(0.05)
    process.wait()
    reader.join(timeout=2)
    output = "".join(pieces) + (f"\n… output cut at {MAX_OUTPUT_CHARS:,} characters" if cut else "")
    code = None if (stopped or timed_out) else process.returncode
    return CommandResult(command, code, output, timed_out, stopped)
