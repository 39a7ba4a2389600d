"""The chat under load: the scripted engine streams at 200, 800 and 2,000
tok/s into the real app (headless); measured side by side in one run:

- lag: from the engine's last token to the reply's whole text in the
  Markdown widget, its blocks mounted (goal: under 100 ms); and to the
  reply being done (figures line written, saved);
- typing while a reply streams: from a key press to the key in the prompt;
- the UI's CPU time per token (the whole process's, less what an engine-only
  run of the same schedule costs).

    .venv/bin/python benchmarks/chat_ui.py [--tokens 3000]
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

from app.history import ChatStore  # noqa: E402
from app.tui.app import ChatApp  # noqa: E402
from app.tui.widgets.message_view import MessageView  # noqa: E402
from tests.scripted_engine import ScriptedEngine  # noqa: E402


def reply_tokens(count: int) -> list[str]:
    """A coding reply's shape: prose paragraphs and fenced code, a few characters a token."""
    pieces: list[str] = []
    while len(pieces) < count:
        pieces += [f"word{i} " for i in range(30)] + ["\n\n", "```python\n"]
        for line in range(8):
            pieces += ["def ", f"f{line}", "(x):", "\n", "    return ", "x + ", f"{line}", "\n"]
        pieces += ["```\n\n"]
    return pieces[:count]


async def one_rate(rate: float, tokens: int, folder: Path, history: int = 0) -> dict:
    engine = ScriptedEngine(answer=reply_tokens(tokens), tokens_per_s=rate)
    store = ChatStore(folder / f"chat-{rate}-{history}.db")
    if history:
        # Earlier turns of the same chat, on screen when the app opens: a long day's conversation.
        chat = store.new_chat("earlier")
        for turn in range(history):
            store.add_message(chat.id, "user", f"question {turn}")
            store.add_message(chat.id, "assistant", "".join(reply_tokens(tokens)))
    app = ChatApp(engine, store)
    typing_lags: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        prompt = app.query_one("#prompt")
        earlier = len(app.query(MessageView))
        prompt.load_text("bench")
        # Posted, not pilot.press: press waits for the app to go idle, i.e. for the whole reply.
        prompt.post_message(events.Key("enter", None))
        expected = "".join(engine.answer)
        cpu_started = time.process_time()
        keys = iter("abcdefghij")
        next_key = time.monotonic() + 0.2
        view = None
        text_lag = None
        while app.last_end is None:
            if view is None:
                views = list(app.query(MessageView))[earlier:]
                view = next((v for v in views if v.role == "assistant"), None)
            if view is not None and text_lag is None and _all_on_widget(view, expected):
                text_lag = time.monotonic() - engine.last_token_at
            key = next(keys, None) if time.monotonic() >= next_key and text_lag is None else None
            if key:
                # A key event straight into the app's queue, as a terminal would send it.
                pressed = time.monotonic()
                prompt.post_message(events.Key(key, key))
                while key not in prompt.text:
                    await asyncio.sleep(0.002)
                typing_lags.append(time.monotonic() - pressed)
                next_key = time.monotonic() + 0.2
            await asyncio.sleep(0.005)
        done_lag = time.monotonic() - engine.last_token_at
        cpu = time.process_time() - cpu_started
    store.close()
    return {"rate": rate, "lag_ms": (text_lag if text_lag is not None else done_lag) * 1000, "done_ms": done_lag * 1000,
            "typing_ms": statistics.median(typing_lags) * 1000 if typing_lags else None,
            "cpu_us_per_token": cpu / tokens * 1e6}


def _all_on_widget(view: MessageView, expected: str) -> bool:
    markdown = view.answer_markdown
    return markdown.source == expected and not markdown.lock.is_locked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=3000)
    parser.add_argument("--history", type=int, default=0, help="earlier replies of the same length already in the chat")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dspine-chat-ui-"))
    print(f"{args.tokens} tokens per reply, {args.history} earlier replies in the chat, headless app 120x40")
    print(f"{'tok/s':>7} {'lag ms':>8} {'done ms':>8} {'typing ms':>10} {'CPU us/token':>13}")
    for rate in (200, 800, 2000):
        result = asyncio.run(one_rate(rate, args.tokens, folder, args.history))
        typing = f"{result['typing_ms']:.1f}" if result["typing_ms"] is not None else "-"
        print(f"{rate:>7} {result['lag_ms']:>8.1f} {result['done_ms']:>8.1f} {typing:>10} {result['cpu_us_per_token']:>13.0f}")


if __name__ == "__main__":
    main()
