"""Server and remote engines: tools go out in the `tools` field, streamed `tool_calls` come back whole."""

from __future__ import annotations

import json
import threading
import time

from backends.events import Delta, End, ToolCall
from backends.openai_stream import chat_body, stream_chat
from backends.sampling import preset


class Lines:
    def __init__(self, chunks: list[dict]) -> None:
        self.lines = [f"data: {json.dumps(c)}" for c in chunks] + ["data: [DONE]"]

    def iter_bytes(self):
        return iter(f"{line}\n".encode() for line in self.lines)


def test_streamed_tool_calls_are_assembled_from_their_fragments():
    chunks = [
        {"choices": [{"delta": {"content": "Reading it."}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "read_file"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"a.py"}'}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "list_files"}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ]
    events = list(stream_chat(Lines(chunks), threading.Event(), time.monotonic()))  # type: ignore[arg-type]
    assert events[0] == Delta("Reading it.")
    assert [e for e in events if isinstance(e, ToolCall)] == [
        ToolCall("c1", "read_file", '{"path": "a.py"}'),
        ToolCall("c2", "list_files", "{}"),
    ]
    assert isinstance(events[-1], End) and events[-1].reason == "tool_calls"


def test_tools_go_in_the_request_body_only_when_given():
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    assert chat_body([], False, preset(False), tools=tools)["tools"] == tools
    assert "tools" not in chat_body([], False, preset(False))


def test_one_token_in_gives_no_rate_yet():
    # llama-server's first-token timings: predicted_ms about a microsecond for one token.
    from backends.openai_stream import apply_timings
    from backends.stats import Stats

    stats = Stats()
    apply_timings(stats, {"predicted_n": 1, "predicted_ms": 0.001, "prompt_n": 5, "prompt_ms": 10.0})
    assert stats.tokens_per_s is None
    apply_timings(stats, {"predicted_n": 20, "predicted_ms": 500.0, "prompt_n": 5, "prompt_ms": 10.0})
    assert stats.tokens_per_s == 40.0


def test_steps_mid_stream_never_fall_when_a_steps_kept_drafts_are_announced_first():
    from backends.openai_stream import apply_timings
    from backends.stats import Stats

    stats = Stats()
    apply_timings(stats, {"predicted_n": 10, "predicted_ms": 100.0, "draft_n": 8, "draft_n_accepted": 6})
    assert stats.verify_steps == 4
    # The next step's first token: its 7 kept drafts are counted, its tokens not yet.
    apply_timings(stats, {"predicted_n": 11, "predicted_ms": 110.0, "draft_n": 16, "draft_n_accepted": 13})
    assert stats.verify_steps == 4 and stats.acceptance_length == 11 / 4  # not 11 tokens a step
    apply_timings(stats, {"predicted_n": 18, "predicted_ms": 180.0, "draft_n": 16, "draft_n_accepted": 13})
    assert stats.verify_steps == 5 and stats.acceptance_length == 18 / 5


def test_a_stopped_reply_counts_what_it_streamed_also_when_the_cancel_closes_the_stream():
    cancelled = threading.Event()

    class Stopped:
        def __init__(self, close_under_reader: bool) -> None:
            self.close_under_reader = close_under_reader

        def iter_bytes(self):
            for n in range(5):
                yield f"data: {json.dumps({'choices': [{'delta': {'content': f'word{n} '}}]})}\n".encode()
            cancelled.set()
            if self.close_under_reader:
                raise OSError("the response was closed")
            yield f"data: {json.dumps({'choices': [{'delta': {'content': 'late'}}]})}\n".encode()

    for close in (False, True):
        cancelled.clear()
        events = list(stream_chat(Stopped(close), cancelled, time.monotonic()))  # type: ignore[arg-type]
        end = events[-1]
        assert isinstance(end, End) and end.reason == "cancelled"
        texts = [e.text for e in events if isinstance(e, Delta)]
        assert "".join(texts).startswith("word0 word1 word2 word3 word4 ")  # a line already read still counts
        assert end.stats.generated_tokens == len(texts) >= 5
        assert end.stats.decode_s == 0.0  # all at once: too short a span for this clock to time
