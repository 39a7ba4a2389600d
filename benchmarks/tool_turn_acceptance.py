"""Acceptance on tool-call turns against free replies, on the bench's agent prompt set
(assets/prompts/agent.jsonl), with the real SmolLM2 pair: Q8_0 target, Q4_1 drafter,
in-process engine, greedy.

The contexts are each prompt of the set and each point in it where the assistant
called a tool (the conversation up to that assistant message). In each context the
model writes two turns:
- a free reply: what it writes on its own (SmolLM2-135M never calls a tool here: it
  answers in prose and code);
- a tool call: the reply is made to begin with `{"tool": "`, the format the set's
  system prompt asks for, and the model finishes the call (counted up to the brace
  that closes it).
Acceptance length is generated tokens per verify step, as the chat's readout shows it.

    .venv/bin/python benchmarks/tool_turn_acceptance.py [--tokens 200] [--k 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.run.bench import load_prompts  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from backends.stats import Stats  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

AGENT_PROMPTS = ROOT / "assets" / "prompts" / "agent.jsonl"
TOOL_CALL_START = '{"tool": "'


@dataclass
class Turn:
    tokens: int
    steps: int
    drafted: int
    accepted: int
    text: str


def contexts() -> list[list[dict]]:
    found = []
    for prompt in load_prompts([AGENT_PROMPTS]):
        messages = prompt.messages
        found += [messages[:i] for i, m in enumerate(messages) if m["role"] == "assistant"]
        found.append(messages)
    return found


def closes(text: str) -> bool:
    """The JSON object the text opens is closed (braces outside strings balance)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return True
    return False


def turn(engine: InprocEngine, messages: list[dict], start: str, tokens: int, k: int) -> Turn:
    prompt = engine.prompt_tokens(messages, think=False, reply_start=start)
    stats = Stats()
    produced: list[int] = []
    for step in engine.generate_tokens(prompt, Sampling(temperature=0, max_tokens=tokens), k, stats):
        produced += step
        if start and closes(start + engine.text_of(produced)):
            break
    return Turn(len(produced), stats.verify_steps, stats.drafted, stats.accepted, start + engine.text_of(produced))


def summary(label: str, turns: list[Turn]) -> str:
    tokens, steps = sum(t.tokens for t in turns), sum(t.steps for t in turns)
    drafted, accepted = sum(t.drafted for t in turns), sum(t.accepted for t in turns)
    return (
        f"{label:<12} {len(turns):>5} {tokens:>7} {steps:>13} {tokens / max(steps, 1):>11.2f} "
        f"{accepted / max(drafted, 1):>12.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=200, help="most tokens a turn (default 200)")
    parser.add_argument("--k", type=int, default=8, help="draft length (default 8)")
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    pair = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    engine = InprocEngine(str(pair["target"]), draft_path=str(pair["q4"]), n_ctx=4096, n_max=args.k).load()
    free, calls = [], []
    try:
        for messages in contexts():
            free.append(turn(engine, messages, "", args.tokens, args.k))
            calls.append(turn(engine, messages, TOOL_CALL_START, args.tokens, args.k))
    finally:
        engine.close()
    print(
        f"SmolLM2-135M Q8_0 target, Q4_1 drafter, in-process, greedy, k={args.k}, at most {args.tokens} tokens a turn"
    )
    print(f"{len(free)} contexts from {AGENT_PROMPTS.relative_to(ROOT)}")
    print("turn         turns  tokens  verify steps  accept len  accept rate")
    print(summary("free reply", free))
    print(summary("tool call", calls))
    print("per context: accept len (tokens / steps), free reply | tool call")
    for i, (a, b) in enumerate(zip(free, calls, strict=True), start=1):
        call = b.text.replace("\n", " ")
        print(
            f"  {i}. {a.tokens / max(a.steps, 1):5.2f} ({a.tokens}/{a.steps}) | "
            f"{b.tokens / max(b.steps, 1):5.2f} ({b.tokens}/{b.steps})  {call[:70]}"
        )


if __name__ == "__main__":
    main()
