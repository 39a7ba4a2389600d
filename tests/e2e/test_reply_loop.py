"""A reply that loops is stopped (issue 68): a server that sends a function and then `#` lines
without end, as SmolLM2 did to a new user's first prompt. `dspine run` and `chat -p` stop it
within a bounded number of repeats, hang up on the server, and say why in every form."""

from __future__ import annotations

import json

from backends.reply_guard import LINE_REPEATS
from tests.support.remote_servers import shaped_server

MODEL = ("--model", "Qwen/Qwen3-8B")


def test_run_stops_a_looping_reply_and_says_so(dspine):
    with shaped_server(kind="generic", looping=True) as upstream:
        done = dspine("run", "reverse a linked list", "--url", upstream.url, *MODEL, "--think", "off", timeout=60)
        sent = upstream.looped
    assert done.returncode == 0, done.stderr
    assert "stopped: the reply repeated '#' 20 times in a row (a loop)" in done.stderr
    assert done.stdout.count("#") <= LINE_REPEATS + 1
    assert sent < 10_000  # the server was let go, not read to its end
    with shaped_server(kind="generic", looping=True) as upstream:
        as_json = dspine("run", "hi", "--url", upstream.url, *MODEL, "--think", "off", "--json", timeout=60)
    payload = json.loads(as_json.stdout)
    assert payload["finish_reason"] == "loop" and "a loop" in payload["finish_note"]


def test_headless_stops_a_looping_reply_in_every_output_form(dspine):
    common = ("--url", "URL", *MODEL, "--think", "off", "--no-tools")
    with shaped_server(kind="generic", looping=True) as upstream:
        args = [upstream.url if a == "URL" else a for a in common]
        text = dspine("chat", "-p", "reverse a linked list", *args, timeout=60)
        as_json = dspine("chat", "-p", "hi", *args, "--output-format", "json", timeout=60)
        stream = dspine("chat", "-p", "hi", *args, "--output-format", "stream-json", timeout=60)
    assert text.returncode == 0, text.stderr
    assert "warning: stopped: the reply repeated '#'" in text.stderr and text.stdout.count("#") <= LINE_REPEATS + 1
    result = json.loads(as_json.stdout)
    assert result["stop_reason"] == "loop" and "(a loop)" in result["stop_note"] and result["exit_code"] == 0
    lines = [json.loads(line) for line in stream.stdout.splitlines()]
    assert any(line["type"] == "notice" and "(a loop)" in line["text"] for line in lines)
    assert lines[-1]["type"] == "result" and lines[-1]["stop_reason"] == "loop"
