"""`dspine chat -p` without a screen (issue 49, headless): the agent session on the scripted
engine, every question answered by the mode and the --allow / --deny rules (never by waiting),
the three output formats and the exit codes a script tests."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess

import pytest

from app.agent.headless import EXIT_BAD_INPUT, EXIT_DENIED, EXIT_ENGINE, EXIT_OK, Decider, Rule, RuleError
from app.agent.headless_output import HeadlessOutput
from app.agent.project import open_project, system_prompt
from app.agent.session import Session
from app.agent.toolbox import Toolbox
from backends.events import Error
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return root


EDIT = call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")


def headless(repo, turns, allow=(), deny=(), mode="ask", form="json", engine=None):
    decider = Decider([Rule.parse(r) for r in allow], [Rule.parse(r) for r in deny])
    out, err = io.StringIO(), io.StringIO()
    output = HeadlessOutput(form, out, err, decider)
    engine = engine or ScriptedEngine(turns=turns)
    session = Session(
        engine,
        Toolbox(repo),
        decider.ask,
        output.emit,
        system=system_prompt(open_project(repo), True),
        mode=mode,
    )
    asyncio.run(session.send("fix the bug"))
    code = output.finish(7, "scripted")
    return code, out.getvalue(), err.getvalue(), engine


def test_ask_mode_denies_what_no_rule_allows_and_says_so(repo):
    code, out, _, engine = headless(repo, [[EDIT], ["Could not edit."]])
    result = json.loads(out)
    assert code == EXIT_DENIED == result["exit_code"]
    assert result["denied"] == [{"tool": "edit_file", "command": "", "why": "no --allow rule covers it"}]
    assert result["result"] == "Could not edit." and result["session_id"] == 7
    assert (repo / "calc.py").read_text().endswith("a - b\n")
    assert engine.calls[-1]["messages"][-1]["content"].startswith("the user declined")


def test_an_allow_rule_lets_the_edit_run(repo):
    code, out, _, _ = headless(repo, [[EDIT], ["Fixed."]], allow=["edit_file"])
    result = json.loads(out)
    assert code == EXIT_OK and result["tool_calls"][0]["decision"] == "yes"
    assert (repo / "calc.py").read_text().endswith("a + b\n")
    assert result["usage"]["generated_tokens"] > 0 and result["speed"]["tokens_per_s"]


def test_a_command_rule_covers_that_command_word_for_word_and_deny_wins(repo):
    turns = [[call("run_command", command="echo hi"), call("run_command", "2", command="echo hi > x")], ["Done."]]
    code, out, _, _ = headless(repo, turns, allow=["run_command:echo  'hi'"])
    result = json.loads(out)
    assert [c["decision"] for c in result["tool_calls"]] == ["yes", "no"] and code == EXIT_DENIED
    assert not (repo / "x").exists()
    code, out, _, _ = headless(repo, [[EDIT], ["No."]], allow=["edit_file"], deny=["edit_file"])
    assert code == EXIT_DENIED and json.loads(out)["denied"][0]["why"] == "a --deny rule"


@pytest.mark.parametrize("bad", ["", ":x", "edit_file:x", "run_command:echo hi; rm -rf ~", "run_command:$(id)"])
def test_a_rule_that_cannot_be_read_word_for_word_is_refused(bad):
    with pytest.raises(RuleError):
        Rule.parse(bad)


def test_accept_edits_applies_edits_and_commands_still_need_a_rule(repo):
    turns = [[EDIT, call("run_command", command="echo hi")], ["Done."]]
    code, out, _, _ = headless(repo, turns, mode="accept-edits")
    result = json.loads(out)
    assert [c["decision"] for c in result["tool_calls"]] == ["accept edits", "no"] and code == EXIT_DENIED
    assert (repo / "calc.py").read_text().endswith("a + b\n")


def test_plan_mode_changes_nothing(repo):
    code, out, _, _ = headless(repo, [[EDIT], ["A plan."]], mode="plan", allow=["edit_file"])
    result = json.loads(out)
    assert result["tool_calls"][0]["decision"] == "refused (plan mode)" and code == EXIT_OK
    assert (repo / "calc.py").read_text().endswith("a - b\n")


def test_stream_json_is_a_line_an_event_ending_with_the_result(repo):
    code, out, _, _ = headless(
        repo, [["Reading. ", call("read_file", path="calc.py")], ["It subtracts."]], form="stream-json"
    )
    lines = [json.loads(line) for line in out.splitlines()]
    kinds = [line["type"] for line in lines]
    assert kinds[0] == "text" and "tool_call" in kinds and "tool_result" in kinds and kinds[-1] == "result"
    assert lines[-1]["result"] == "It subtracts." and code == EXIT_OK
    assert "".join(line["text"] for line in lines if line["type"] == "text").endswith("It subtracts.")


def test_text_prints_the_answer_on_stdout_and_tools_on_stderr(repo):
    code, out, err, _ = headless(repo, [[call("read_file", path="calc.py")], ["It subtracts."]], form="text")
    assert out.strip() == "It subtracts." and "read_file" in err and code == EXIT_OK


def test_a_chain_that_never_ends_stops_instead_of_waiting(repo):
    endless = [[call("read_file", path="calc.py")]]
    code, out, _, engine = headless(repo, endless)
    result = json.loads(out)
    assert result["chain_stopped"] and len(engine.calls) == 10  # the chain limit, then no


class Failing(ScriptedEngine):
    def stream(self, messages, think=True, sampling=None, n_max=None, tools=None):
        yield Error("llama-server exited while loading", "see the log")


def test_an_engine_that_fails_is_exit_11_with_its_message(repo):
    code, out, _, _ = headless(repo, [], engine=Failing())
    result = json.loads(out)
    assert code == EXIT_ENGINE and result["is_error"] and "exited while loading" in result["error"]["message"]


def test_a_call_that_asks_to_leave_the_sandbox_is_denied_whatever_the_rules(repo):
    """Review of issue 51: --allow "run_command:pytest -q" also let the model run it outside the
    sandbox, which "always" never covers in the chat."""
    from app.agent.sandbox import find

    if not find().available:
        pytest.skip("no sandbox here: every command runs outside it anyway")
    turns = [[call("run_command", command="echo hi", outside_sandbox=True)], ["Done."]]
    code, out, _, _ = headless(repo, turns, allow=["run_command:echo hi"])
    result = json.loads(out)
    assert code == EXIT_DENIED and result["denied"][0]["why"] == "it asked to run outside the sandbox"


@pytest.mark.parametrize("form", ["text", "json", "stream-json"])
def test_a_prompt_too_large_for_the_context_is_an_error_with_exit_code_2(repo, form):
    """A prompt the session does not send (too large even after compacting) ended a headless
    run with exit 0 and `is_error: false`: a script took the empty answer for success."""
    decider = Decider()
    out, err = io.StringIO(), io.StringIO()
    output = HeadlessOutput(form, out, err, decider)
    engine = ScriptedEngine(context_size=1024)
    session = Session(engine, Toolbox(repo), decider.ask, output.emit, system=system_prompt(open_project(repo), True))
    asyncio.run(session.send("x " * 6000))
    code = output.finish(None, "scripted")
    assert code == EXIT_BAD_INPUT and not engine.calls
    if form == "text":
        said = err.getvalue()
        assert said.count("Nothing was sent") == 1 and "fix: run again with a larger --ctx" in said
    else:
        result = json.loads(out.getvalue().splitlines()[-1] if form == "stream-json" else out.getvalue())
        assert result["is_error"] and result["exit_code"] == EXIT_BAD_INPUT
        assert "Nothing was sent" in result["error"]["message"] and "--ctx" in result["error"]["fix"]


def test_a_tool_call_too_large_for_the_context_blames_the_model_not_the_prompt(repo):
    """The model wrote a file larger than the context: the run ended with exit 2 (bad input)
    blaming "the newest message (42 characters)", the tool's short result."""
    huge = call("write_file", path="big.txt", content="word " * 3000)
    decider = Decider([Rule.parse("write_file")])
    out, err = io.StringIO(), io.StringIO()
    output = HeadlessOutput("json", out, err, decider)
    engine = ScriptedEngine(turns=[[huge], ["summary"], ["summary"], ["done"]], context_size=2048)
    session = Session(engine, Toolbox(repo), decider.ask, output.emit, system=system_prompt(open_project(repo), True))
    asyncio.run(session.send("write it"))
    code = output.finish(None, "scripted")
    result = json.loads(out.getvalue())
    assert code == EXIT_ENGINE == result["exit_code"]
    message = result["error"]["message"]
    assert "the model's reply, with its tool calls," in message and "15,0" in message, message
    assert "smaller steps" in result["error"]["fix"]
