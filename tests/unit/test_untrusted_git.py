"""The tools that ask no consent run git without anything the project's own `.git/config`
names: a repository that arrives with its `.git` runs no program when the chat lists or
searches it (fourth hostile trial, finding 3)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.agent.safe_git import git_argv
from app.agent.toolbox import Done, Toolbox


@pytest.fixture
def hostile_repo(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "main.py").write_text("print('hello')\n")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("ignored\n")
    subprocess.run(["git", "-C", str(root), "add", "main.py"], check=True)
    marker = tmp_path / "ran"
    hook = root / "monitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    for key, value in (
        ("core.fsmonitor", str(hook)),
        ("core.pager", f"touch {marker}; cat"),
        ("core.hooksPath", str(root)),
    ):
        subprocess.run(["git", "-C", str(root), "config", key, value], check=True)
    return root, marker


def test_the_hostile_config_runs_its_program_with_plain_git(hostile_repo):
    """The premise: plain `git ls-files` here runs the project's fsmonitor (so the test below
    would catch a tool that ran git as before)."""
    root, marker = hostile_repo
    subprocess.run(["git", "ls-files", "--others"], cwd=root, capture_output=True, check=False)
    assert marker.exists()


def test_list_files_and_search_run_nothing_the_project_configures(hostile_repo):
    root, marker = hostile_repo
    box = Toolbox(root)
    listed = box.prepare("list_files", {})
    assert isinstance(listed, Done) and "main.py" in listed.result
    assert "build/out.py" not in listed.result  # git still decides what is ignored
    found = box.prepare("search", {"pattern": "hello"})
    assert isinstance(found, Done) and "main.py" in found.result
    assert not marker.exists()


def test_every_setting_that_names_a_program_is_neutralised():
    argv = git_argv("status")
    settings = {argv[i + 1].split("=", 1)[0] for i, part in enumerate(argv) if part == "-c"}
    assert {"core.fsmonitor", "core.hooksPath", "core.pager", "core.sshCommand"} <= settings
    assert argv[0] == "git" and argv[-1] == "status"
