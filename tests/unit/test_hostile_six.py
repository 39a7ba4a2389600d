"""The sixth hostile trial (issue 66): nothing the model writes runs later outside the sandbox.

Each case is the trial's own: a file the model writes (a write tool with a consent that looked
harmless, accept-edits, or a sandboxed command) that something outside the sandbox runs later
with no question. The sandbox cases run real bubblewrap (.ci/run installs it)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.agent import child_env
from app.agent.commands import run_command
from app.agent.guarded import Guard, unsafe_root
from app.agent.headless import Decider, Rule
from app.agent.headless_output import HeadlessOutput
from app.agent.hooks import Hook, HookConfig, Hooks, claude_input, load, run
from app.agent.mcp.setup import for_project
from app.agent.project import find_root, open_project, system_prompt
from app.agent.sandbox import Sandbox, find
from app.agent.session import Question, Session
from app.agent.toolbox import Toolbox
from app.agent.trust import hook_files_digest
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call
from tests.support.session_recorder import Recorder

BOX = find()
needs_sandbox = pytest.mark.skipif(
    not BOX.available and not os.environ.get("CI"), reason=f"no sandbox here: {BOX.problem}"
)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def guard_hook(repo: Path, marker: Path) -> Hook:
    """A trusted PreToolUse hook `python3 .claude/hooks/guard.py` that imports json, as guards do."""
    hooks = repo / ".claude" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "guard.py").write_text("import json, sys\njson.load(sys.stdin)\nprint('guard ok')\n")
    command = f"{sys.executable} .claude/hooks/guard.py"
    entry = {"hooks": [{"type": "command", "command": command}]}
    (repo / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [entry]}}))
    (hooks / "post.sh").write_text(". .claude/hooks/lib.sh\necho post\n")
    (hooks / "lib.sh").write_text("true\n")
    return load(repo, []).project_hooks[0]


def session_in(repo: Path, recorder: Recorder, box: Sandbox | None = None, mode: str = "ask") -> Session:
    toolbox = Toolbox(repo, sandbox=box or BOX)
    return Session(
        ScriptedEngine(),
        toolbox,
        recorder.ask,
        recorder.emit,
        system=system_prompt(open_project(repo), True),
        mode=mode,  # type: ignore[arg-type]
    )


# -- 1. a trusted hook runs only what the user trusted -----------------------------------------


def test_a_file_planted_beside_a_trusted_hook_is_never_imported_and_changes_its_pin(repo, tmp_path):
    marker = tmp_path / "planted-ran"
    hook = guard_hook(repo, marker)
    before = hook_files_digest(repo, hook)
    # The model's json.py beside the hook (Python puts a script's folder first on sys.path).
    (repo / ".claude" / "hooks" / "json.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\ndef load(f): return {{}}\n"
    )
    assert hook_files_digest(repo, hook) != before  # the pin covers the hook's folder: it asks again
    ran = run(hook, {"hook_event_name": "PreToolUse"}, repo)
    assert ran.exit_code == 0 and "guard ok" in ran.stdout
    assert not marker.exists()  # and even run, the hook imports the standard library's json


def test_a_file_a_trusted_shell_hook_sources_is_pinned_too(repo, tmp_path):
    guard_hook(repo, tmp_path / "m")
    post = Hook("PostToolUse", "", "sh .claude/hooks/post.sh", 10, ".claude/settings.json", True)
    before = hook_files_digest(repo, post)
    (repo / ".claude" / "hooks" / "lib.sh").write_text("touch /tmp/planted\n")
    assert hook_files_digest(repo, post) != before


def test_a_changed_trusted_guard_blocks_the_call_rather_than_let_it_through(repo, tmp_path):
    hook = guard_hook(repo, tmp_path / "m")
    hooks = Hooks(load(repo, []), repo, "s")
    for_project(repo, {}, tmp_path / "sw.json", tmp_path / "trust.json", hooks)
    hooks.project_trusted = True
    (repo / ".claude" / "hooks" / "json.py").write_text("")
    (runs,) = [hooks.fire("PreToolUse", {"tool_name": "Bash"}, "run_command")]
    assert runs[0].hook.command == hook.command and runs[0].blocks
    assert "changed since you trusted" in runs[0].reason


def test_the_trust_question_says_hooks_run_outside_the_sandbox_and_names_their_folder(repo, tmp_path):
    guard_hook(repo, tmp_path / "m")
    hooks = Hooks(load(repo, []), repo, "s")
    _, trust = for_project(repo, {}, tmp_path / "sw.json", tmp_path / "trust.json", hooks)
    assert trust is not None
    body = trust.question().body
    assert "runs OUTSIDE the sandbox" in body and "project's .claude/hooks (a change" in body


def test_a_pre_tool_use_hook_that_times_out_or_fails_blocks_unless_it_says_allow(repo):
    slow = Hook("PreToolUse", "", "sleep 5", 0.3, "s", False)
    assert run(slow, {}, repo).blocks
    crashed = Hook("PreToolUse", "", "exit 1", 5, "s", False)
    assert run(crashed, {}, repo).blocks and "onFailure" in run(crashed, {}, repo).reason
    lenient = Hook("PreToolUse", "", "exit 1", 5, "s", False, on_failure="allow")
    assert not run(lenient, {}, repo).blocks
    after = Hook("PostToolUse", "", "exit 1", 5, "s", False)
    assert not run(after, {}, repo).blocks  # only a guard fails closed by default


def test_hooks_see_claude_codes_field_names():
    given = claude_input("edit_file", {"path": ".env", "old_text": "a", "new_text": "b"})
    assert given["file_path"] == ".env" and given["old_string"] == "a" and given["new_string"] == "b"
    assert given["path"] == ".env"  # dspine's own stay
    assert claude_input("write_file", {"path": "x", "content": "y"})["file_path"] == "x"


def test_claude_codes_env_guard_blocks_a_write_to_dot_env(repo):
    """The common guard reads tool_input.file_path: with dspine's `path` only, it allowed."""
    script = repo / "envguard.py"
    script.write_text(
        "import json, sys\nd = json.load(sys.stdin)\n"
        "p = d['tool_input'].get('file_path', '')\nsys.exit(2 if p.endswith('.env') else 0)\n"
    )
    recorder = Recorder()
    session = session_in(repo, recorder)
    hook = Hook("PreToolUse", "Write|Edit", f"{sys.executable} envguard.py", 10, "user", False)
    session.hooks = Hooks(HookConfig([hook]), repo, "s")
    asyncio.run(session._run_tool(call("write_file", path=".env", content="SECRET=1\n")))
    assert not (repo / ".env").exists() and recorder.finished()[0].decision == "blocked by a hook"


# -- the write tools: the places that run code later always ask ---------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".claude/hooks/json.py",
        ".claude/settings.local.json",
        ".mcp.json",
        "sub/.claude/settings.json",
        ".vscode/tasks.json",
    ],
)
def test_accept_edits_still_asks_for_a_file_that_runs_later(repo, path):
    recorder = Recorder()
    recorder.answer = "no"
    session = session_in(repo, recorder, mode="accept-edits")
    asyncio.run(session._run_tool(call("write_file", path=path, content="x = 1\n")))
    (question,) = recorder.questions
    assert "OUTSIDE the sandbox" in question.title and question.guarded and question.always_label is None
    assert not (repo / path).exists()


def test_always_never_covers_a_file_that_runs_later(repo):
    recorder = Recorder()
    recorder.answer = "always"
    session = session_in(repo, recorder)

    async def go():
        await session._run_tool(call("write_file", path="a.py", content="1\n"))
        await session._run_tool(call("write_file", "2", path="b.py", content="1\n"))  # covered by always
        await session._run_tool(call("write_file", "3", path=".claude/x.py", content="1\n"))
        await session._run_tool(call("write_file", "4", path=".claude/y.py", content="1\n"))

    asyncio.run(go())
    assert len(recorder.questions) == 3  # a.py once, then each guarded write asks
    assert (repo / "b.py").exists() and (repo / ".claude" / "y.py").exists()


def test_headless_never_writes_a_file_that_runs_later_whatever_it_allows(repo):
    decider = Decider([Rule.parse("write_file")])
    q = Question("t", "b", tool="write_file", guarded=".claude is a coding agent's configuration")
    assert asyncio.run(decider.ask(q)) == "no" and "code runs later" in decider.denied[0]["why"]
    assert asyncio.run(decider.ask(Question("t", "b", tool="write_file"))) == "yes"


def test_a_folder_a_project_hook_names_is_guarded(repo, tmp_path):
    (repo / "tools").mkdir()
    (repo / "tools" / "check.py").write_text("print(1)\n")
    (repo / ".claude").mkdir()
    entry = {"hooks": [{"type": "command", "command": "python3 tools/check.py"}]}
    (repo / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"Stop": [entry]}}))
    hooks = Hooks(load(repo, []), repo, "s")
    _, trust = for_project(repo, {}, tmp_path / "sw.json", tmp_path / "trust.json", hooks)
    assert trust is not None
    guard = Guard(repo)
    guard.name(trust.named)
    assert "hook" in guard.why((repo / "tools" / "helpers.py").resolve())
    assert guard.why((repo / "src" / "main.py").resolve()) == ""


# -- 2. the home folder (or /) is never a writable project --------------------------------------


def test_the_home_folder_and_the_root_are_refused_as_writable_projects(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "code" / "proj").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(home)], check=True)  # a dotfiles repository
    monkeypatch.setenv("HOME", str(home))
    assert unsafe_root(home) and unsafe_root(Path("/")) and unsafe_root(tmp_path)
    assert not unsafe_root(home / "code" / "proj")
    # A project under a dotfiles ~/.git is its own folder, not the home folder.
    assert find_root(home / "code" / "proj") == (home / "code" / "proj").resolve()
    recorder = Recorder()
    session = session_in(home, recorder)

    async def go():
        for n, (tool, args) in enumerate(
            (
                ("write_file", {"path": ".bashrc", "content": "evil\n"}),
                ("run_command", {"command": "echo evil >> .bashrc"}),
                ("edit_file", {"path": ".claude/settings.json", "old_text": "a", "new_text": "b"}),
            )
        ):
            await session._run_tool(call(tool, str(n), **args))

    asyncio.run(go())
    assert not recorder.questions and not (home / ".bashrc").exists()
    assert all("home folder" in f.result and "Start dspine in the project" in f.result for f in recorder.finished())


# -- 3. every .git in the project is read-only in the sandbox -----------------------------------


@needs_sandbox
def test_nested_symlinked_and_gitdir_repositories_are_read_only_to_commands(repo, tmp_path):
    sub = repo / "sub"
    sub.mkdir()
    subprocess.run(["git", "init", "-q", str(sub)], check=True)
    store = repo / "gitstore"
    subprocess.run(["git", "init", "-q", "--bare", str(store)], check=True)
    (repo / "linked").mkdir()
    (repo / "linked" / ".git").symlink_to(store)
    (repo / "wt").mkdir()
    (repo / "wt" / ".git").write_text("gitdir: ../gitstore\n")
    (repo / ".claude").mkdir()
    toolbox = Toolbox(repo, sandbox=BOX)
    _, _, wrap = toolbox.command_place(toolbox.prepare("run_command", {"command": "true"}))  # type: ignore[arg-type]
    assert wrap is not None
    for target in ("sub/.git/hooks/pre-commit", "gitstore/hooks/pre-commit", ".claude/settings.json"):
        ran = run_command(repo, f"echo evil > {target}; echo done", wrap=wrap)
        assert "done" in ran.output
        assert not (repo / target).exists(), target
    ran = run_command(repo, "git -C sub config core.fsmonitor evil; echo $?", wrap=wrap)
    assert "evil" not in (sub / ".git" / "config").read_text()
    assert run_command(repo, "echo fine > ok.txt", wrap=wrap).exit_code == 0 and (repo / "ok.txt").exists()


def test_a_repository_a_command_makes_is_said(repo):
    toolbox = Toolbox(repo, sandbox=Sandbox("none", problem="none here"))
    toolbox.guard.read_only()
    (repo / "new" / ".git").mkdir(parents=True)
    note = toolbox.after_command()
    assert "new/.git" in note and "hooks" in note
    assert toolbox.after_command() == ""  # said once


# -- 4. no sandbox, no silent run -----------------------------------------------------------


def test_headless_refuses_an_allowed_command_with_no_sandbox_unless_told(repo, capsys):
    import io

    recorder = Recorder()
    decider = Decider([Rule.parse("run_command")])
    session = session_in(repo, recorder, Sandbox("none", problem="bubblewrap (bwrap) is not installed"))
    session.ask = decider.ask
    out, err = io.StringIO(), io.StringIO()
    output = HeadlessOutput("text", out, err, decider)

    async def go():
        await session._run_tool(call("run_command", command="echo hi > f"))
        assert not (repo / "f").exists() and "no sandbox" in decider.denied[0]["why"]
        decider.allow_unsandboxed = True
        session.emit = output.emit
        await session._run_tool(call("run_command", "2", command="echo hi > f"))

    asyncio.run(go())
    assert (repo / "f").exists()
    assert "ran with NO sandbox" in err.getvalue() and "bwrap" in err.getvalue()
    assert output.tool_calls[0]["unsandboxed"].startswith("Runs OUTSIDE any sandbox")
    result = output.result(1, "m")
    assert result["tool_calls"][0]["unsandboxed"] and "not_run" in result


# -- the environment commands and hooks start with ------------------------------------------


def test_commands_and_hooks_get_no_secrets_unless_kept(repo, monkeypatch):
    monkeypatch.setenv("DSPINE_API_KEY", "k-dspine")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "k-aws")
    monkeypatch.setenv("GITHUB_TOKEN", "k-gh")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    child_env.configure([])
    try:
        shown = run_command(repo, "env").output
        assert "visible" in shown and "k-dspine" not in shown and "k-aws" not in shown and "k-gh" not in shown
        said = run(Hook("Stop", "", "env", 10, "s", False), {}, repo).stdout
        assert "k-aws" not in said and "visible" in said and "PYTHONSAFEPATH=1" in said
        child_env.configure(["GITHUB_TOKEN"])
        assert "k-gh" in run_command(repo, "env").output
    finally:
        child_env.configure([])


# -- low: a hook's block is an exit a script sees; a reply cannot reorder what it shows -------


def test_a_call_a_hook_blocked_ends_headless_with_exit_13_and_says_so(repo):
    """It ended 0, as if the run did what was asked."""
    import io

    script = repo / "no.py"
    script.write_text("import sys\nsys.stderr.write('frozen')\nsys.exit(2)\n")
    recorder = Recorder()
    decider = Decider([Rule.parse("write_file")])
    session = session_in(repo, recorder)
    session.ask = decider.ask
    session.hooks = Hooks(HookConfig([Hook("PreToolUse", "", f"{sys.executable} no.py", 10, "user", False)]), repo, "s")
    out, err = io.StringIO(), io.StringIO()
    output = HeadlessOutput("text", out, err, decider)
    session.emit = output.emit
    asyncio.run(session._run_tool(call("write_file", path="a.txt", content="x")))
    assert output.finish(1, "m") == 13
    assert "blocked: write_file" in err.getvalue() and "frozen" in err.getvalue()
    assert output.result(1, "m")["blocked"][0]["tool"] == "write_file"


def test_a_reply_names_its_reordering_characters():
    from app.terminal_text import for_terminal

    shown = for_terminal("if access != \u202e\u2066user\u2069\u2066 admin")
    assert "\u202e" not in shown and "<U+202E>" in shown and "<U+2066>" in shown
    assert for_terminal("emoji \u200d and 日本") == "emoji \u200d and 日本"
