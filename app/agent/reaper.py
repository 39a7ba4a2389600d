"""Runs one shell command and, when it ends or is stopped, ends every process it
started: `python reaper.py PARENT_PID COMMAND` (Linux).

A process group is not enough: `sleep 95 &` outlives the shell that started
it, and `setsid` (or a daemon's double fork) leaves the group altogether. This
wrapper makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every
descendant whose parent dies is re-parented to it instead of to init, however
it left the group or session. When the shell exits, or SIGTERM/SIGINT/SIGHUP
arrives (the chat's stop and timeout), or the chat itself dies (parent-death
signal), it kills its children with SIGKILL until it has none left, reaping
each one, and exits with the shell's status. Why not psutil snapshots of the
tree: a grandchild whose parent already exited has left the tree (init adopted
it) and no snapshot finds it again; the subreaper keeps it.

Run by its path with `python -I -S`: a few built-in modules and ctypes, nothing of
dspine, so it starts as fast as Python can (about 50-100 ms on a busy two-core machine).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SHELL = "/bin/sh"  # what subprocess uses for shell=True


# The shell's pid while it runs (0 before and after) and whether a stop arrived: the signal
# handler only kills the shell, so the clean-up below runs on every path.
_state = {"shell": 0, "stopped": 0}


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children(parent: int) -> list[int]:
    """Every live or zombie process whose parent is `parent`, from /proc (the per-task
    `children` file needs CONFIG_PROC_CHILDREN, which not every kernel has)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                data = stat.read()
        except OSError:
            continue  # it ended while we looked
        # The name field is in parentheses and may hold spaces and ')': the parent follows the last ')'.
        fields = data[data.rindex(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == parent:
            found.append(int(entry))
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return  # it ended meanwhile


def end_all(me: int) -> None:
    """SIGKILL every child until none is left. Killing one re-parents its children to us
    (we are their subreaper), so the loop reaches every descendant."""
    while True:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no children at all: every descendant has ended (the usual case: no scan)
        if reaped:
            continue
        for pid in children(me):
            _kill(pid)
        time.sleep(0.002)  # killed ones are still dying; look again


def _stop(signum: int, frame: object) -> None:
    _state["stopped"] = 1
    if _state["shell"]:
        _kill(_state["shell"])


def _run_shell(command: str, wrap: list[str]) -> int:
    """The shell's wait status; orphans adopted meanwhile are reaped on the way. `wrap`: a
    sandbox's argv the shell runs inside (app/agent/sandbox.py), or nothing."""
    shell = os.fork()
    if shell == 0:
        try:
            # Python ignores SIGPIPE and we catch these; the command gets the usual defaults.
            for signum in (signal.SIGPIPE, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            argv = [*wrap, SHELL, "-c", command]
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _state["shell"] = shell
    if _state["stopped"]:
        _stop(signal.SIGTERM, None)  # the stop came between fork() and the line above
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == shell:
            _state["shell"] = 0
            return status


def _end_like(status: int) -> int:
    """Exit as the shell did: with its code, or killed by its signal, so the caller's
    returncode is what a plain shell=True Popen would give (-9 for `kill -9 $$`)."""
    if os.WIFSIGNALED(status):
        import resource  # only here: a start costs every command

        signum = os.WTERMSIG(status)
        # No core file of ours (it would land in the project) for a shell that dumped one.
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if signum != signal.SIGKILL:
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return 128 + signum  # a signal that does not end a process (never for a shell's end)
    return os.waitstatus_to_exitcode(status)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: reaper.py PARENT_PID COMMAND [WRAPPER ARGV...]", file=sys.stderr)
        return 2
    parent, command, wrap = int(argv[1]), argv[2], argv[3:]
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _stop)
    if not _prctl(PR_SET_CHILD_SUBREAPER, 1):
        print("dspine: cannot become a subreaper; background processes may outlive the command", file=sys.stderr)
    # If the chat dies, SIGTERM reaches us and the command ends with it. (The signal follows the
    # thread that started us, which waits for the command, so it does not fire early.)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        _state["stopped"] = 1  # the chat died before the line above
    status = _run_shell(command, wrap) if not _state["stopped"] else 0
    end_all(os.getpid())
    if _state["stopped"]:
        return 128 + signal.SIGTERM
    return _end_like(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
