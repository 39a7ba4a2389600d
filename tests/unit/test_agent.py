"""The chat's project tools as pure logic: paths, reads, edits with undo, commands, consent."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from app.agent.commands import run_command
from app.agent.consent import Consent, command_words
from app.agent.files import MAX_FILE_BYTES, MAX_OUTPUT_CHARS
from app.agent.paths import ToolRefused, resolve
from app.agent.project import find_root, open_project, system_prompt
from app.agent.toolbox import NEEDS_CONSENT, Done, ProposedChange, ProposedCommand, Toolbox


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "README.md").write_text("# calc\n")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("def add(): pass\n")
    return root


def test_project_root_is_the_git_root_and_instructions_go_into_the_system_prompt(repo):
    assert find_root(repo / "src") == repo.resolve()
    assert open_project(repo / "src").instructions_file is None
    (repo / "CLAUDE.md").write_text("claude rules")
    (repo / "AGENTS.md").write_text("Run tests with `make test`.")
    project = open_project(repo / "src")
    assert project.instructions_file == repo.resolve() / "AGENTS.md"
    assert project.instructions_size == len("Run tests with `make test`.")
    assert "make test" in system_prompt(project, tools=True)


def test_project_without_git_is_the_working_directory(tmp_path):
    assert find_root(tmp_path) == tmp_path.resolve()


@pytest.mark.parametrize("name", ["../outside.txt", "src/../../x", "/etc/passwd"])
def test_escapes_are_refused(repo, name):
    with pytest.raises(ToolRefused, match="project"):
        resolve(repo, name)


def test_symlink_out_of_the_project_is_refused(repo, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("key")
    (repo / "link.txt").symlink_to(secret)
    box = Toolbox(repo)
    step = box.prepare("read_file", {"path": "link.txt"})
    assert isinstance(step, Done) and "outside" in step.result and "key" not in step.result


def test_git_internals_are_read_only(repo):
    box = Toolbox(repo)
    assert isinstance(box.prepare("read_file", {"path": ".git/HEAD"}), Done)
    step = box.prepare("write_file", {"path": ".git/hooks/pre-commit", "content": "evil"})
    assert isinstance(step, Done) and "read-only" in step.result


def test_absolute_path_inside_the_project_is_fine(repo):
    assert resolve(repo, str(repo / "src" / "calc.py")) == (repo / "src" / "calc.py").resolve()


def test_read_list_and_search(repo):
    box = Toolbox(repo)
    read = box.prepare("read_file", {"path": "src/calc.py", "start_line": 2})
    assert isinstance(read, Done) and read.result == "    2\t    return a - b"
    listed = box.prepare("list_files", {})
    assert isinstance(listed, Done)
    assert "src/calc.py" in listed.result and "build/out.py" not in listed.result  # .gitignore respected
    found = box.prepare("search", {"pattern": r"def \w+", "glob": "*.py"})
    assert isinstance(found, Done) and found.result == "src/calc.py:1: def add(a, b):"
    bad = box.prepare("search", {"pattern": "("})
    assert isinstance(bad, Done) and "not a valid" in bad.result


def test_binary_and_oversized_files_are_refused_with_what_to_do(repo):
    (repo / "blob.bin").write_bytes(b"\0\1\2")
    (repo / "big.txt").write_text("x" * (MAX_FILE_BYTES + 1))
    box = Toolbox(repo)
    assert "binary" in box.prepare("read_file", {"path": "blob.bin"}).result  # type: ignore[union-attr]
    big = box.prepare("read_file", {"path": "big.txt"})
    assert isinstance(big, Done) and "cap" in big.result and "start_line and end_line" in big.result


def test_a_line_range_of_a_file_over_the_cap_is_read(repo):
    # Issue 34: the refusal said to read a range, then refused the range as well.
    (repo / "big.log").write_text("".join(f"entry {n} " + "x" * 60 + "\n" for n in range(1, 6001)))
    assert (repo / "big.log").stat().st_size > MAX_FILE_BYTES
    box = Toolbox(repo)
    part = box.prepare("read_file", {"path": "big.log", "start_line": 5000, "end_line": 5002})
    assert isinstance(part, Done), part
    assert [line.split("\t")[0].strip() for line in part.result.splitlines()] == ["5000", "5001", "5002"]
    assert part.result.splitlines()[0].endswith("entry 5000 " + "x" * 60)
    onward = box.prepare("read_file", {"path": "big.log", "start_line": 10})
    assert isinstance(onward, Done) and onward.result.startswith("   10\tentry 10 ")
    assert len(onward.result) <= MAX_OUTPUT_CHARS + 100 and "read on with start_line=" in onward.result
    past = box.prepare("read_file", {"path": "big.log", "start_line": 7000, "end_line": 7001})
    assert isinstance(past, Done) and "past the end of the file (6000 lines)" in past.result
    edit = box.prepare("edit_file", {"path": "big.log", "old_text": "entry 5000", "new_text": "e"})
    assert isinstance(edit, Done) and "cannot change it" in edit.result


def test_a_range_of_a_large_file_reads_no_further_than_its_bound(repo, monkeypatch):
    import app.agent.files as files

    monkeypatch.setattr(files, "MAX_RANGE_SCAN_BYTES", MAX_FILE_BYTES + 1000)
    (repo / "big.log").write_text("y" * 100 + "\n" + "z" * (2 * MAX_FILE_BYTES) + "\nlast\n")
    box = Toolbox(repo)
    first = box.prepare("read_file", {"path": "big.log", "start_line": 1, "end_line": 2})
    assert isinstance(first, Done) and first.result.startswith("    1\t" + "y" * 100)
    assert len(first.result.splitlines()[1]) < 2100  # a long line is cut, not returned whole
    far = box.prepare("read_file", {"path": "big.log", "start_line": 3, "end_line": 3})
    assert isinstance(far, Done) and "further than read_file reads" in far.result


def test_edit_shows_a_diff_applies_and_undoes(repo):
    box = Toolbox(repo)
    step = box.prepare("edit_file", {"path": "src/calc.py", "old_text": "a - b", "new_text": "a + b"})
    assert isinstance(step, ProposedChange)
    assert "-    return a - b\n+    return a + b" in step.change.diff
    assert (repo / "src/calc.py").read_text().endswith("a - b\n")  # nothing written before consent
    assert box.apply(step.change).startswith("applied")
    assert (repo / "src/calc.py").read_text().endswith("a + b\n")
    assert box.changes.undo().startswith("undone")
    assert (repo / "src/calc.py").read_text().endswith("a - b\n")
    with pytest.raises(ToolRefused, match="nothing to undo"):
        box.changes.undo()


def test_edit_needs_one_exact_match(repo):
    box = Toolbox(repo)
    (repo / "twice.py").write_text("x = 1\nx = 1\n")
    missing = box.prepare("edit_file", {"path": "src/calc.py", "old_text": "a * b", "new_text": "c"})
    assert isinstance(missing, Done) and "not found" in missing.result
    twice = box.prepare("edit_file", {"path": "twice.py", "old_text": "x = 1", "new_text": "y"})
    assert isinstance(twice, Done) and "2 times" in twice.result


def test_edit_refused_when_the_file_changed_since_the_model_read_it(repo):
    box = Toolbox(repo)
    box.prepare("read_file", {"path": "src/calc.py"})
    (repo / "src/calc.py").write_text("def add(a, b):\n    return b - a\n")
    step = box.prepare("edit_file", {"path": "src/calc.py", "old_text": "b - a", "new_text": "a + b"})
    assert isinstance(step, Done) and "changed on disk" in step.result
    box.prepare("read_file", {"path": "src/calc.py"})  # reading again clears it
    assert isinstance(
        box.prepare("edit_file", {"path": "src/calc.py", "old_text": "b - a", "new_text": "a"}), ProposedChange
    )


def test_change_refused_when_the_file_moved_while_waiting_for_consent(repo):
    box = Toolbox(repo)
    step = box.prepare("edit_file", {"path": "src/calc.py", "old_text": "a - b", "new_text": "a + b"})
    assert isinstance(step, ProposedChange)
    (repo / "src/calc.py").write_text("changed by the user\n")
    assert "changed on disk" in box.apply(step.change)
    assert (repo / "src/calc.py").read_text() == "changed by the user\n"


def test_write_new_file_and_undo_removes_it(repo):
    box = Toolbox(repo)
    step = box.prepare("write_file", {"path": "docs/new.md", "content": "hello\n"})
    assert isinstance(step, ProposedChange) and step.change.summary == "create docs/new.md (+1 -0)"
    box.apply(step.change)
    assert (repo / "docs/new.md").read_text() == "hello\n"
    box.changes.undo()
    assert not (repo / "docs/new.md").exists()


def test_bad_arguments_and_unknown_tools_get_a_message(repo):
    box = Toolbox(repo)
    assert "not valid JSON" in box.prepare("read_file", "{oops").result  # type: ignore[union-attr]
    assert "missing" in box.prepare("read_file", {}).result  # type: ignore[union-attr]
    assert "no tool" in box.prepare("rm_rf", {}).result  # type: ignore[union-attr]
    step = box.prepare("run_command", {"command": "ls", "timeout_s": "5"})
    assert step == ProposedCommand("ls", 5.0)


def test_command_runs_in_the_project_streams_and_has_no_stdin(repo):
    lines: list[str] = []
    result = run_command(repo, "pwd; cat; echo done", on_output=lines.append)
    assert result.exit_code == 0
    assert "".join(lines) == f"{repo.resolve()}\ndone\n"  # streamed in chunks as they come
    assert "exit code 0" in result.for_model()


def test_command_timeout_and_stop(repo):
    timed = run_command(repo, "echo start; sleep 30", timeout_s=1)
    assert timed.timed_out and timed.exit_code is None and "start" in timed.output
    stop = threading.Event()
    lines: list[str] = []

    def on_output(line: str) -> None:
        lines.append(line)
        stop.set()  # the user presses Esc once output shows

    stopped = run_command(repo, "echo go; sleep 30", on_output=on_output, stop=stop)
    assert stopped.stopped and "user stopped" in stopped.for_model()


def test_command_output_is_capped(repo):
    result = run_command(repo, "yes line | head -n 20000")
    assert len(result.output) < 17_000 and "cut" in result.output


def test_consent_rules():
    consent = Consent()
    # Which tools wait at all is the tool record's to say; Consent says whether this call still asks.
    assert "read_file" not in NEEDS_CONSENT and {"edit_file", "run_command"} <= NEEDS_CONSENT
    assert consent.must_ask("edit_file") and consent.must_ask("run_command", "git status")
    consent.remember("edit_file", "yes")
    assert consent.must_ask("edit_file")
    consent.remember("edit_file", "always")
    assert not consent.must_ask("edit_file") and consent.must_ask("write_file")
    consent.remember("run_command", "always", "git status")
    assert not consent.must_ask("run_command", "git status")
    assert consent.must_ask("run_command", "git diff")  # "always" covers the command seen, not `git`
    assert consent.must_ask("run_command", "git status; rm -rf ~")  # compound: always asks
    assert consent.must_ask("run_command", "make test")
    assert command_words("CI=1 pytest -q") is None  # an environment prefix: never covered
    assert command_words("ls | wc") is None
    assert command_words("pytest  -q") == ("pytest", "-q")
