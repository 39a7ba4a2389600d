"""Where run_command's commands run: in a sandbox where the system has one, as Codex does.

Inside it a command reads the whole system but writes only in the project (every `.git` in
it, the agents' configuration and what hooks name stay read-only: app/agent/guarded.py) and a
temporary folder of its own, and reaches no network, loopback
included. On Linux that is bubblewrap (`bwrap`: a mount and network namespace, and a
PID namespace so nothing the command starts outlives it); on macOS `sandbox-exec` with
a Seatbelt profile. Where neither works, there is no sandbox and the consent question
says so: never a silent fallback.

The policy lives here: the session asks `describe()` what the question says and
`wrap()` what to run; the command runner only prepends what it is given.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["bubblewrap", "seatbelt", "none"]
SANDBOX_TMP = "/tmp"  # the command's own temporary folder inside bubblewrap (a fresh tmpfs)


@dataclass(frozen=True)
class Sandbox:
    kind: Kind
    program: str = ""  # the wrapper's path
    problem: str = ""  # with kind "none": why, in words for the user

    @property
    def available(self) -> bool:
        return self.kind != "none"

    def wrap(self, root: Path, read_only: Sequence[Path] = ()) -> list[str]:
        """The argv to put in front of `/bin/sh -c COMMAND` for a command in `root`;
        `read_only`: places inside it the command must not write (app/agent/guarded.py: every
        `.git`, agents' configuration, what hooks name), existing paths, outermost first."""
        root = root.resolve()
        if self.kind == "bubblewrap":
            argv = [self.program, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
            # A /tmp of its own: the system's holds other programs' sockets (tmux's, X11's, an ssh
            # agent's) that would run things outside. What lives there that commands need stays
            # visible, read-only: the Python that runs dspine (a venv under /tmp) and the project.
            argv += ["--tmpfs", SANDBOX_TMP]
            for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
                if Path(prefix).resolve().is_relative_to(SANDBOX_TMP):
                    argv += ["--ro-bind-try", prefix, prefix]
            argv += ["--bind", str(root), str(root)]
            git = root / ".git"
            if os.path.lexists(git) and not git.is_symlink() and git not in read_only:
                # A folder or a worktree's `gitdir:` file: read-only either way (hooks, config).
                argv += ["--ro-bind", str(git), str(git)]
            for path in read_only:
                argv += ["--ro-bind-try", str(path), str(path)]
            # No capabilities (as root, bubblewrap keeps them: a remount would make / writable),
            # no network, no processes left behind, no terminal to push keys into.
            argv += ["--cap-drop", "ALL", "--unshare-net", "--unshare-pid", "--unshare-ipc"]
            argv += ["--die-with-parent", "--new-session"]
            # Sockets of services that act for the user outside (the session bus runs programs,
            # the ssh agent signs): /run hidden, their addresses not passed on.
            argv += ["--tmpfs", "/run"]
            for name in ("DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DOCKER_HOST"):
                argv += ["--unsetenv", name]
            return [*argv, "--setenv", "TMPDIR", SANDBOX_TMP, "--chdir", str(root), "--"]
        if self.kind == "seatbelt":
            return [self.program, "-p", seatbelt_profile(root, read_only), "--"]
        raise ValueError("no sandbox to wrap a command in")


def seatbelt_profile(root: Path, read_only: Sequence[Path] = ()) -> str:
    """macOS: everything allowed but the network and writes outside the project, its
    temporary folders and /dev/null (Codex's workspace-write policy, in Seatbelt's words), and
    writes to the project's `.git` and the other `read_only` places."""

    def literal(path: str) -> str:
        return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'

    writable = [str(root), "/private/tmp", "/private/var/folders", os.environ.get("TMPDIR", "/private/tmp")]
    subpaths = " ".join(f"(subpath {literal(str(Path(p).resolve()))})" for p in dict.fromkeys(writable))
    git = root / ".git"
    denied = [*([git] if git.is_dir() else []), *read_only]
    deny_git = "".join(f"(deny file-write* (subpath {literal(str(p))}))" for p in dict.fromkeys(denied))
    return (
        "(version 1)(allow default)(deny network*)"
        '(deny file-write*)(allow file-write* (literal "/dev/null") (literal "/dev/tty") '
        f"{subpaths}){deny_git}"
    )


@functools.lru_cache(maxsize=4)
def _works(argv: tuple[str, ...]) -> str:
    """ "" when a trivial command runs inside the sandbox, else the reason it does not."""
    try:
        done = subprocess.run([*argv, "/bin/sh", "-c", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    said = (done.stderr or done.stdout).strip().splitlines()
    return said[-1] if said else f"exit code {done.returncode}"


def find(platform: str = sys.platform, check: bool = True) -> Sandbox:
    """The sandbox this system has, checked to work (bubblewrap needs namespaces a container
    may not grant): kind "none" with the reason otherwise."""
    if platform.startswith("linux"):
        program = shutil.which("bwrap")
        if program is None:
            return Sandbox("none", problem="bubblewrap (bwrap) is not installed: apt install bubblewrap")
        box = Sandbox("bubblewrap", program)
        problem = _works(tuple(box.wrap(Path(os.getcwd())))) if check else ""
        return box if not problem else Sandbox("none", program, f"bubblewrap cannot run here ({problem})")
    if platform == "darwin":
        program = shutil.which("sandbox-exec") or "/usr/bin/sandbox-exec"
        if not os.path.exists(program):
            return Sandbox("none", problem="sandbox-exec is missing")
        box = Sandbox("seatbelt", program)
        problem = _works(tuple(box.wrap(Path(os.getcwd())))) if check else ""
        return box if not problem else Sandbox("none", program, f"sandbox-exec cannot run here ({problem})")
    return Sandbox("none", problem=f"no sandbox is known for {platform}")


Where = Literal["sandbox", "outside"]


def describe(box: Sandbox, where: Where, setting_off: bool = False) -> str:
    """What the consent question says about where the command runs."""
    if where == "sandbox":
        return (
            f"Runs in a sandbox ({box.kind}): it writes only in the project (not in .git nor in the "
            "agents' settings and hooks) and a temporary folder, and has no network."
        )
    anywhere = "it can write anywhere you can and use the network."
    if setting_off:
        return f"Runs OUTSIDE any sandbox (sandbox = false in your settings): {anywhere}"
    if not box.available:
        return f"Runs OUTSIDE any sandbox: this system has none ({box.problem}); {anywhere}"
    return f"Runs OUTSIDE the sandbox, as the model asked: {anywhere}"


def where_to_run(box: Sandbox, enabled: bool, outside_asked: bool) -> Where:
    """A command runs in the sandbox unless the system has none, the user's setting turns it
    off, or the model asked for this one call to run outside (which the user then sees)."""
    return "sandbox" if box.available and enabled and not outside_asked else "outside"
