"""run_command: one shell command in the project, with a timeout, no stdin and
capped output, streamed to whoever shows it; stoppable at once. The output is read
in bounded memory (capture.OutputCapture): its head and tail for the model, the
whole of it in the project's scratch folder when it was cut."""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .capture import OutputCapture
from .child_env import child_environ
from .scratch import Scratch

DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 1800
MAX_SHOWN_CHARS = 20_000  # of output waiting to be shown: a flood shows its newest part
READ_BYTES = 65_536


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int | None  # None: stopped (timeout or the user)
    output: str
    timed_out: bool = False
    stopped: bool = False
    saved: str | None = None  # where the whole output is, when `output` is only its head and tail

    def for_model(self) -> str:
        if self.timed_out:
            head = "the command timed out and was stopped"
        elif self.stopped:
            head = "the user stopped the command"
        else:
            head = f"exit code {self.exit_code}"
        return f"{head}\n{self.output}" if self.output else head


# On Linux every command runs under reaper.py, a child subreaper that ends all the command's
# descendants when it ends or is stopped (background children, setsid grandchildren, daemons).
# Elsewhere the shell runs directly and its process group is killed at the end.
_REAPER = Path(__file__).with_name("reaper.py")
_USE_REAPER = sys.platform.startswith("linux") and bool(sys.executable) and _REAPER.is_file()
# How long the reaper gets to end everything after a stop before the group is killed outright.
_REAPER_GRACE_S = 5.0


def _popen_command(command: str, wrap: list[str] | None = None) -> tuple[list[str] | str, bool]:
    """What to start for `command` and whether it goes through a shell of Popen's. `wrap`: a
    sandbox's argv the shell runs inside (sandbox.Sandbox.wrap)."""
    if _USE_REAPER:
        return [sys.executable, "-I", "-S", str(_REAPER), str(os.getpid()), command, *(wrap or [])], False
    if wrap:
        return [*wrap, "/bin/sh", "-c", command], False
    return command, True


def _kill_group(process: subprocess.Popen) -> None:
    # The shell's children (a test runner, a server) die with it.
    try:
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass


def _stop_all(process: subprocess.Popen) -> None:
    """Stop the command and everything it started (the caller kills the group after)."""
    if not _USE_REAPER:
        return
    # os.kill, not send_signal: that one reaps a finished process first, and the pid must stay ours.
    try:
        os.kill(process.pid, signal.SIGTERM)  # the reaper kills every descendant, then exits
    except ProcessLookupError:
        return
    deadline = time.monotonic() + _REAPER_GRACE_S
    while not _has_exited(process) and time.monotonic() < deadline:
        time.sleep(0.01)


def _has_exited(process: subprocess.Popen) -> bool:
    """Whether the command ended, without reaping it on POSIX: while its zombie holds the pid,
    its process group id cannot be reused, so the group can still be killed safely."""
    if os.name != "posix" or not hasattr(os, "waitid"):
        return process.poll() is not None
    if process.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class _ShownOutput:
    """A command's output as it comes, decoded for `on_output` (at most the last
    MAX_SHOWN_CHARS not shown yet), and all of it to the capture."""

    def __init__(self, on_output: Callable[[str], None] | None) -> None:
        self.on_output = on_output
        self.pending: list[str] = []  # decoded output not yet handed to on_output
        self.lock = threading.Lock()

    def read_all(self, fd: int, capture: OutputCapture) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while data := os.read(fd, READ_BYTES):
            capture.feed(data)
            if self.on_output is not None:
                text = decoder.decode(data)
                with self.lock:
                    self.pending.append(text)
                    if sum(map(len, self.pending)) > MAX_SHOWN_CHARS:
                        self.pending[:] = ["".join(self.pending)[-MAX_SHOWN_CHARS:]]

    def show(self) -> None:
        if self.on_output is None:
            return
        with self.lock:
            text = "".join(self.pending)
            self.pending.clear()
        if text:
            self.on_output(text)


def _wait(
    process: subprocess.Popen, stop: threading.Event | None, deadline: float, show: Callable[[], None]
) -> tuple[bool, bool]:
    """Until the command exits, is stopped or runs out of time (then its group is ended):
    (stopped, timed out)."""
    timed_out = stopped = False
    while not _has_exited(process):
        if stop is not None and stop.is_set():
            stopped = True
        elif time.monotonic() >= deadline:
            timed_out = True
        if stopped or timed_out:
            _stop_all(process)
            break
        show()
        # Wake at once when asked to stop; otherwise look at the process every 50 ms.
        if stop is not None:
            stop.wait(0.05)
        else:
            time.sleep(0.05)
    return stopped, timed_out


def run_command(
    root: Path,
    command: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_output: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    scratch: Scratch | None = None,
    wrap: list[str] | None = None,
) -> CommandResult:
    """`scratch`: where the whole output goes when it is longer than what the model gets;
    `wrap`: the sandbox to run it in (its argv before the shell), None for none."""
    timeout_s = max(1.0, min(float(timeout_s), MAX_TIMEOUT_S))
    argv, through_shell = _popen_command(command, wrap)
    process = subprocess.Popen(
        argv,
        shell=through_shell,
        cwd=root,
        env=child_environ(),  # no keys nor tokens of dspine's (app/agent/child_env.py)
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=os.name == "posix",
    )
    assert process.stdout is not None
    capture = OutputCapture(scratch, "command")
    output = _ShownOutput(on_output)
    reader = threading.Thread(target=output.read_all, args=(process.stdout.fileno(), capture), daemon=True)
    reader.start()
    stopped, timed_out = _wait(process, stop, time.monotonic() + timeout_s, output.show)
    # The command ended: what it left in the background ends too (its group; the reaper has
    # already ended the rest), before the pid is reaped and could be reused.
    _kill_group(process)
    process.wait()
    reader.join(timeout=2)
    output.show()
    capture.close()
    saved = scratch.shown(capture.path) if scratch is not None and capture.path is not None else None
    code = None if (stopped or timed_out) else process.returncode
    return CommandResult(command, code, capture.text(), timed_out, stopped, saved)
