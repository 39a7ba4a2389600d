"""Where a reply ends when the model does not end it (issue 68): a loop is noticed and the
reply stopped with a note; a cap per think mode; what a coding answer repeats on purpose is
never taken for a loop."""

from __future__ import annotations

from backends.events import Delta, End, Error, StatsUpdate
from backends.reply_guard import DEFAULT_CAP, LINE_REPEATS, RUN_CHARS, LoopWatch, guarded, reply_cap
from backends.stats import Stats


class Script:
    """An engine's stream that goes on until it is cancelled, then ends as engines do."""

    def __init__(self, pieces: list[str], forever: bool = True) -> None:
        self.pieces = pieces
        self.forever = forever
        self.cancelled = False
        self.sent = 0

    def cancel(self) -> None:
        self.cancelled = True

    def events(self):
        i = 0
        while not self.cancelled and (self.forever or i < len(self.pieces)):
            self.sent += 1
            yield Delta(self.pieces[i % len(self.pieces)])
            i += 1
        yield End("cancelled" if self.cancelled else "stop", Stats(generated_tokens=self.sent))


def feed_all(text: str, step: int = 3):
    watch = LoopWatch()
    for i in range(0, len(text), step):
        found = watch.feed(text[i : i + step])
        if found is not None:
            return found, i + step
    return None, len(text)


def test_lines_of_hashes_are_a_loop_stopped_within_a_bounded_number_of_repeats():
    """The new user's first reply: a function, then line after line of `#`."""
    script = Script(["def reverse(head):\n", "    return head\n"] + ["#\n"] * 5000, forever=False)
    events = list(guarded(script.events(), script.cancel, cap=None))
    end = events[-1]
    assert isinstance(end, End) and end.reason == "loop" and script.cancelled
    assert "'#'" in end.note and f"{LINE_REPEATS} times" in end.note
    assert script.sent <= 2 + LINE_REPEATS + 1  # stopped at once, not after thousands
    assert end.stats.generated_tokens == script.sent


def test_a_cycle_of_lines_and_a_run_inside_one_line_are_loops():
    found, _ = feed_all("Here:\n" + "x = 1\ny = 2\nprint(x + y)\n" * 40)
    assert found is not None and found.span == "x = 1\ny = 2\nprint(x + y)"
    found, at = feed_all("the answer is " + "na" * 5000)
    assert found is not None and found.span in ("na", "an") and at < len("the answer is ") + RUN_CHARS + 200


def test_what_code_repeats_on_purpose_is_not_a_loop():
    code = (
        "def f():\n"
        + "    }\n" * (LINE_REPEATS - 1)
        + "=" * 80
        + "\n"
        + "| a | b |\n|---|---|\n"
        + "".join(f"| {i} | {i * i} |\n" for i in range(200))
        + "\n\n\n"
        + "    pass\n" * 5
        + "x" * 300
        + "\n"
        + "".join(f"assert f({i}) == {i}\n" for i in range(100))
    )
    assert feed_all(code)[0] is None
    assert feed_all(code, step=1)[0] is None


def test_the_cap_ends_the_reply_as_length_with_a_note_and_thinking_counts():
    script = Script(["word "])
    events = list(guarded(script.events(), script.cancel, cap=50))
    end = events[-1]
    assert isinstance(end, End) and end.reason == "length" and "50 tokens" in end.note
    assert sum(isinstance(e, Delta) for e in events) == 50
    thinking = Script(["hmm "])
    stream = (Delta(e.text, "thinking") if isinstance(e, Delta) else e for e in thinking.events())
    assert list(guarded(stream, thinking.cancel, cap=20))[-1].reason == "length"


def test_a_reply_that_ends_by_itself_passes_untouched():
    script = Script(["a\n", "b\n"], forever=False)
    events = list(guarded(script.events(), script.cancel, cap=1000))
    assert not script.cancelled and events[-1] == End("stop", Stats(generated_tokens=2))
    error = [Delta("x"), Error("boom")]
    assert list(guarded(iter(error), lambda: None)) == error


def test_statistics_count_tokens_where_deltas_carry_several():
    stream = iter([StatsUpdate(Stats(generated_tokens=99)), Delta("x"), End("stop", Stats(generated_tokens=100))])
    events = list(guarded(stream, lambda: None, cap=100))
    assert events[-1].reason == "length"


def test_the_cap_by_think_mode_and_the_setting():
    assert reply_cap(True) == DEFAULT_CAP[True] > reply_cap(False) == DEFAULT_CAP[False]
    assert reply_cap(False, 500) == reply_cap(True, 500) == 500


def test_serve_reads_the_answer_text_of_every_api_it_passes_on():
    from app.serve.streamed_text import StreamedText

    stream = (
        b'data: {"choices": [{"delta": {"content": "chat "}}]}\n\n'
        b'data: {"choices": [{"delta": {"reasoning_content": "thinking"}}]}\n\n'
        b'event: content_block_delta\ndata: {"type": "content_block_delta", '
        b'"delta": {"type": "text_delta", "text": "anthropic "}}\n\n'
        b'data: {"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": "{}"}}\n\n'
        b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "delta": "responses"}\n\n'
        b"data: [DONE]\n\ndata: not json\n\n"
    )
    reader = StreamedText()
    pieces = [stream[i : i + 7] for i in range(0, len(stream), 7)]  # events split across reads
    assert "".join(text for piece in pieces for text in reader.feed(piece)) == "chat anthropic responses"


def test_rows_code_repeats_on_purpose_and_a_users_own_limit_are_kept():
    """From review: a 20-row zero matrix and a maze's wall rows were cut as loops; `run -n 40000`
    was cut at the mode's cap although the user set the limit."""
    from backends.reply_guard import cap_for

    matrix = "grid = [\n" + "    [0, 0, 0, 0, 0, 0, 0, 0],\n" * 40 + "]\n"
    maze = "#####\n" + "#   #\n" * 40 + "#####\n"
    assert feed_all(matrix)[0] is None and feed_all(maze)[0] is None
    assert cap_for(False, 0, 40000) is None and cap_for(False, 0, None) == DEFAULT_CAP[False]
    assert cap_for(True, 500, None) == 500


def test_serve_passes_on_whole_events_only():
    from app.serve.proxy import events_end

    assert events_end(b'data: {"a": 1}\n\ndata: {"b"') == len(b'data: {"a": 1}\n\n')
    assert events_end(b"event: x\r\ndata: 1\r\n\r\nda") == len(b"event: x\r\ndata: 1\r\n\r\n")
    assert events_end(b"data: half") == 0 and events_end(b"") == 0


def test_a_stopped_loop_is_kept_in_the_conversation_once():
    """What the guard stopped, as the history keeps it: the repeats folded into one, whatever
    the stop cut off after the last; a reply without a loop (code's own repeats) untouched."""
    from backends.reply_guard import without_loop

    def streamed(pieces: list[str]) -> str:
        script = Script(pieces[:1] + pieces[1:] * 5000, forever=False)
        return "".join(e.text for e in guarded(script.events(), script.cancel, cap=None) if isinstance(e, Delta))

    function = "def reverse(head):\n    return head  \n"
    hashes = streamed([function] + ["#\n"])
    assert hashes.count("#") >= LINE_REPEATS and without_loop(hashes) == function + "#"
    cycle = streamed(["Here:\n"] + ["x = 1\n", "y = 2\n", "print(x + y)\n"])
    assert without_loop(cycle) == "Here:\nx = 1\ny = 2\nprint(x + y)"
    run = streamed(["the answer is "] + ["na"])
    assert len(run) >= RUN_CHARS and without_loop(run) in ("the answer is na", "the answer is nan")
    kept = function + "#\n" * 20 + "\n".join(["[0, 0, 0]"] * 20) + "\nend\n"
    assert without_loop(kept) == kept
