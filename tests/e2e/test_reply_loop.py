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
    assert f"stopped: the reply repeated '#' {LINE_REPEATS} times in a row (a loop)" in done.stderr
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


def test_serve_ends_a_looping_reply_with_an_error_its_client_reads(env):
    """`dspine serve` in front of a server whose reply loops: the client's stream ends with an
    error event naming the loop, and the upstream stream is closed (its generation stops)."""
    import httpx2

    from tests.conftest import wait_for
    from tests.support.serve_harness import ServeProcess

    with shaped_server(kind="generic", looping=True) as upstream:
        served = ServeProcess(env, "--url", upstream.url)
        try:
            body = {"messages": [{"role": "user", "content": "reverse a linked list"}], "stream": True}
            events = []
            with httpx2.stream("POST", served.url + "/chat/completions", json=body, timeout=60) as reply:
                for line in reply.iter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line[6:]) if line[6:].startswith("{") else line[6:])
            last = events[-1]
            assert last["error"]["code"] == "reply_looped" and "(a loop)" in last["error"]["message"]
            text = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1] if e.get("choices"))
            # What arrived in the same read as the 20th repeat went on before the check: a few reads.
            assert LINE_REPEATS <= text.count("#") < 500
            wait_for(lambda: upstream.hung_up, timeout=30, what="the upstream stream closed")
            assert upstream.looped < 10_000
            assert served.stop() == 0
        finally:
            served.process.kill()
