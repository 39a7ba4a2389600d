"""Headless as a new user writes it (issue 49: "headless from a shell script, on a scratch
repository"): a POSIX shell script in the repository runs `dspine chat -p` in accept-edits mode
with JSON out, reads the exit code, and a second run's denied command turns into exit 13 that the
script reports. The model is a stand-in server through `--engine remote`; the CLI, the session,
the tools and the files are real."""

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

EDIT = {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}
SCRIPT = """#!/bin/sh
# fix.sh: let dspine fix the bug, then say what happened.
dspine chat -p "Fix the bug in calc.py" --mode accept-edits --output-format json > fix.json
code=$?
echo "fix exit $code"
dspine chat -p "Run the tests" --output-format json > tests.json
echo "tests exit $?"
exit $code
"""


def call(name: str, arguments: dict) -> list[dict]:
    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": ""}}
    return [
        choice({"tool_calls": [head]}),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(arguments)}}]}),
        choice({}, "tool_calls"),
    ]


def chunks(messages: list[dict]) -> list[dict]:
    asked = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if any(m["role"] == "tool" for m in messages):
        return [choice({"content": "Done."}), choice({}, "stop")]
    if "tests" in asked:
        return call("run_command", {"command": "python3 -m pytest -q"})
    return [choice({"content": "Fixing."}), *call("edit_file", EDIT)]


@pytest.fixture
def model() -> Iterator[StandIn]:
    with stand_in(chunks) as served:
        yield served


@pytest.mark.slow
def test_a_shell_script_runs_dspine_headless_on_a_scratch_repository(env, model, tmp_path):
    repo = scratch_repo(tmp_path, {"calc.py": "def add(a, b):\n    return a - b\n", "fix.sh": SCRIPT}, commit=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "dspine"  # `dspine` on PATH, as an install puts it there
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m app "$@"\n')
    launcher.chmod(0o755)
    script_env = {
        **env,
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', os.environ['PATH'])}",
        "DSPINE_ENGINE": "remote",
        "DSPINE_REMOTE_URL": model.url,
    }
    done = subprocess.run(
        ["sh", "fix.sh"], cwd=repo, env=script_env, capture_output=True, text=True, timeout=180,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fix exit 0" in done.stdout and "tests exit 13" in done.stdout, done.stdout + done.stderr
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    fixed = json.loads((repo / "fix.json").read_text())
    assert fixed["exit_code"] == 0 and [c["decision"] for c in fixed["tool_calls"]] == ["accept edits"]
    denied = json.loads((repo / "tests.json").read_text())
    assert denied["exit_code"] == 13 and denied["denied"]  # a command asks, and headless cannot ask
    changed = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert " M calc.py" in changed


@pytest.mark.slow
def test_rules_in_the_settings_decide_as_the_command_lines_do(dspine, env, model, tmp_path):
    """Issue 49: what would ask is decided "by allow / deny rules given on the command line or in
    settings". A command allowed in the settings runs; a deny in the settings beats an --allow; a
    bad rule is a config error that names the setting."""
    repo = scratch_repo(tmp_path, {"calc.py": "x = 1\n"}, commit=True)
    base = ("chat", "-p", "Run the tests", "--output-format", "json")
    remote = {"DSPINE_ENGINE": "remote", "DSPINE_REMOTE_URL": model.url}

    def run(*extra: str, **settings: str):
        return subprocess.run(
            [sys.executable, "-m", "app", *base, *extra], cwd=repo, capture_output=True, text=True, timeout=180,
            env={**env, "PYTHONPATH": str(ROOT), **remote, **settings}, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    allowed = run(DSPINE_HEADLESS_ALLOW='["run_command:python3 -m pytest -q"]')
    assert allowed.returncode == 0, allowed.stderr
    assert [c["decision"] for c in json.loads(allowed.stdout)["tool_calls"]] != ["denied"]
    denied = run("--allow", "run_command:python3 -m pytest -q", DSPINE_HEADLESS_DENY='["run_command"]')
    assert denied.returncode == 13 and json.loads(denied.stdout)["denied"], denied.stderr
    bad = run(DSPINE_HEADLESS_ALLOW='["run_command:rm -rf ~; echo"]')
    assert bad.returncode != 0 and "headless_allow" in bad.stderr and "Traceback" not in bad.stderr
