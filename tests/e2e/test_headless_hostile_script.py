"""The sixth trial's headless cases as a user's script meets them (issue 66: "the headless ones
from a shell script"): a POSIX script runs `dspine chat -p` where bubblewrap fails (a `bwrap`
that cannot start, first on PATH), with a project hook it has not trusted, then with one it
trusted that changed since. The model is a stand-in server through `--engine remote`; the CLI,
the session, the sandbox lookup and the files are real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT
from tests.support.repos import scratch_repo
from tests.support.stand_in import StandIn, choice, stand_in

SCRIPT = """#!/bin/sh
dspine chat -p "make the file" --allow run_command --output-format json > refused.json
echo "refused exit $?"
dspine chat -p "make the file" --allow run_command --allow-unsandboxed --output-format json > ran.json
echo "ran exit $?"
dspine chat -p "make the file" --allow run_command --allow-unsandboxed 2> ran.err
echo "text exit $?"
"""
COMMAND = {"command": "echo made > made.txt"}


def chunks(messages: list[dict]) -> list[dict]:
    if any(m["role"] == "tool" for m in messages):
        return [choice({"content": "Done."}), choice({}, "stop")]
    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "run_command", "arguments": ""}}
    return [
        choice({"tool_calls": [head]}),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(COMMAND)}}]}),
        choice({}, "tool_calls"),
    ]


@pytest.fixture
def model() -> Iterator[StandIn]:
    with stand_in(chunks) as served:
        yield served


def script_env(env: dict[str, str], model: StandIn, bin_dir) -> dict[str, str]:
    bin_dir.mkdir(exist_ok=True)
    launcher = bin_dir / "dspine"  # `dspine` on PATH, as an install puts it there
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m app "$@"\n')
    broken = bin_dir / "bwrap"  # bubblewrap that cannot start (a container without namespaces)
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    for program in (launcher, broken):
        program.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{env.get('PATH', os.environ['PATH'])}"
    return {**env, "PATH": path, "DSPINE_ENGINE": "remote", "DSPINE_REMOTE_URL": model.url}


@pytest.mark.slow
def test_no_sandbox_no_silent_run_from_a_script(env, model, tmp_path):
    repo = scratch_repo(tmp_path, {"fix.sh": SCRIPT}, commit=True)
    done = subprocess.run(
        ["sh", "fix.sh"], cwd=repo, env=script_env(env, model, tmp_path / "bin"), capture_output=True, text=True,
        timeout=240, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    said = done.stdout + done.stderr
    refused = json.loads((repo / "refused.json").read_text())
    assert "refused exit 13" in said and refused["exit_code"] == 13, said
    assert "no sandbox" in refused["denied"][0]["why"] and "--allow-unsandboxed" in refused["denied"][0]["why"]
    ran = json.loads((repo / "ran.json").read_text())
    assert "ran exit 0" in said and ran["exit_code"] == 0, said
    assert "bubblewrap cannot run here" in ran["tool_calls"][0]["unsandboxed"]
    assert (repo / "made.txt").read_text() == "made\n"
    assert "text exit 0" in said and "ran with NO sandbox" in (repo / "ran.err").read_text()


@pytest.mark.slow
def test_a_projects_hooks_not_run_are_said_and_a_changed_guard_stops_the_run(env, model, tmp_path):
    guard = {"hooks": [{"type": "command", "command": f"{sys.executable} guard.py"}]}
    repo = scratch_repo(
        tmp_path,
        {
            "guard.py": "import sys\nsys.exit(0)\n",
            ".claude/settings.json": json.dumps({"hooks": {"PreToolUse": [guard]}}),
        },
        commit=True,
    )
    run_env = script_env(env, model, tmp_path / "bin")

    def headless(form: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["sh", "-c", f'dspine chat -p "hi" --mode plan --output-format {form}'], cwd=repo, env=run_env,
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    untrusted = headless("json")
    result = json.loads(untrusted.stdout)
    assert result["not_run"] and "PreToolUse hook" in result["not_run"][0], result
    assert "not used: the project's" in headless("text").stderr
    streamed = [json.loads(line) for line in headless("stream-json").stdout.splitlines()]
    assert any(e["type"] == "notice" and "not used" in e["text"] for e in streamed)

    from app.agent.hooks import Hooks, load
    from app.agent.mcp.setup import for_project

    hooks = Hooks(load(repo, []), repo, "s")
    trust_file = tmp_path / "data" / "dspine" / "project-trust.json"
    _, trust = for_project(repo, {}, tmp_path / "switches.json", trust_file, hooks)
    assert trust is not None
    trust.answer(True)  # what the chat records on yes
    (repo / "guard.py").write_text("import sys\nsys.exit(0)  # changed by the model\n")
    changed = headless("json")
    assert changed.returncode == 13, changed.stdout + changed.stderr
    assert "changed since you trusted" in json.loads(changed.stdout)["error"]["message"]
