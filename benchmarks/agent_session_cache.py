"""Prompt tokens processed per turn of a Claude-Code-shaped session through `dspine
serve`, side by side in one run: each turn's system prompt starts with a billing line
that changes every request (as Claude Code's does), and a side request (a title, its own
short system prompt, no tools) follows every turn. Real SmolLM2-135M (Q8_0, see
tests/support/real_models.py) on llama-server, through the proxy, the Anthropic endpoint.

  before        the proxy without its cache rules (the billing line reaches llama-server)
  after         with the rules (the line is taken out)
  after, no RAM with the rules, llama-server's host-memory prompt cache off (--cache-ram 0):
                what the side request costs when nothing keeps the conversation

    .venv/bin/python benchmarks/agent_session_cache.py [--turns 6] [--words 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402

from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402
from tests.support.serve_harness import ProxyThread  # noqa: E402

SYSTEM = (
    "You are an interactive command line tool that helps users with software engineering tasks. "
    "Use the instructions below and the tools available to you to assist the user. "
)
SENTENCE = "the function reads the file and returns a list of lines without the trailing newline"


def session(url: str, turns: int, words: int) -> list[tuple[int, int]]:
    """(prompt tokens processed, reused) for each main turn."""
    claude = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0, timeout=600)
    system_text = SYSTEM * 20
    messages: list[dict] = []
    rows = []
    for turn in range(turns):
        text = " ".join(SENTENCE.split()[(turn + i) % 15] for i in range(words))
        messages.append({"role": "user", "content": f"Turn {turn + 1}: {text}?"})
        line = f"x-anthropic-billing-header: cc_version=2.1.197.{turn:03x}; cc_entrypoint=cli;"
        system = [{"type": "text", "text": line}, {"type": "text", "text": system_text}]
        reply = claude.messages.create(model="smollm2", max_tokens=24, system=system, messages=messages)
        messages.append({"role": "assistant", "content": reply.content[0].text if reply.content else "ok"})
        rows.append((reply.usage.input_tokens, reply.usage.cache_read_input_tokens or 0))
        claude.messages.create(  # the side request
            model="smollm2",
            max_tokens=8,
            system="Write a five-word title for this conversation.",
            messages=[{"role": "user", "content": messages[0]["content"][:200]}],
        )
    return rows


def run(target: Path, rules: bool, extra: tuple[str, ...], turns: int, words: int) -> list[tuple[int, int]]:
    log_dir = Path(tempfile.mkdtemp(prefix="dspine-agent-bench-"))
    config = ServerConfig(model=str(target), n_ctx=8192, gpu_layers=0, draft_gpu_layers=0, extra_args=extra)
    engine = LlamaServerEngine(config, log_dir=log_dir).start()
    proxy = ProxyThread(engine, model_name="smollm2", default_think=False, cache_rules=rules).start()
    try:
        return session(proxy.url.removesuffix("/v1"), turns, words)
    finally:
        proxy.stop()
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--words", type=int, default=300)
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    target = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")["target"]
    setups = {
        "before": (False, ()),
        "after": (True, ()),
        "after, no RAM": (True, ("--cache-ram", "0")),
    }
    results = {name: run(target, rules, extra, args.turns, args.words) for name, (rules, extra) in setups.items()}
    print(f"Claude-Code-shaped session, {args.turns} turns, a side request after each; prompt tokens per turn")
    print("turn  " + "  ".join(f"{name:>22}" for name in results))
    for turn in range(args.turns):
        cells = [f"{new:>6} new {reused:>6} reused" for new, reused in (r[turn] for r in results.values())]
        print(f"{turn + 1:>4}  " + "  ".join(f"{c:>22}" for c in cells))
    last = {name: rows[-1][0] for name, rows in results.items()}
    print(
        f"turn {args.turns}: processed before / after = {last['before'] / max(last['after'], 1):.1f}x "
        f"({last['before']} vs {last['after']}); after without --cache-ram: {last['after, no RAM']}"
    )


if __name__ == "__main__":
    main()
