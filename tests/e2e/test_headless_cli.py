"""`dspine chat -p` from a script (issue 49): the real CLI in a subprocess with standard
input closed, on a generated model in process."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_dspine_chat_p_from_a_script(dspine, models):
    """The real CLI with standard input closed, on a generated model in process: JSON a script
    can read, the chat saved so --continue goes on with it, and bad input exit 2."""
    target = str(models["dense"]["target"])
    base = ("chat", "--model", target, "--engine", "inproc", "--no-tools", "--ctx", "1024")
    done = dspine(*base, "-p", "def add(a, b):", "--output-format", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["exit_code"] == 0 and isinstance(result["result"], str) and result["usage"]["generated_tokens"] > 0
    again = dspine(*base, "--continue", "-p", "and subtract?", "--output-format", "stream-json")
    assert again.returncode == 0, again.stderr
    last = json.loads(again.stdout.splitlines()[-1])
    assert last["type"] == "result" and last["session_id"] == result["session_id"]
    empty = dspine(*base, "-p", "-")  # standard input is closed: nothing to send
    assert empty.returncode == 2 and "empty prompt" in empty.stderr
    rule = dspine(*base, "-p", "hi", "--allow", "run_command:echo hi; rm -rf ~")
    assert rule.returncode == 2 and "word for word" in rule.stderr


@pytest.mark.slow
def test_headless_runs_the_users_hooks_and_a_projects_only_once_trusted_in_the_chat(env, tmp_path):
    """Headless never asks and never assumes: a project's hook runs only where the user already
    said yes to the project's files as they are (here, as the chat would record it)."""
    import subprocess
    import sys

    from app.agent.hooks import Hooks, load
    from app.agent.mcp.setup import for_project
    from tests.conftest import dspine_cmd

    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    ran_project, ran_user = tmp_path / "project-hook-ran", tmp_path / "user-hook-ran"

    def touching(marker):
        return [{"hooks": [{"type": "command", "command": f"{sys.executable} -c \"open({str(marker)!r}, 'w')\""}]}]

    (project / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"UserPromptSubmit": touching(ran_project)}})
    )
    hooks_env = {**env, "DSPINE_HOOKS": json.dumps({"UserPromptSubmit": touching(ran_user)})}
    from tests.support.gguf_models import chat_model, write_model

    target = str(write_model(tmp_path / "chat.gguf", chat_model(n_layer=1, n_embd=64)))
    args = dspine_cmd("chat", "--model", target, "--engine", "inproc", "--ctx", "2048", "-p", "hi")

    def headless():
        return subprocess.run(args, env=hooks_env, cwd=project, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)  # fmt: skip

    first = headless()
    assert first.returncode in (0, 13), first.stderr[-2000:]
    assert ran_user.exists() and not ran_project.exists()

    trust_file = tmp_path / "data" / "dspine" / "project-trust.json"
    hooks = Hooks(load(project, []), project, "s")
    _, trust = for_project(project, {}, tmp_path / "switches.json", trust_file, hooks)
    assert trust is not None
    trust.answer(True)  # what the chat records when the user says yes
    second = headless()
    assert second.returncode in (0, 13), second.stderr[-2000:]
    assert ran_project.exists()


@pytest.mark.slow
def test_dspine_chat_p_on_the_real_smollm2_in_each_output_format(dspine, real, tmp_path):
    """Issue 49's "on the real SmolLM2": real language through each output format, plan mode
    on a project, standard input closed (the dspine fixture's subprocess has none)."""
    base = ("chat", "--model", str(real["target"]), "--engine", "inproc", "--think", "off", "--mode", "plan")
    prompt = "Say hello in one short sentence."
    text = dspine(*base, "-p", prompt, timeout=300)
    assert text.returncode == 0, text.stderr[-2000:]
    assert text.stdout.strip() and "Traceback" not in text.stderr
    # SmolLM2's template leaves the tool list out: said once, as the chat's screen says it (asked
    # about a file, a new user got a made-up answer and no word of why).
    assert text.stderr.count("cannot read, search, edit or run anything") == 1, text.stderr[-2000:]
    as_json = json.loads(dspine(*base, "-p", prompt, "--output-format", "json", timeout=300).stdout)
    assert as_json["exit_code"] == 0 and as_json["result"].strip()
    assert as_json["usage"]["generated_tokens"] > 0 and as_json["speed"]["tokens_per_s"] > 0
    streamed = dspine(*base, "-p", prompt, "--output-format", "stream-json", timeout=300)
    events = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert [e["type"] for e in events if e["type"] == "text"] and events[-1]["type"] == "result"
    notices = [e for e in events if e["type"] == "notice" and "tool list out" in e["text"]]
    assert len(notices) == 1 and notices[0]["severity"] == "warning"
    assert "".join(e["text"] for e in events if e["type"] == "text" and e["kind"] == "answer").strip() == (
        events[-1]["result"].strip()
    )


def test_the_chat_without_a_terminal_or_with_headless_options_and_no_p_says_what_to_do(dspine, models):
    """Without -p and without a terminal the chat drew its screen into the output file and never
    returned; --output-format, --allow and --deny without -p were dropped without a word."""
    target = str(models["dense"]["target"])
    no_terminal = dspine("chat", "--model", target, timeout=60)
    assert no_terminal.returncode == 2 and "the chat needs a terminal" in no_terminal.stderr
    assert 'dspine chat -p "PROMPT"' in no_terminal.stderr and not no_terminal.stdout
    for extra in (("--output-format", "json"), ("--allow", "edit_file"), ("--deny", "run_command")):
        refused = dspine("chat", "--model", target, *extra)
        assert refused.returncode == 2 and f"{extra[0]} only apply to a headless run (-p)" in refused.stderr


def test_a_refusal_before_the_run_starts_still_ends_in_the_json_result(dspine, models):
    """`chat -p ... --ctx 0 --output-format stream-json` wrote nothing on standard output: a
    script reading the result found none."""
    target = str(models["dense"]["target"])
    for form in ("json", "stream-json"):
        done = dspine("chat", "--model", target, "-p", "hi", "--ctx", "0", "--output-format", form)
        result = json.loads(done.stdout.splitlines()[-1])
        assert done.returncode == 2 == result["exit_code"] and result["is_error"], done.stdout
        assert "--ctx 0" in result["error"]["message"]
    gone = dspine("chat", "--model", target, "-p", "hi", "--resume", "999", "--output-format", "json")
    assert gone.returncode == 2 and "no saved chat 999" in json.loads(gone.stdout)["error"]["message"]
