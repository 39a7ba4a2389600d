"""serve's rules as pure functions (issue 22, point 3 and 9): which Host, Origin and
media type a request may carry, which body types reach llama-server, and how the
body budget hands out memory."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from app.serve.figures import RequestFigures
from app.serve.guards import check, host_allowed, origin_allowed
from app.serve.intake import BodyBudget
from app.serve.request_log import RequestLog
from app.serve.validate import body_problem


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8080",
        "localhost:8080",
        "LOCALHOST",
        "localhost.",
        "[::1]:8080",
        "127.8.9.1",
        "dev.localhost:80",
        None,
    ],
)
def test_loopback_hosts_are_allowed_on_loopback(host):
    assert host_allowed(host, "127.0.0.1")


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8080",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "192.168.1.5:8080",
        socket.gethostname(),
        "[::ffff:8.8.8.8]",
        "",
    ],
)
def test_other_hosts_are_refused_on_loopback(host):
    assert not host_allowed(host, "127.0.0.1")
    refusal = check(method="GET", host=host, origin=None, content_type=None, bind_host="127.0.0.1", origins=())
    assert refusal is not None and refusal.status == 403 and "Host" in refusal.message


def test_a_host_chosen_with_a_key_is_allowed_and_names_still_checked():
    assert host_allowed("box.lan:8080", "box.lan")
    assert host_allowed("192.168.1.5:8080", "0.0.0.0")
    assert host_allowed(f"{socket.gethostname()}:8080", "0.0.0.0")
    assert host_allowed("[fe80::1]:8080", "::")
    assert not host_allowed("evil.example", "0.0.0.0")
    assert not host_allowed("evil.example", "box.lan")


def test_origins_need_the_setting():
    assert not origin_allowed("http://evil.example", ())
    assert not origin_allowed("null", ())
    assert origin_allowed("http://localhost:3000", ("http://localhost:3000",))
    assert origin_allowed("HTTP://LocalHost:5173/", ("http://localhost:*",))
    assert not origin_allowed("http://localhost.evil.example:1", ("http://localhost:*",))
    assert origin_allowed("https://anything.example", ("*",))
    refusal = check(
        method="POST",
        host="127.0.0.1:8080",
        origin="http://evil.example",
        content_type="application/json",
        bind_host="127.0.0.1",
        origins=("http://localhost:3000",),
    )
    assert refusal is not None and refusal.status == 403 and "serve_origins" in refusal.message


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_a_post_must_be_declared_json(content_type):
    refusal = check(
        method="POST", host="localhost", origin=None, content_type=content_type, bind_host="127.0.0.1", origins=()
    )
    assert refusal is not None and refusal.status == 415 and "application/json" in refusal.message
    assert (
        check(
            method="POST", host="localhost", origin=None, content_type="application/json", bind_host="::1", origins=()
        )
        is None
    )


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/v1/chat/completions", {"model": 5, "messages": []}, "model"),
        ("/v1/chat/completions", {"messages": [], "chat_template_kwargs": "abc"}, "chat_template_kwargs"),
        ("/v1/chat/completions", {"messages": {"role": "user"}}, "messages"),
        ("/v1/chat/completions", {"messages": "hi"}, "messages"),
        ("/v1/chat/completions", {}, "messages is missing"),
        ("/v1/chat/completions", {"messages": ["hi"]}, "messages[0]"),
        ("/v1/chat/completions", {"messages": [{"role": 1, "content": "x"}]}, "messages[0].role"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": ["x"]}]}, "messages[0].content[0]"),
        ("/v1/chat/completions", {"messages": [], "stream": "yes"}, "stream"),
        ("/v1/chat/completions", {"messages": [], "temperature": "hot"}, "temperature"),
        ("/v1/chat/completions", {"messages": [], "max_tokens": True}, "max_tokens"),
        ("/v1/chat/completions", {"messages": [], "reasoning_effort": 3}, "reasoning_effort"),
        ("/v1/chat/completions", {"messages": [], "tools": [1]}, "tools[0]"),
        ("/v1/messages", {"messages": [], "thinking": "on"}, "thinking"),
        ("/v1/messages", {"messages": [], "system": 5}, "system"),
        ("/v1/completions", {"prompt": {"x": 1}}, "prompt"),
        ("/v1/responses", {"input": 5}, "input"),
        ("/tokenize", {"content": 5}, "content"),
        ("/v1/chat/completions", [1, 2], "JSON object"),
    ],
)
def test_wrong_types_are_named(path, body, named):
    problem = body_problem(path, body)
    assert problem is not None and named in problem, problem


def test_right_types_pass_and_unknown_fields_are_left_alone():
    assert body_problem("/v1/chat/completions", {"model": None, "messages": [], "x-custom": {"a": 1}}) is None
    chat = {
        "model": "m:no-think",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function"}]},
            {"role": "tool", "tool_call_id": "1", "content": "ok"},
        ],
        "chat_template_kwargs": {"enable_thinking": False},
        "temperature": 0,
        "stream": True,
        "stop": ["\n"],
    }
    assert body_problem("/v1/chat/completions", chat) is None
    responses = {
        "input": [{"type": "function_call_output", "call_id": "1", "output": "x"}, {"role": "user", "content": "q"}]
    }
    assert body_problem("/v1/responses", responses) is None
    assert body_problem("/v1/completions", {"prompt": [1, 2, 3]}) is None


async def test_the_body_budget_keeps_bytes_in_memory_bounded_and_first_come_first_served():
    budget = BodyBudget(100)
    order: list[str] = []
    first = budget.hold(60)
    await first.__aenter__()

    async def take(name: str, size: int) -> None:
        async with budget.hold(size):
            order.append(name)
            await asyncio.sleep(0)

    second = asyncio.create_task(take("second", 60))
    third = asyncio.create_task(take("third", 10))  # would fit, but waits behind the second
    await asyncio.sleep(0)
    assert budget.free == 40 and order == []
    await first.__aexit__(None, None, None)
    await asyncio.gather(second, third)
    assert order == ["second", "third"] and budget.free == 100


async def test_a_request_that_leaves_the_queue_gives_its_turn_on():
    budget = BodyBudget(100)
    async with budget.hold(100):
        gone = asyncio.create_task(budget.hold(80).__aenter__())
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
    async with budget.hold(100):
        assert budget.free == 0
    assert budget.free == 100


def test_a_lone_surrogate_keeps_its_log_line(tmp_path):
    log = RequestLog(tmp_path / "requests.jsonl")
    figures = RequestFigures(1, "/v1/chat/completions", "curl", False, False)
    figures.finish()
    log.write(figures, {"messages": [{"role": "user", "content": "a\ud800b é"}]})
    log.write(figures, {"messages": [{"role": "user", "content": "plain é"}]})
    log.close()
    first, second = (tmp_path / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(first)["messages"][0]["content"] == "a\ud800b é"
    assert "plain é" in second  # UTF-8 as it was, where it can be


def test_a_whole_reply_without_the_servers_timings_has_no_speed():
    """A non-streamed /v1/messages reply from llama-server carries usage but no timings: its
    speed is unknown, never its tokens over the microseconds since the body arrived (the
    readout showed 734,376 tok/s, and break-even took it for plain decoding's speed)."""
    body = json.dumps({"type": "message", "usage": {"input_tokens": 12, "output_tokens": 30}}).encode()
    whole = RequestFigures(1, "/v1/messages", "curl", False, False)
    whole.begin()
    whole.finish(body=body)
    assert whole.stats.generated_tokens == 30
    assert whole.stats.decode_s == 0 and whole.stats.tokens_per_s is None
    timed = json.dumps({"usage": {"completion_tokens": 30}, "timings": {"predicted_n": 30, "predicted_ms": 250.0}})
    with_timings = RequestFigures(2, "/v1/chat/completions", "curl", False, False)
    with_timings.begin()
    with_timings.finish(body=timed.encode())
    assert with_timings.stats.tokens_per_s == pytest.approx(120.0)
    from app.serve.board import Board

    board = Board()
    board.close(whole)
    board.close(with_timings)
    assert board.totals.generated == 60 and board.totals.tokens_per_s == pytest.approx(120.0)
