"""git for tools that ask no consent: with nothing the project's own configuration names run.

A project can arrive with its `.git` (an archive, a copied folder), and its `.git/config` is
the project's to write: `core.fsmonitor` there runs a program on `git ls-files`,
`core.hooksPath` picks the hooks, `core.pager` and `core.sshCommand` name programs too.
Command-line `-c` settings win over every configuration file, so each of those is set here
to a value that runs nothing; the environment turns off pagers, prompts and optional locks
(a read never writes the index), and the system-wide file is left out.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

# Settings through which a repository's configuration runs a program, each made inert.
NEUTRAL_SETTINGS: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.pager", "cat"),
    ("core.sshCommand", "false"),
    ("core.askPass", "false"),
    ("core.editor", "false"),
    ("core.untrackedCache", "false"),
    ("credential.helper", ""),
    ("diff.external", ""),
    ("protocol.allow", "never"),
)


def git_argv(*arguments: str) -> list[str]:
    """`git` with the neutral settings in front of `arguments`."""
    settings = [part for key, value in NEUTRAL_SETTINGS for part in ("-c", f"{key}={value}")]
    return ["git", *settings, *arguments]


def git_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if environ is None else environ)
    # Variables that would point git at another repository or add settings of their own.
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF"):
        env.pop(name, None)
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_PAGER="cat",
        PAGER="cat",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_ASKPASS="false",
        SSH_ASKPASS="false",
    )
    return env


def run_git(root: Path, *arguments: str) -> subprocess.CompletedProcess[bytes]:
    """Run a read-only git command in `root`, its output captured, no input."""
    return subprocess.run(
        git_argv(*arguments),
        cwd=root,
        env=git_environment(),
        capture_output=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
