"""Prefix reuse: time to first token at turn 10 against turn 1 of a chat, both
engines, side by side in one run, on the real SmolLM2-135M (Q8_0; see
tests/support/real_models.py). Each turn adds a user message of the same length, so
the new part of every prompt is about the same; without reuse the whole
growing chat is processed again each turn.

    .venv/bin/python benchmarks/prefix_reuse.py [--turns 10] [--words 120] [--repeat 3]
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
from backends.sampling import preset  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

SENTENCE = "the function reads the file and returns a list of lines without the trailing newline"
WORDS = SENTENCE.split()


def chat(engine, turns: int, words: int, tokens: int, run: int = 0) -> list[tuple[float, int, int]]:
    """(time to first token, prompt tokens processed, prompt tokens reused) per turn. Each
    run's first message differs from its first words on, so no run reuses another's turns."""
    messages: list[dict] = []
    rows = []
    sampling = preset(False).with_(temperature=0, max_tokens=tokens)
    for turn in range(turns):
        text = " ".join(WORDS[(turn + i) % len(WORDS)] for i in range(words))
        messages.append({"role": "user", "content": f"{run} {turn + 1}: {text}?"})
        events = list(engine.stream(messages, think=False, sampling=sampling))
        end = events[-1]
        assert isinstance(end, End), end
        reply = "".join(getattr(e, "text", "") for e in events)
        messages.append({"role": "assistant", "content": reply})
        rows.append((end.stats.ttft_s or 0.0, end.stats.prompt_tokens, end.stats.prompt_cached))
    return rows


def fastest(runs: list[list[tuple[float, int, int]]]) -> list[tuple[float, int, int]]:
    """Per turn, the run with the shortest time to first token (load elsewhere only adds time)."""
    return [min(turn, key=lambda row: row[0]) for turn in zip(*runs, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--words", type=int, default=120)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeat", type=int, default=3, help="whole chats per engine; each turn keeps its fastest")
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    pair = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    results = {}
    inproc = InprocEngine(str(pair["target"]), draft_path=str(pair["q4"]), n_ctx=8192, n_max=4).load()
    try:
        runs = [chat(inproc, args.turns, args.words, args.tokens, run) for run in range(args.repeat)]
        results["in-process"] = fastest(runs)
    finally:
        inproc.close()
    config = ServerConfig(
        model=str(pair["target"]),
        draft_model=str(pair["q4"]),
        drafter_kind="draft",
        n_ctx=8192,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=4,
    )
    server = LlamaServerEngine(config, log_dir=Path(tempfile.mkdtemp())).start()
    try:
        runs = [chat(server, args.turns, args.words, args.tokens, run) for run in range(args.repeat)]
        results["llama-server"] = fastest(runs)
    finally:
        server.close()
    print(f"SmolLM2-135M Q8_0 + Q4_1 drafter, {args.turns} turns of {args.words} words, {args.tokens} tokens a reply")
    print("engine        turn  ttft_s  processed  reused")
    for name, rows in results.items():
        for turn, (ttft, processed, reused) in enumerate(rows, 1):
            if turn in (1, 2, args.turns):
                print(f"{name:<12} {turn:>5}  {ttft:6.3f}  {processed:>9}  {reused:>6}")
    for name, rows in results.items():
        print(f"{name}: ttft turn {args.turns} / turn 1 = {rows[-1][0] / rows[0][0]:.2f}")


if __name__ == "__main__":
    main()
