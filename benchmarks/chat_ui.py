"""The chat under load: the scripted engine streams at 200, 800 and 2,000
tok/s into the real app (headless); measured side by side in one run:

- lag: every 5 ms while the reply streams, how long the oldest text the
  engine has produced but the reply's Markdown does not yet hold (blocks
  mounted) has been waiting; median, 95th percentile and at the last token
  (goal: under 100 ms);
- typing while a reply streams: from a key press to the key in the prompt;
- the UI's CPU time per token (the whole process, engine thread included);
- open: from starting the app to the chat's end drawn on screen.

`--history N` opens a chat that already holds N replies of the same length (in a
context that holds them all; `--compact` gives the engine 8,192 tokens, so the chat
compacts them first: that summary is not timed as the reply).
`--code-lines N` makes each code block N lines long (8 by default; a reply that
writes a whole file has hundreds). Two flags keep an old path, to measure both
in one sitting: `--highlight-open` highlights a code block on every update while
it grows; `--gc-as-usual` lets Python's full garbage collections run while the
reply streams (the chat now holds them back: app/tui/full_gc.py).

    .venv/bin/python benchmarks/chat_ui.py [--tokens 3000] [--history 20] [--tint] [--code-lines 8]
        [--highlight-open] [--gc-as-usual] [--compact]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from textual import events

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.agent.compaction import is_summary_request  # noqa: E402
from app.chat.store import ChatStore  # noqa: E402
from app.tui.app import ChatApp  # noqa: E402
from app.tui.widgets.conversation import Conversation  # noqa: E402
from app.tui.widgets.markdown_segment import MarkdownSegment  # noqa: E402
from app.tui.widgets.message_view import MessageView  # noqa: E402
from backends.events import Delta  # noqa: E402
from tests.support.pilot import drawn_answer_chars  # noqa: E402
from tests.support.scripted_engine import ScriptedEngine  # noqa: E402

HISTORY_CONTEXT = 1 << 22  # tokens: more than 20 earlier replies of 3,000 tokens hold


def reply_tokens(count: int, code_lines: int = 8) -> list[str]:
    """A coding reply's shape: prose paragraphs and fenced code, a few characters a token."""
    pieces: list[str] = []
    while len(pieces) < count:
        pieces += [f"word{i} " for i in range(30)] + ["\n\n", "```python\n"]
        for line in range(code_lines):
            pieces += ["def ", f"f{line}", "(x):", "\n", "    return ", "x + ", f"{line}", "\n"]
        pieces += ["```\n\n"]
    return pieces[:count]


class TimedEngine:
    """The scripted engine, noting when each piece of the live reply's answer left it.

    Only the reply the chat shows is timed: a summary the session asks for first (a chat
    whose earlier replies overflow the context is compacted before the message goes out)
    streams through the same engine but is never drawn as a reply, and timing its text as
    the reply's made every character of the real reply look a whole reply late (the 12 s
    "lag" at 200 tok/s with `--history 3`)."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine
        self.sent: list[tuple[float, int]] = []  # (time, characters of the answer so far)
        self.text = ""
        self.summaries = 0  # summary requests streamed (not timed)

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def stream(self, messages, *args, **kwargs):
        if is_summary_request(messages):
            self.summaries += 1
            yield from self.engine.stream(messages, *args, **kwargs)
            return
        produced = 0
        for event in self.engine.stream(messages, *args, **kwargs):
            if isinstance(event, Delta) and event.kind == "answer":
                produced += len(event.text)
                self.text += event.text
                self.sent.append((time.monotonic(), produced))
            yield event

    def waiting_since(self, shown: int) -> float | None:
        """When the first character not yet shown left the engine (None: all shown; blank
        lines after the last block never show)."""
        if not self.text[shown:].strip():
            return None
        for at, produced in list(self.sent):
            if produced > shown:
                return at
        return None


async def one_rate(
    rate: float,
    tokens: int,
    folder: Path,
    history: int = 0,
    tint: bool = False,
    gc_as_usual: bool = False,
    code_lines: int = 8,
    compact: bool = False,
) -> dict:
    # Four tokens in five as accepted drafts, as a good drafter gives; tinted when `tint`.
    drafted = {i for i in range(tokens) if i % 5 != 4}
    script = reply_tokens(tokens, code_lines)
    # A context that holds the whole history: the lag of drawing a reply in a long chat is
    # measured, not a compaction first (`--compact` measures with one).
    context = None if compact else HISTORY_CONTEXT
    scripted = ScriptedEngine(answer=script, tokens_per_s=rate, drafted_pieces=drafted)
    if context is not None:
        scripted.context_size = context
    engine = TimedEngine(scripted)
    store = ChatStore(folder / f"chat-{rate}-{history}.db")
    if history:
        # Earlier turns of the same chat, on screen when the app opens: a long day's conversation.
        chat = store.new_chat("earlier")
        for turn in range(history):
            store.add_message(chat.id, "user", f"question {turn}")
            store.add_message(chat.id, "assistant", "".join(reply_tokens(tokens, code_lines)))
    app = ChatApp(engine, store, show_drafts=tint)
    if gc_as_usual:
        app.full_collections.hold = lambda: None  # type: ignore[method-assign]
    typing_lags: list[float] = []
    lags: list[float] = []
    opening = time.monotonic()
    async with app.run_test(size=(120, 40)):
        conversation = app.query_one(Conversation)
        while not conversation.drawn:
            await asyncio.sleep(0.005)
        opened = time.monotonic() - opening
        prompt = app.query_one("#prompt")
        prompt.load_text("bench")
        # Posted, not pilot.press: press waits for the app to go idle, i.e. for the whole reply.
        prompt.post_message(events.Key("enter", None))
        expected = len("".join(engine.answer))
        cpu_started = time.process_time()
        keys = iter("abcdefghij")
        next_key = time.monotonic() + 0.2
        view = None
        end_lag = None
        while end_lag is None:
            if view is None:
                view = next((v for v in app.query(MessageView) if v.live), None)
            shown = drawn_answer_chars(view) if view is not None else 0
            waiting = engine.waiting_since(shown)
            if engine.sent:
                lags.append(time.monotonic() - waiting if waiting is not None else 0.0)
            if engine.sent and engine.sent[-1][1] == expected and waiting is None:
                end_lag = time.monotonic() - engine.last_token_at
            key = next(keys, None) if time.monotonic() >= next_key else None
            if key:
                # A key event straight into the app's queue, as a terminal would send it.
                pressed = time.monotonic()
                prompt.post_message(events.Key(key, key))
                while key not in prompt.text:
                    await asyncio.sleep(0.002)
                typing_lags.append(time.monotonic() - pressed)
                next_key = time.monotonic() + 0.2
            await asyncio.sleep(0.005)
        cpu = time.process_time() - cpu_started
        while app.streaming:
            await asyncio.sleep(0.01)
    store.close()
    lags.sort()
    return {
        "rate": rate,
        "lag_median_ms": statistics.median(lags) * 1000,
        "lag_p95_ms": lags[int(0.95 * (len(lags) - 1))] * 1000,
        "lag_end_ms": end_lag * 1000,
        "typing_ms": statistics.median(typing_lags) * 1000 if typing_lags else None,
        "cpu_us_per_token": cpu / tokens * 1e6,
        "open_s": opened,
        "summaries": engine.summaries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=3000)
    parser.add_argument("--history", type=int, default=0, help="earlier replies of the same length already in the chat")
    parser.add_argument("--tint", action="store_true", help="drafted text tinted (Ctrl+G in the chat)")
    parser.add_argument("--code-lines", type=int, default=8, help="lines in each code block of the reply")
    parser.add_argument("--highlight-open", action="store_true", help="highlight growing code blocks (old path)")
    parser.add_argument("--gc-as-usual", action="store_true", help="full GC runs while streaming (old path)")
    parser.add_argument(
        "--compact",
        action="store_true",
        help="the engine's context is 8,192 tokens, so a long history is compacted before the reply (not timed)",
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dspine-chat-ui-"))
    if args.highlight_open:
        MarkdownSegment.fence_is_open = lambda self, token: False  # type: ignore[method-assign]
    print(
        f"{args.tokens} tokens per reply, {args.history} earlier replies in the chat, "
        f"tint {'on' if args.tint else 'off'}, {args.code_lines}-line code blocks"
        f"{' highlighted while open' if args.highlight_open else ''}, "
        f"full GC {'as usual' if args.gc_as_usual else 'held while streaming'},"
        " headless app 120x40"
    )
    print(
        f"{'tok/s':>7} {'lag median ms':>14} {'lag p95 ms':>11} {'lag end ms':>11} {'typing ms':>10}"
        f" {'CPU us/token':>13} {'open s':>7}"
    )
    for rate in (200, 800, 2000):
        result = asyncio.run(
            one_rate(
                rate, args.tokens, folder, args.history, args.tint, args.gc_as_usual, args.code_lines, args.compact
            )
        )
        typing = f"{result['typing_ms']:.1f}" if result["typing_ms"] is not None else "-"
        print(
            f"{rate:>7} {result['lag_median_ms']:>14.1f} {result['lag_p95_ms']:>11.1f} {result['lag_end_ms']:>11.1f}"
            f" {typing:>10} {result['cpu_us_per_token']:>13.0f} {result['open_s']:>7.2f}"
        )


if __name__ == "__main__":
    main()
