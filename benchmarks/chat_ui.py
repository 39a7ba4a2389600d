"""The chat under load: the scripted engine streams at 200, 800 and 2,000
tok/s into the real app (headless); measured side by side in one run:

- lag: from the engine's last token to the reply's full text on screen
  (goal: under 100 ms);
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


async def one_rate(rate: float, tokens: int, folder: Path) -> dict:
    engine = ScriptedEngine(answer=reply_tokens(tokens), tokens_per_s=rate)
    store = ChatStore(folder / f"chat-{rate}.db")
    app = ChatApp(engine, store)
    typing_lags: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        prompt = app.query_one("#prompt")
        prompt.load_text("bench")
        await pilot.press("enter")
        expected = "".join(engine.answer)
        cpu_started = time.process_time()
        keys = iter("abcdefghij")
        next_key = time.monotonic() + 0.2
        view = None
        while True:
            if view is None:
                views = [v for v in app.query(MessageView) if v.role == "assistant"]
                view = views[-1] if views else None
            if view is not None and view.answer == expected:
                break
            key = next(keys, None) if time.monotonic() >= next_key else None
            if key:
                # A key event straight into the app's queue, as a terminal would send it.
                pressed = time.monotonic()
                prompt.post_message(events.Key(key, key))
                while key not in prompt.text:
                    await asyncio.sleep(0.002)
                typing_lags.append(time.monotonic() - pressed)
                next_key = time.monotonic() + 0.2
            await asyncio.sleep(0.01)
        lag = time.monotonic() - engine.last_token_at
        cpu = time.process_time() - cpu_started
        while app.streaming:
            await asyncio.sleep(0.01)
    store.close()
    return {"rate": rate, "lag_ms": lag * 1000, "typing_ms": statistics.median(typing_lags) * 1000 if typing_lags else None,
            "cpu_us_per_token": cpu / tokens * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=3000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dspine-chat-ui-"))
    print(f"{args.tokens} tokens per reply, headless app 120x40")
    print(f"{'tok/s':>7} {'lag ms':>8} {'typing ms':>10} {'CPU us/token':>13}")
    for rate in (200, 800, 2000):
        result = asyncio.run(one_rate(rate, args.tokens, folder))
        typing = f"{result['typing_ms']:.1f}" if result["typing_ms"] is not None else "-"
        print(f"{rate:>7} {result['lag_ms']:>8.1f} {typing:>10} {result['cpu_us_per_token']:>13.0f}")


if __name__ == "__main__":
    main()
