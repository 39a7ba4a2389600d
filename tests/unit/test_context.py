"""The context budget and compaction as pure logic, the bounded output capture, and how
each engine says a prompt was too long."""

from __future__ import annotations

import json
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

import pytest

from app.agent.capture import HEAD_BYTES, TAIL_BYTES, OutputCapture, head_tail
from app.agent.compaction import SUMMARY_PREFIX, compact, facts, is_stub, is_summary_request, prune, split_point
from app.agent.context import Budget, Usage, is_overflow, reply_reserve, reported_context
from backends.base import estimate_tokens
from backends.events import Error
from backends.remote import RemoteEngine
from tests.support.conversations import round_trip, tool_history
from tests.support.http_thread import send, serving


def test_overflow_errors_are_recognised_and_name_their_context():
    server = Error('llama-server answered 400: {"error": {"type": "exceed_context_size_error", "n_ctx": 4096}}')
    assert is_overflow(server) and reported_context(server) == 4096
    assert is_overflow(Error("x", overflow=True))
    openai = Error("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens")
    assert is_overflow(openai) and reported_context(openai) == 8192
    assert is_overflow(Error("llama.cpp failed to decode (the context may be full)"))
    assert not is_overflow(Error("cannot talk to http://x: connection refused"))


def test_the_reply_reserve_and_the_usage_breakdown():
    assert reply_reserve(8192, think=True) == 2048 and reply_reserve(8192, think=False) == 1024
    assert reply_reserve(8192, think=True, max_tokens=300) == 300
    usage = Usage(4096, 512, system=300, tools=700, history=1000, turn=200)
    assert usage.used == 2200 and usage.available == 3584 and usage.meter() == "ctx 2.2k/3.6k"
    text = usage.breakdown()
    assert "system prompt + AGENTS.md: 300" in text and "this turn: 200" in text and "61%" in text


def test_the_breakdown_says_when_the_chat_template_leaves_the_tools_out():
    class Engine:
        name = "scripted"
        context_size = 4096

        def __init__(self, shows_tools: bool) -> None:
            self.shows_tools = shows_tools

        def count_tokens(self, messages, tools=None, think=True) -> int:
            return estimate_tokens(messages, tools if self.shows_tools else None)

    system = [{"role": "system", "content": "You work on the project."}]
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": {}}}]
    blind = Budget(Engine(shows_tools=False)).usage(system, tools, [], [])
    assert blind.tools == 0 and "leaves the tool list out" in blind.breakdown()
    seeing = Budget(Engine(shows_tools=True)).usage(system, tools, [], [])
    assert seeing.tools > 0 and "leaves the tool list out" not in seeing.breakdown()
    assert "leaves the tool list out" not in Budget(Engine(shows_tools=False)).usage(system, None, [], []).breakdown()


def test_a_remote_budget_is_corrected_by_what_the_server_reports():
    class Remote:
        name = "remote"
        context_size = None

        def count_tokens(self, messages, tools=None, think=True):
            return estimate_tokens(messages, tools)

    budget = Budget(Remote(), think=False, n_ctx=2048)
    assert budget.n_ctx == 2048 and not budget.exact
    messages = [{"role": "user", "content": "hello " * 300}]
    counted = budget.count(messages)
    budget.counted_request(counted)
    from backends.stats import Stats

    budget.reported(Stats(prompt_tokens=counted * 2))
    assert budget.count(messages) == counted * 2
    budget.overflowed(Error("maximum context length is 1024 tokens"))
    assert budget.n_ctx == 1024


def test_prune_keeps_the_newest_rounds_and_leaves_a_stub_that_says_how_to_get_it_again():
    messages = tool_history()
    pruned, n = prune(messages)
    assert n == 5  # six reads and a command: the last read and the command stay whole
    stubs = [m["content"] for m in pruned if m["role"] == "tool" and is_stub(m["content"])]
    assert "read_file path=src/f0.py" in stubs[0] and "call the tool again" in stubs[0]
    assert pruned[-2]["content"] == messages[-2]["content"]  # the command's output, newest
    assert prune(pruned)[1] == 0  # stubs are not pruned again


def test_facts_list_every_path_and_command_with_its_outcome():
    found = facts(
        tool_history() + round_trip(7, "edit_file", "applied", path="src/parse.py", old_text="a", new_text="b")
    )
    assert found.read == [f"src/f{n}.py" for n in range(6)]
    assert found.changed == ["src/parse.py"]
    assert found.commands == ["`pytest -q`: exit code 1"]


def test_split_keeps_a_call_with_its_results():
    messages = tool_history()
    sizes = [estimate_tokens([m]) for m in messages]
    cut = split_point(messages, 50, sizes)
    assert messages[cut]["role"] != "tool"


def test_compaction_summarises_the_older_part_and_keeps_the_newest_verbatim():
    messages = tool_history(10)
    count = estimate_tokens
    seen: list = []

    def summariser(request, max_tokens):
        seen.append(request)
        return "## Goal\nFix the parser."

    done = compact(messages, count, 800, summariser, 4096)
    assert done.gained and done.after < done.before and seen
    assert done.history[0]["content"].startswith(SUMMARY_PREFIX)
    assert "src/f0.py" in done.history[0]["content"] and "`pytest -q`: exit code 1" in done.history[0]["content"]
    assert done.history[-1] == messages[-1]
    # The request being worked on stays verbatim after the summary.
    assert {"role": "user", "content": "fix the parser"} in done.history
    assert all(f"src/f{n}.py" in done.summary_input for n in range(10) if f"src/f{n}.py" not in str(done.history[3:]))


def test_roles_still_alternate_when_the_kept_part_starts_with_an_assistant_turn():
    turns = []
    for n in range(12):
        turns += [
            {"role": "user", "content": f"question {n} " + "about the parser " * 40},
            {"role": "assistant", "content": f"answer {n} " + "it parses " * 40},
        ]
    turns.append({"role": "user", "content": "and now?"})
    for target in range(300, 1400, 50):  # splits falling before a user turn and before an assistant one
        done = compact(turns, estimate_tokens, target, lambda r, n: "## Goal\nparse", 4096, force=True)
        roles = [m["role"] for m in done.history]
        assert roles[0] == "user" and all(a != b for a, b in zip(roles, roles[1:], strict=False)), (target, roles)
        assert done.history[-1] == turns[-1]


@pytest.mark.parametrize("n_ctx", [16384, 4096, 2048])
def test_the_summary_request_shares_the_longest_prefix_with_what_was_sent_that_fits(n_ctx):
    """The request being worked on is the first message here: leaving it out of the summary
    request (it stays verbatim after the summary anyway) would leave the engine nothing
    cached but the system prompt, so it stays in place where the request fits."""
    messages = tool_history(10)
    seen: list = []

    def summariser(request, max_tokens):
        seen.append(request)
        return "## Goal\nFix the parser."

    compact(messages, estimate_tokens, 800, summariser, n_ctx, force=True)
    request = seen[0]
    assert is_summary_request(request) and estimate_tokens(request) <= n_ctx - max(128, min(1024, n_ctx // 6))
    shared = next((i for i, (a, b) in enumerate(zip(request, messages, strict=False)) if a != b), len(request))
    if n_ctx == 16384:
        assert request[:-1] == messages[: len(request) - 1]  # all of it as sent: the engine reads only the ask
    elif n_ctx == 4096:
        assert request[0] == messages[0] and shared >= 2 and is_stub(request[shared]["content"])  # up to pruning
    else:
        assert len(request) == 1 and "<conversation>" in request[0]["content"]  # a transcript cut to fit


def test_a_summariser_that_fails_still_keeps_the_list_of_files():
    def broken(request, max_tokens):
        raise RuntimeError("the engine stopped")

    done = compact(tool_history(10), estimate_tokens, 800, broken, 4096)
    assert "could not be written" in done.note and "src/f0.py" in done.summary


def test_head_tail_marks_the_cut():
    text = "".join(f"line {i}\n" for i in range(1000))
    cut = head_tail(text, 500, "see the file")
    assert cut.startswith("line 0\n") and cut.endswith("line 999\n") and "characters cut here; see the file" in cut
    assert len(cut) < 600
    assert head_tail("short", 500, "x") == "short"


def test_capture_keeps_head_and_tail_in_bounded_memory():
    capture = OutputCapture(None)
    capture.feed(b"HEAD\n" + b"z" * 100_000)
    for _ in range(100):
        capture.feed(b"y" * 65_536)
    capture.feed(b"\nTAIL\n")
    assert len(capture.head) == HEAD_BYTES and capture.tail_size <= TAIL_BYTES
    text = capture.text()
    assert text.startswith("HEAD") and text.endswith("TAIL\n") and "could not be saved" in text


@contextmanager
def refusing_server(status: int, body: dict):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            send(self, status, json.dumps(body).encode())

    with serving(Handler) as url:
        yield url


def test_a_remote_400_about_the_context_is_an_overflow():
    body = {
        "error": {"message": "This model's maximum context length is 4096 tokens.", "code": "context_length_exceeded"}
    }
    with refusing_server(400, body) as url:
        events = list(RemoteEngine(url, n_ctx=4096).stream([{"role": "user", "content": "hi"}]))
    assert isinstance(events[-1], Error) and events[-1].overflow and reported_context(events[-1]) == 4096
    with refusing_server(400, {"error": {"message": "bad temperature"}}) as url:
        events = list(RemoteEngine(url).stream([{"role": "user", "content": "hi"}]))
    assert isinstance(events[-1], Error) and not events[-1].overflow
    assert RemoteEngine(url, n_ctx=4096).context_size == 4096


def test_a_newest_result_too_large_for_the_context_is_cut_to_head_and_tail_as_the_last_resort():
    huge = "FIRST LINE\n" + "".join(f"middle {i}\n" for i in range(3000)) + "=== 3 passed ===\n"
    older = tool_history(2)
    newest = [{"role": "user", "content": "run the tests"}] + round_trip(
        7, "run_command", "exit code 0\n" + huge, command="pytest -q"
    )

    def count(messages: list[dict]) -> int:
        return estimate_tokens(messages)

    whole = older + newest
    limit = count(older) // 2 + 1500  # the newest round alone is far over it
    done = compact(whole, count, limit // 2, lambda m, n: "## Goal\nfix it", 4096, force=True, limit=limit)
    assert done.shrunk == 1 and done.after <= limit < done.before and done.gained
    cut = done.history[-1]["content"]
    assert cut.startswith("exit code 0\nFIRST LINE") and cut.rstrip().endswith("=== 3 passed ===")
    assert "characters cut here; cut to fit the context; call run_command command=pytest -q again" in cut
    assert done.history[-3] == {"role": "user", "content": "run the tests"}  # the request stays verbatim
    # Without a limit (or within it) nothing is cut.
    assert compact(whole, count, limit // 2, lambda m, n: "x", 4096, force=True).shrunk == 0


def test_llama_servers_refusals_are_said_in_words_and_an_overflow_names_its_context(tmp_path):
    """`dspine run --engine server` with a prompt over the context printed llama-server's JSON
    ("llama-server answered 400: {"error":{...}}"); the in-process engine says it plainly."""
    from backends.llama_server import refusal

    body = (
        '{"error":{"code":400,"message":"request (6031 tokens) exceeds the available context size (1024 tokens),'
        ' try increasing it","type":"exceed_context_size_error","n_prompt_tokens":6031,"n_ctx":1024}}'
    )
    error = refusal(400, body, tmp_path / "server.log")
    assert error.message == "the prompt has 6031 tokens, the context 1024" and "--ctx" in error.fix
    assert is_overflow(error) and reported_context(error) == 1024
    other = refusal(500, '{"error":{"code":500,"message":"the model crashed","type":"server_error"}}', tmp_path / "l")
    assert other.message == "llama-server answered 500: the model crashed" and not other.overflow
    assert refusal(502, "<html>bad gateway</html>", tmp_path / "l").message.endswith("<html>bad gateway</html>")
