"""Regenerate docs/images/chat.svg, the README's picture of `dspine chat`.

    python scripts/screenshot.py [--out docs/images/chat.svg]

It is the real chat app (app/tui), driven by Textual's pilot on a scratch project: the
tests' scripted engine stands in for the model, so no model or GPU is needed and the
figures on screen are the script's, not a measurement. The model reads a file with its
`read_file` tool (no consent needed), then answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images" / "chat.svg"
SIZE = (110, 36)
QUESTION = "Why does add(2, 3) give -1? Fix calc.py."
ANSWER = [
    "The bug is in `add`: it subtracts.\n\n",
    "```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```\n\n",
    "Shall I make that edit? You will see the diff first.",
]


async def shoot(out: Path) -> None:
    sys.path.insert(0, str(ROOT))
    import app.tui.app as chat_app
    from app.agent.project import open_project
    from app.chat.store import ChatStore
    from app.fit.hardware import Hardware
    from backends.events import ToolCall
    from tests.support.scripted_engine import ScriptedEngine

    # The same picture on every machine: no GPU line on the readout.
    chat_app.detect = lambda: Hardware([], 0, 0, "none")  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "calc"
        project.mkdir()
        (project / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a - b\n", encoding="utf-8")
        read = ToolCall("c_1", "read_file", json.dumps({"path": "calc.py"}))
        engine = ScriptedEngine(
            turns=[["I'll read calc.py first.", read], ANSWER],
            drafter_name="Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf",
        )
        store = ChatStore(Path(tmp) / "chats.db")
        app = chat_app.ChatApp(engine, store, model="qwen3.8-27b", project=open_project(project))
        async with app.run_test(size=SIZE) as pilot:
            app.query_one("#prompt").load_text(QUESTION)
            await pilot.press("enter")
            deadline = time.monotonic() + 30
            while (app.streaming or len(engine.calls) < 2) and time.monotonic() < deadline:
                await pilot.pause(0.05)
            if app.streaming or len(engine.calls) < 2:
                raise SystemExit("the scripted chat did not finish within 30 s")
            app.sub_title = "qwen3.8-27b · ~/src/calc"  # not the scratch folder's random name
            await pilot.pause(0.5)
            svg = app.export_screenshot(title="dspine chat")
        store.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(svg, encoding="utf-8")
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    asyncio.run(shoot(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
