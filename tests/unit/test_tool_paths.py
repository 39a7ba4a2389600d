"""Every path the chat's tools touch stays inside the project (issue 22, items 2, 4 and 9's apply):
links met during a walk, special files, hard links, folders swapped while consent waited, and
every spelling of `.git`."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from app.agent import safe_files
from app.agent.paths import ToolRefused, is_git_name
from app.agent.toolbox import Done, ProposedChange, Toolbox

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- hunter2"


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Someone's home folder beside the project, with a key in it."""
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "id_ed25519").write_text(SECRET + "\n")
    return tmp_path / "home"


@pytest.fixture(params=["git", "plain"])
def project(request, tmp_path: Path, home: Path) -> Path:
    """A project (a git repository with the link committed, or a plain folder) holding
    `leak.txt -> ~/.ssh/id_ed25519`, a linked folder leading out, and an honest file."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "leak.txt").symlink_to(home / ".ssh" / "id_ed25519")
    (root / "dotssh").symlink_to(home / ".ssh", target_is_directory=True)
    (root / "inner.txt").symlink_to(root / "src" / "calc.py")  # a link that stays inside is fine
    if request.param == "git":
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "links")
    return root


def run(toolbox: Toolbox, name: str, **args) -> str:
    step = toolbox.prepare(name, args)
    assert isinstance(step, Done), step
    return step.result


def test_search_over_the_project_does_not_read_through_a_link_that_leads_out(project):
    toolbox = Toolbox(project)
    assert run(toolbox, "search", pattern="PRIVATE KEY") == "no matches"
    assert run(toolbox, "search", pattern="hunter2", path="dotssh").startswith("error:")
    assert "src/calc.py:2:" in run(toolbox, "search", pattern="return a")


def test_list_files_does_not_list_a_link_that_leads_out(project):
    listing = run(Toolbox(project), "list_files").splitlines()
    assert "leak.txt" not in listing and not any(name.startswith("dotssh") for name in listing)
    assert "src/calc.py" in listing and "inner.txt" in listing


def test_read_file_refuses_the_link(project):
    result = run(Toolbox(project), "read_file", path="leak.txt")
    assert result.startswith("error:") and "outside" in result and "hunter2" not in result


def in_thread(work, seconds: float = 10.0):
    """A call that must not block (on a FIFO's open): its result or its exception, or a
    failure after `seconds`."""
    box: list[tuple[bool, object]] = []

    def target() -> None:
        try:
            box.append((True, work()))
        except Exception as exc:
            box.append((False, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert box, f"the call was still blocked after {seconds} s"
    returned, value = box[0]
    if not returned:
        assert isinstance(value, Exception)
        raise value
    return value


def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    os.mkfifo(root / "pipe")
    (root / "ok.txt").write_text("needle\n")
    toolbox = Toolbox(root)
    result = in_thread(lambda: run(toolbox, "read_file", path="pipe"))
    assert result.startswith("error:") and "named pipe" in result
    assert in_thread(lambda: run(toolbox, "search", pattern="needle")) == "ok.txt:1: needle"
    assert in_thread(lambda: run(toolbox, "search", pattern="needle", path="pipe")) == "no matches"
    assert "pipe" not in in_thread(lambda: run(toolbox, "list_files")).splitlines()
    written = in_thread(lambda: run(toolbox, "write_file", path="pipe", content="x"))
    assert written.startswith("error:") and "named pipe" in written


def test_a_device_reached_through_a_link_is_refused(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "zero").symlink_to("/dev/zero")
    result = in_thread(lambda: run(Toolbox(root), "read_file", path="zero"))
    assert result.startswith("error:")


def test_safe_read_refuses_a_fifo_even_when_given_its_real_path(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ToolRefused, match="named pipe"):
        in_thread(lambda: safe_files.read_bytes(tmp_path, tmp_path / "pipe", "pipe", 1000))


# -- writes: hard links and folders swapped while consent waited ---------------------------------


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "old.txt").write_text("old\n")
    (tmp_path / "outside").mkdir()
    return root


def test_a_file_with_a_second_hard_link_is_not_written(plain, tmp_path):
    target = tmp_path / "outside" / "bashrc"
    target.write_text("mine\n")
    os.link(target, plain / "linked.txt")
    toolbox = Toolbox(plain)
    result = run(toolbox, "write_file", path="linked.txt", content="pwned\n")
    assert result.startswith("error:") and "hard links" in result
    edit = run(toolbox, "edit_file", path="linked.txt", old_text="mine", new_text="pwned")
    assert edit.startswith("error:") and "hard links" in edit
    assert target.read_text() == "mine\n"


def test_a_hard_link_to_a_file_outside_is_not_read(plain, home):
    # Issue 34: a hard link is a plain file inside the project to every path check.
    os.link(home / ".ssh" / "id_ed25519", plain / "notes.txt")
    toolbox = Toolbox(plain)
    for args in ({"path": "notes.txt"}, {"path": "notes.txt", "start_line": 1, "end_line": 1}):
        result = run(toolbox, "read_file", **args)
        assert result.startswith("error:") and "hard link" in result and "outside the project" in result
        assert SECRET not in result
    found = run(toolbox, "search", pattern="PRIVATE KEY")
    assert SECRET not in found and "notes.txt" not in found


def test_a_hard_linked_instructions_file_is_not_read_and_the_chat_is_told_why(tmp_path, home):
    from app.agent.project import open_project, system_prompt

    root = tmp_path / "project"
    root.mkdir()
    os.link(home / ".ssh" / "id_ed25519", root / "CLAUDE.md")
    project = open_project(root)
    assert project.instructions == "" and SECRET not in system_prompt(project, True)
    assert "CLAUDE.md" in project.refused and "hard link" in project.refused


def test_a_hard_link_made_while_consent_waited_stops_the_write(plain, tmp_path):
    toolbox = Toolbox(plain)
    step = toolbox.prepare("write_file", {"path": "sub/old.txt", "content": "new\n"})
    assert isinstance(step, ProposedChange)
    os.link(plain / "sub" / "old.txt", tmp_path / "outside" / "kept.txt")
    result = toolbox.apply(step.change)
    assert result.startswith("error:") and "hard links" in result
    assert (tmp_path / "outside" / "kept.txt").read_text() == "old\n"


@pytest.mark.parametrize("name", ["sub/new.txt", "sub/old.txt", "sub/deeper/new.txt"])
def test_a_folder_swapped_for_a_link_while_consent_waited_stops_the_write(plain, tmp_path, name):
    outside = tmp_path / "outside"
    (outside / "old.txt").write_text("old\n")  # what the swapped folder leads to looks the same
    toolbox = Toolbox(plain)
    step = toolbox.prepare("write_file", {"path": name, "content": "pwned\n"})
    assert isinstance(step, ProposedChange)
    (plain / "sub").rename(plain / "sub.moved")
    (plain / "sub").symlink_to(outside, target_is_directory=True)
    result = toolbox.apply(step.change)
    assert result.startswith("error:"), result
    assert sorted(p.name for p in outside.iterdir()) == ["old.txt"]
    assert (outside / "old.txt").read_text() == "old\n"


def test_a_folder_swapped_after_the_path_check_is_met_by_o_nofollow(plain, tmp_path):
    """The last line of defence: the path was checked, then a folder became a link."""
    outside = tmp_path / "outside"
    real = plain.resolve() / "sub" / "new.txt"
    (plain / "sub").rename(plain / "sub.moved")
    (plain / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ToolRefused, match="became a symlink"):
        safe_files.replace(plain, real, "sub/new.txt", None, b"pwned\n")
    with pytest.raises(ToolRefused, match="became a symlink"):
        safe_files.read_bytes(plain, plain.resolve() / "sub" / "old.txt", "sub/old.txt", 1000)
    assert list(outside.iterdir()) == []


def test_the_file_itself_swapped_for_a_link_is_not_written_through(plain, tmp_path):
    outside = tmp_path / "outside" / "old.txt"
    outside.write_text("old\n")
    toolbox = Toolbox(plain)
    step = toolbox.prepare("write_file", {"path": "sub/old.txt", "content": "pwned\n"})
    assert isinstance(step, ProposedChange)
    (plain / "sub" / "old.txt").unlink()
    (plain / "sub" / "old.txt").symlink_to(outside)
    assert toolbox.apply(step.change).startswith("error:")
    with pytest.raises(ToolRefused):
        safe_files.replace(plain, plain.resolve() / "sub" / "old.txt", "sub/old.txt", b"old\n", b"pwned\n")
    assert outside.read_text() == "old\n"


def test_ordinary_writes_edits_and_undo_still_work(plain):
    toolbox = Toolbox(plain)
    created = toolbox.prepare("write_file", {"path": "a/b/new.txt", "content": "hello\n"})
    assert isinstance(created, ProposedChange)
    assert toolbox.apply(created.change).startswith("applied")
    assert (plain / "a" / "b" / "new.txt").read_text() == "hello\n"
    assert "old" in run(toolbox, "read_file", path="sub/old.txt")
    edited = toolbox.prepare("edit_file", {"path": "sub/old.txt", "old_text": "old", "new_text": "new"})
    assert isinstance(edited, ProposedChange)
    assert toolbox.apply(edited.change).startswith("applied")
    assert (plain / "sub" / "old.txt").read_text() == "new\n"
    assert toolbox.changes.undo().startswith("undone")
    assert (plain / "sub" / "old.txt").read_text() == "old\n"
    assert toolbox.changes.undo() == "undone: removed a/b/new.txt"
    assert not (plain / "a" / "b" / "new.txt").exists()


# -- .git in every spelling ----------------------------------------------------------------------

GIT_SPELLINGS = [
    ".git/config",
    ".GIT/hooks/pre-commit",
    ".Git/config",
    ".git./config",
    ".git /config",
    ".git. . /config",
    "GIT~1/config",
    "git~2/config",
    "GI7EBA~1/config",
    ".git::$INDEX_ALLOCATION/config",
    ".g\u200cit/config",  # HFS+ ignores the zero-width non-joiner
    "\ufeff.git/config",
    "nested/.git/config",
    "a/b/c/.GIT/hooks/post-checkout",
    "nested/.git./hooks/pre-commit",
    ".git",
    "nested/.git",
]


@pytest.mark.parametrize("name", GIT_SPELLINGS)
def test_every_spelling_of_dot_git_is_refused_for_writes(tmp_path, name):
    root = tmp_path / "project"
    root.mkdir()
    result = run(Toolbox(root), "write_file", path=name, content="[core]\n\tfsmonitor = touch /tmp/pwned\n")
    assert result.startswith("error:") and ".git" in result, result
    assert sorted(p.name for p in root.iterdir()) == []


@pytest.mark.parametrize("name", [n for n in GIT_SPELLINGS if not n.endswith((".git", "/.git"))])
def test_every_spelling_of_dot_git_is_refused_for_edits(tmp_path, name):
    root = tmp_path / "project"
    (root / name).parent.mkdir(parents=True)
    (root / name).write_text("[core]\n")
    result = run(Toolbox(root), "edit_file", path=name, old_text="[core]", new_text="[core]\n\tfsmonitor = x")
    assert result.startswith("error:") and ".git" in result, result
    assert (root / name).read_text() == "[core]\n"


def test_a_link_into_dot_git_is_refused_for_writes(tmp_path):
    root = tmp_path / "project"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "hooks").symlink_to(root / ".git" / "hooks", target_is_directory=True)
    result = run(Toolbox(root), "write_file", path="hooks/pre-commit", content="#!/bin/sh\n")
    assert result.startswith("error:") and ".git" in result
    assert not (root / ".git" / "hooks" / "pre-commit").exists()


@pytest.mark.parametrize(
    "name", [".gitignore", ".github/workflows/ci.yml", ".gitmodules", "git/notes.txt", "dot.git", ".gitx/a", "x.git"]
)
def test_names_that_only_look_like_dot_git_are_written(tmp_path, name):
    assert not is_git_name(name.split("/")[0])
    root = tmp_path / "project"
    root.mkdir()
    step = Toolbox(root).prepare("write_file", {"path": name, "content": "ok\n"})
    assert isinstance(step, ProposedChange), step


def test_a_symlink_loop_and_a_nul_are_refusals_not_crashes(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "loop").symlink_to(root / "loop")
    toolbox = Toolbox(root)
    assert run(toolbox, "read_file", path="loop").startswith("error:")
    assert run(toolbox, "write_file", path="loop/x", content="x").startswith("error:")
    assert run(toolbox, "read_file", path="a\0b").startswith("error:")
    assert "loop" not in run(toolbox, "list_files")


def test_an_instructions_file_that_links_out_or_is_a_fifo_is_skipped(tmp_path, home):
    from app.agent.project import open_project

    root = tmp_path / "linked"
    root.mkdir()
    (root / "AGENTS.md").symlink_to(home / ".ssh" / "id_ed25519")
    (root / "CLAUDE.md").write_text("Run pytest -q.\n")
    project = open_project(root)
    assert project.instructions == "Run pytest -q.\n" and SECRET not in project.instructions
    piped = tmp_path / "piped"
    piped.mkdir()
    os.mkfifo(piped / "AGENTS.md")
    assert in_thread(lambda: open_project(piped)).instructions == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes whatever the mode says")
def test_unreadable_and_unwritable_files_are_refusals_not_crashes(plain):
    secret = plain / "sub" / "old.txt"
    toolbox = Toolbox(plain)
    step = toolbox.prepare("write_file", {"path": "sub/old.txt", "content": "new\n"})
    assert isinstance(step, ProposedChange)
    secret.chmod(0o400)
    try:
        assert toolbox.apply(step.change).startswith("error:")
        secret.chmod(0o000)
        assert run(toolbox, "read_file", path="sub/old.txt").startswith("error:")
    finally:
        secret.chmod(0o600)
