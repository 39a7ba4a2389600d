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
