"""Runs one MCP server so that it cannot outlive the chat (Linux).

The chat starts `python -I -S guard.py CHAT_PID PROGRAM ARGS...` in a session of its
own (the MCP SDK does that); the guard asks the kernel for SIGTERM when the chat's
thread that started it dies (PR_SET_PDEATHSIG: a `kill -9` of the chat included),
becomes the reaper of the server's orphans (PR_SET_CHILD_SUBREAPER) and starts the
server, which inherits the guard's stdin, stdout and stderr untouched. On SIGTERM,
SIGHUP or SIGINT the guard kills its whole process group: the server and whatever
it started. When the server exits on its own, the rest of the group goes too.

Standard library only, and no imports from dspine: it runs with -I -S, fast.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _kill_group(signum: int = 0, frame: object = None) -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)  # the guard is in the group too: this is its end


def main(argv: list[str]) -> int:
    parent, program = int(argv[1]), argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _kill_group)
    if os.getppid() != parent:  # the chat died before the line above took effect
        _kill_group()
    try:
        server = subprocess.Popen(program)
    except OSError as exc:
        print(f"cannot start {program[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        return 127
    code = server.wait()
    # Whatever the server left behind (its own children) goes with it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(os.getpgrp(), signal.SIGTERM)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
