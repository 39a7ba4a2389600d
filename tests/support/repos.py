"""Scratch git repositories for the chat and the coding agents to work in."""

from __future__ import annotations

import subprocess
from pathlib import Path

# A commit that works whatever git's global config says (no name, signing on).
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]


def scratch_repo(parent: Path, files: dict[str, str] | None = None, commit: bool = False) -> Path:
    """parent/scratch: a new git repository holding `files` (path -> text), committed if asked."""
    repo = parent / "scratch"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name, text in (files or {}).items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    if commit:
        subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True, capture_output=True)
        subprocess.run([*GIT, "commit", "-q", "-m", "start"], cwd=repo, check=True, capture_output=True)
    return repo
