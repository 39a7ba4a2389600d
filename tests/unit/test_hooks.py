"""Hooks (issue 49), in Claude Code's format: a PreToolUse hook blocks an edit and the model
sees why, or lets a call through without the question; a PostToolUse hook runs a formatter
after an edit and its words reach the model; a hook that hangs is killed at its timeout and
the chat goes on; SessionStart and UserPromptSubmit add context or keep a prompt back; a
Stop hook sends the model on (twice at most); a project's hooks run only once the project is
trusted, the trust question lists them, and a changed hook asks again."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from app.agent import hooks as hooks_module
from app.agent.hooks import HookConfig, Hooks, load, parse
from app.agent.mcp.setup import for_project
from app.agent.session import Notice, Session, ToolFinished
from app.agent.toolbox import Toolbox
from tests.support.scripted_engine import ScriptedEngine, tool_call
from tests.support.session_recorder import Recorder

PY = sys.executable


def settings_file(folder: Path, block: dict) -> Path:
    path = folder / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"permissions": {"allow": []}, "hooks": block}))
    return path


def script(folder: Path, name: str, body: str) -> str:
    """A hook program written in Python (no shell quoting games), as its command line."""
    path = folder / name
    path.write_text("import json, sys\nevent = json.load(sys.stdin)\n" + body)
    return f"{PY} {path}"


def user_hooks(root: Path, block: dict) -> Hooks:
    hooks, problems = parse({"hooks": block}, "~/.claude/settings.json", project=False)
    assert problems == []
    return Hooks(HookConfig(hooks), root, "s1")


def session_for(root: Path, engine, hooks: Hooks, recorder: Recorder, **kwargs) -> Session:
    return Session(engine, Toolbox(root), recorder.ask, recorder.emit, hooks=hooks, **kwargs)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    return root


def edit_turns(path: str = "a.txt") -> list:
    return [[tool_call("edit_file", path=path, old_text="one", new_text="two")], ["done"]]


def test_a_pretooluse_hook_blocks_an_edit_and_the_model_sees_why(project, tmp_path):
    check = script(
        tmp_path,
        "check.py",
        "sys.stderr.write('edits to ' + event['tool_input']['path'] + ' are frozen')\nsys.exit(2)\n",
    )
    hooks = user_hooks(
        project, {"PreToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": check}]}]}
    )
    engine = ScriptedEngine(turns=edit_turns())
    recorder = Recorder()
    asyncio.run(session_for(project, engine, hooks, recorder).send("change a.txt"))
    (finished,) = recorder.of(ToolFinished)
    assert finished.decision == "blocked by a hook"
    assert "edits to a.txt are frozen" in finished.result
    assert recorder.questions == []  # never asked: the hook said no first
    assert (project / "a.txt").read_text() == "one\n"
    tool_message = engine.calls[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "edits to a.txt are frozen" in tool_message["content"]


def test_a_json_allow_lets_the_call_through_without_the_question(project, tmp_path):
    allow = script(tmp_path, "allow.py", "print(json.dumps({'hookSpecificOutput': {'permissionDecision': 'allow'}}))\n")
    hooks = user_hooks(project, {"PreToolUse": [{"matcher": "edit_file", "hooks": [{"command": allow}]}]})
    recorder = Recorder()
    recorder.answer = "no"  # were it asked, the edit would not happen
    asyncio.run(session_for(project, ScriptedEngine(turns=edit_turns()), hooks, recorder).send("change it"))
    assert recorder.questions == []
    assert recorder.of(ToolFinished)[0].decision == "allowed by a hook"
    assert (project / "a.txt").read_text() == "two\n"


def test_a_posttooluse_hook_formats_after_an_edit_and_its_words_reach_the_model(project, tmp_path):
    fmt = script(
        tmp_path,
        "fmt.py",
        "from pathlib import Path\n"
        "p = Path(event['cwd']) / event['tool_input']['path']\n"
        "p.write_text(p.read_text().upper())\n"
        "assert event['tool_name'] == 'Edit' and event['dspine_tool_name'] == 'edit_file'\n"
        "assert 'tool_response' in event\n"
        "sys.stderr.write('formatted ' + p.name)\nsys.exit(2)\n",
    )
    hooks = user_hooks(project, {"PostToolUse": [{"matcher": "Edit", "hooks": [{"command": fmt}]}]})
    recorder = Recorder()
    asyncio.run(session_for(project, ScriptedEngine(turns=edit_turns()), hooks, recorder).send("change it"))
    assert (project / "a.txt").read_text() == "TWO\n"
    assert "A PostToolUse hook says:\nformatted a.txt" in recorder.of(ToolFinished)[0].result


def test_a_pre_tool_hook_that_hangs_is_killed_at_its_timeout_and_blocks_the_call(project, tmp_path):
    # A guard that did not answer is a guard that did not say yes: the call is blocked, the chat goes on.
    hang = script(tmp_path, "hang.py", "import time\ntime.sleep(60)\n")
    hooks = user_hooks(project, {"PreToolUse": [{"hooks": [{"command": hang, "timeout": 1}]}]})
    recorder = Recorder()
    started = time.monotonic()
    asyncio.run(session_for(project, ScriptedEngine(turns=edit_turns()), hooks, recorder).send("change it"))
    assert time.monotonic() - started < 20
    warnings = [n.text for n in recorder.of(Notice) if n.severity == "warning"]
    assert any("did not finish: stopped after its 1 s timeout" in w for w in warnings), warnings
    assert (project / "a.txt").read_text() == "one\n"
    assert "onFailure" in recorder.of(ToolFinished)[0].result


def test_a_hook_that_fails_with_on_failure_allow_lets_the_call_go(project, tmp_path):
    hang = script(tmp_path, "hang.py", "import time\ntime.sleep(60)\n")
    hooks = user_hooks(project, {"PreToolUse": [{"hooks": [{"command": hang, "timeout": 1, "onFailure": "allow"}]}]})
    recorder = Recorder()
    asyncio.run(session_for(project, ScriptedEngine(turns=edit_turns()), hooks, recorder).send("change it"))
    assert (project / "a.txt").read_text() == "two\n"  # not a block: the edit went on (asked, and yes)


def test_session_start_and_prompt_hooks_add_context_or_keep_a_prompt_back(project, tmp_path):
    start = script(tmp_path, "start.py", "print('branch: main')\n")
    gate = script(
        tmp_path,
        "gate.py",
        "if 'secret' in event['prompt']:\n    sys.stderr.write('no secrets, please')\n    sys.exit(2)\n"
        "print('ticket ABC-1')\n",
    )
    hooks = user_hooks(
        project,
        {"SessionStart": [{"hooks": [{"command": start}]}], "UserPromptSubmit": [{"hooks": [{"command": gate}]}]},
    )
    engine = ScriptedEngine(turns=[["ok"]])
    recorder = Recorder()
    session = session_for(project, engine, hooks, recorder)

    async def go():
        await session.send("here is my secret")
        await session.send("fix the bug")

    asyncio.run(go())
    errors = [n.text for n in recorder.of(Notice) if n.severity == "error"]
    assert errors and "kept this prompt from the model: no secrets, please" in errors[0]
    assert len(engine.calls) == 1  # the first prompt never went out
    sent = engine.calls[0]["messages"][-1]["content"]
    assert sent.startswith("fix the bug") and "branch: main" in sent and "ticket ABC-1" in sent


def test_a_stop_hook_sends_the_model_on_twice_at_most(project, tmp_path):
    more = script(tmp_path, "more.py", "sys.stderr.write('run the tests first')\nsys.exit(2)\n")
    hooks = user_hooks(project, {"Stop": [{"hooks": [{"command": more}]}]})
    engine = ScriptedEngine(turns=[["done"]])
    recorder = Recorder()
    asyncio.run(session_for(project, engine, hooks, recorder).send("go"))
    assert len(engine.calls) == 3
    assert "A Stop hook asks you to go on:\n- run the tests first" in engine.calls[1]["messages"][-1]["content"]


def test_bad_entries_are_notices_and_the_good_ones_load(tmp_path):
    path = settings_file(
        tmp_path,
        {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}, {"type": "prompt"}]}],
            "Nonsense": [],
            "PostToolUse": "not a list",
        },
    )
    config = load(None, [path])
    assert [h.command for h in config.hooks] == ["true"]
    assert len(config.problems) == 3
    (tmp_path / "broken.json").write_text("{")
    assert "not valid JSON" in load(None, [tmp_path / "broken.json"]).problems[0]


def test_matchers_know_claude_codes_tool_names(project):
    hooks = user_hooks(project, {"PreToolUse": [{"matcher": "Bash", "hooks": [{"command": "true"}]}]})
    assert hooks.for_event("PreToolUse", "run_command") and not hooks.for_event("PreToolUse", "edit_file")
    every = user_hooks(project, {"PostToolUse": [{"matcher": "*", "hooks": [{"command": "true"}]}]})
    assert every.for_event("PostToolUse", "mcp__srv__tool")


# -- a project's own hooks wait for trust ------------------------------------------------------


def project_hook(project: Path, tmp_path: Path, body: str = "sys.exit(2)\n") -> Path:
    tools = project / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "guard.py").write_text("import sys\n" + body)
    return settings_file(project, {"PreToolUse": [{"matcher": "Edit", "hooks": [{"command": f"{PY} tools/guard.py"}]}]})


def test_a_projects_hook_runs_only_once_trusted_and_the_question_lists_it(project, tmp_path):
    project_hook(project, tmp_path)
    hooks = Hooks(load(project, []), project, "s1")
    trust_file = tmp_path / "trust.json"
    _, trust = for_project(project, {}, tmp_path / "switches.json", trust_file, hooks)
    assert trust is not None and trust.decision() is None
    assert hooks.for_event("PreToolUse", "edit_file") == []  # not before trust
    asked = trust.question()
    assert "would run these hooks" in asked.title
    assert f"runs {PY} tools/guard.py" in asked.body and "project's tools/guard.py" in asked.body
    recorder = Recorder()
    asyncio.run(session_for(project, ScriptedEngine(turns=edit_turns()), hooks, recorder).send("x"))
    assert (project / "a.txt").read_text() == "two\n"  # the untrusted block did not run

    trust.answer(True)
    assert hooks.for_event("PreToolUse", "edit_file")
    again = Hooks(load(project, []), project, "s2")
    _, remembered = for_project(project, {}, tmp_path / "switches.json", trust_file, again)
    assert remembered is not None and remembered.decision() is True and again.project_trusted

    # The script the hook runs changed (the model could have written it): asked again.
    (project / "tools" / "guard.py").write_text("import sys\nsys.exit(0)\n")
    changed = Hooks(load(project, []), project, "s3")
    _, asked_again = for_project(project, {}, tmp_path / "switches.json", trust_file, changed)
    assert asked_again is not None and asked_again.decision() is None and not changed.project_trusted


def test_a_project_without_hooks_keeps_its_remembered_answer(project, tmp_path):
    """Reading hooks leaves the fingerprint of a project that has none as it was."""
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"s": {"command": "srv"}}}))
    trust_file = tmp_path / "trust.json"
    _, before = for_project(project, {}, tmp_path / "sw.json", trust_file)
    assert before is not None
    before.answer(True)
    _, after = for_project(project, {}, tmp_path / "sw.json", trust_file, Hooks(load(project, []), project, "s"))
    assert after is not None and after.decision() is True


def test_a_trusted_hooks_script_that_changes_does_not_run_and_claude_project_dir_is_followed(project, tmp_path):
    """From review: Claude Code's own form names the script through $CLAUDE_PROJECT_DIR; the
    script is part of what the user trusted, and a change to it (the model's edit, a pull)
    keeps it from running, in the same chat and in the next."""
    marker = tmp_path / "ran"
    script_path = project / ".claude" / "hooks" / "guard.py"
    script_path.parent.mkdir(parents=True)
    script_path.write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    command = f'{PY} "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.py'
    settings_file(project, {"PreToolUse": [{"hooks": [{"command": command}]}]})
    hooks = Hooks(load(project, []), project, "s1")
    _, trust = for_project(project, {}, tmp_path / "sw.json", tmp_path / "trust.json", hooks)
    assert trust is not None
    assert "runs or reads the project's .claude/hooks/guard.py" in trust.question().body
    trust.answer(True)
    recorder = Recorder()
    read = [tool_call("read_file", path="a.txt")]
    session = session_for(project, ScriptedEngine(turns=[read, ["done"], read, ["done"]]), hooks, recorder)

    async def go() -> None:
        await session.send("read")
        assert marker.read_text() == "x"
        script_path.write_text(f"open({str(marker)!r}, 'a').write('CHANGED')\n")
        await session.send("read again")

    asyncio.run(go())
    assert marker.read_text() == "x"  # the changed script did not run
    assert len(recorder.of(ToolFinished)) == 2
    warnings = [n.text for n in recorder.of(Notice) if n.severity == "warning"]
    assert any("its files changed since you trusted the project" in w for w in warnings), warnings
    again = Hooks(load(project, []), project, "s2")
    _, next_chat = for_project(project, {}, tmp_path / "sw.json", tmp_path / "trust.json", again)
    assert next_chat is not None and next_chat.decision() is None  # asked again


def test_a_hook_that_prints_without_end_keeps_only_the_head(project, tmp_path):
    flood = script(tmp_path, "flood.py", "sys.stdout.write('y' * 5_000_000)\n")
    hooks = user_hooks(project, {"Stop": [{"hooks": [{"command": flood}]}]})
    (done,) = hooks.fire("Stop", {})
    assert done.exit_code == 0 and len(done.stdout) == hooks_module.MAX_OUTPUT


def test_a_hook_command_with_a_nul_is_refused_not_a_crash(project):
    hooks, problems = parse({"hooks": {"Stop": [{"hooks": [{"command": "echo a\0b"}]}]}}, "x", project=False)
    assert hooks == [] and problems


def test_a_hooks_allow_never_overrides_the_users_deny_rules(project, tmp_path):
    allow = script(tmp_path, "allow.py", "print(json.dumps({'decision': 'approve'}))\n")
    hooks = user_hooks(project, {"PreToolUse": [{"hooks": [{"command": allow}]}]})
    recorder = Recorder()
    recorder.answer = "no"
    session = Session(
        ScriptedEngine(turns=edit_turns()), Toolbox(project), recorder.ask, recorder.emit, hooks=hooks,
        vetoed=lambda tool, command: tool == "edit_file",
    )  # fmt: skip
    asyncio.run(session.send("change it"))
    assert recorder.questions and recorder.of(ToolFinished)[0].decision == "no"
    assert (project / "a.txt").read_text() == "one\n"


def test_session_start_says_why_it_runs_startup_resume_clear_and_compact(project, tmp_path):
    """As Claude Code names it: a fresh chat, a saved one going on, /new, after a compaction."""
    log = tmp_path / "sources.txt"
    start = script(tmp_path, "start.py", f"open({str(log)!r}, 'a').write(event['source'] + '\\n')\n")
    hooks = user_hooks(project, {"SessionStart": [{"hooks": [{"command": start}]}]})
    recorder = Recorder()
    fresh = session_for(project, ScriptedEngine(turns=[["ok"]]), hooks, recorder)
    saved = session_for(project, ScriptedEngine(turns=[["ok"]]), hooks, recorder)
    saved.restore([{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "yes"}])

    async def go():
        await fresh.send("one")
        await fresh.send("two")  # the same chat: no second SessionStart
        await saved.send("go on")
        fresh.restore([], start_source="clear")
        await fresh.send("new chat")
        turns = [
            {"role": r, "content": f"{r} turn {i} " + "words " * 200} for i in range(6) for r in ("user", "assistant")
        ]
        fresh.restore(turns)  # a long chat, the same one: nothing to run again
        assert (await fresh.compact()).gained
        await fresh.send("after the summary")

    asyncio.run(go())
    assert log.read_text().split() == ["startup", "resume", "clear", "compact"]


def test_what_a_hook_prints_is_shown_to_the_user_as_one_line(project, tmp_path):
    """Issue 49: "the output of a hook is shown in the chat". A formatter's "1 file reformatted"
    went nowhere; it is a notice now (the TUI's toast, headless stderr or stream-json's notice).
    A JSON answer's systemMessage is Claude Code's field for the user; a failing hook says so."""
    printing = script(tmp_path, "fmt.py", "print('1 file reformatted [@click=app.quit]')\nprint('second line')\n")
    answering = script(tmp_path, "ans.py", "print(json.dumps({'systemMessage': 'checked by the guard'}))\n")
    hooks = user_hooks(
        project,
        {
            "PostToolUse": [{"matcher": "Edit", "hooks": [{"command": printing}]}],
            "PreToolUse": [{"matcher": "Edit", "hooks": [{"command": answering}]}],
        },
    )
    recorder = Recorder()
    asyncio.run(session_for(project, ScriptedEngine(turns=edit_turns()), hooks, recorder).send("change it"))
    said = [n.text for n in recorder.of(Notice)]
    assert any(
        t.startswith("PostToolUse hook `") and t.endswith(": 1 file reformatted [@click=app.quit]…") for t in said
    )
    assert any(t.startswith("PreToolUse hook `") and t.endswith(": checked by the guard") for t in said)
    assert (project / "a.txt").read_text() == "two\n"  # the edit went through: saying is not blocking
