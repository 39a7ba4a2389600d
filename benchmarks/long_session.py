"""A long chat on the real SmolLM2 pair (Q8_0 target, Q4_1 drafter) at its 8K context,
on both local engines, through the agent session: every turn pastes a file of a few KB
(as an @mention does) and asks about it, so the history passes the context within a
few turns. Without compaction the first overflow would end the chat; here it runs on.

Printed per engine: turns survived of those asked and overflow errors; compactions;
prompt tokens processed per turn (the rest is reused from the engine's prefix cache)
in the turns before the first compaction and in the turns right after one; and the
share of the new prompt re-processed right after a compaction (the price of a
compaction on the prefix cache).

    .venv/bin/python benchmarks/long_session.py [--turns 40] [--ctx 8192] [--engines inproc,server]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.agent.project import open_project, system_prompt  # noqa: E402
from app.agent.session import Compacted, Notice, Question, ReplyEnded, Session  # noqa: E402
from app.agent.toolbox import Toolbox  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

SOURCES = sorted((ROOT / "app").rglob("*.py"))
REPLY = Sampling(temperature=0.0, max_tokens=96)  # short greedy replies: the prompts are what grows


@dataclass
class Turn:
    prompt: int  # the whole prompt
    processed: int  # of it, processed (not reused from the cache)
    after_compaction: bool


@dataclass
class Run:
    turns: list[Turn] = field(default_factory=list)
    compactions: int = 0
    errors: list[str] = field(default_factory=list)


def file_turn(n: int) -> str:
    path = SOURCES[n % len(SOURCES)]
    text = path.read_text()[:3500]
    return f"Here is {path.relative_to(ROOT)}:\n\n```python\n{text}\n```\n\nIn one sentence: what does it do?"


async def run_session(engine, turns: int, repo: Path) -> Run:
    run = Run()
    compacted = False

    async def emit(event) -> None:
        nonlocal compacted
        if isinstance(event, Compacted):
            run.compactions += 1
            compacted = True
        elif isinstance(event, ReplyEnded):
            if event.error is not None:
                run.errors.append(event.error.message)
            elif event.end is not None:
                stats = event.end.stats
                run.turns.append(Turn(stats.prompt_tokens + stats.prompt_cached, stats.prompt_tokens, compacted))
                compacted = False
        elif isinstance(event, Notice) and event.severity == "error":
            run.errors.append(event.text)

    async def ask(question: Question):
        return "no"

    session = Session(
        engine, Toolbox(repo), ask, emit, system=system_prompt(open_project(repo), True), think=False, sampling=REPLY
    )
    for n in range(turns):
        await session.send(file_turn(n))
    return run


def report(name: str, run: Run, asked: int) -> None:
    after = [t for t in run.turns if t.after_compaction]
    steady = [t for t in run.turns[1:] if not t.after_compaction]
    print(
        f"\n{name}: {len(run.turns)} of {asked} turns answered, {len(run.errors)} errors, {run.compactions} compactions"
    )
    for error in run.errors[:3]:
        print(f"  error: {error[:160]}")
    if steady:
        print(
            f"  turns without a compaction before them: {statistics.mean(t.processed for t in steady):,.0f} "
            f"prompt tokens processed of {statistics.mean(t.prompt for t in steady):,.0f} "
            f"({statistics.mean(t.processed / t.prompt for t in steady):.0%})"
        )
    if after:
        print(
            f"  turns right after a compaction: {statistics.mean(t.processed for t in after):,.0f} processed of "
            f"{statistics.mean(t.prompt for t in after):,.0f} "
            f"({statistics.mean(t.processed / t.prompt for t in after):.0%} of the new prompt re-processed)"
        )
    print("  per turn (prompt / processed, * after a compaction):")
    print("   " + " ".join(f"{t.prompt}/{t.processed}{'*' if t.after_compaction else ''}" for t in run.turns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--engines", default="inproc,server")
    args = parser.parse_args()
    folder = Path(tempfile.gettempdir()) / "dspine-bench-models"
    pair = smollm2_pair(folder)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / "AGENTS.md").write_text("Answer in one sentence.\n")
        print(f"SmolLM2-135M Q8_0 + Q4_1 drafter, context {args.ctx}, {args.turns} turns of about 1K tokens each")
        for name in args.engines.split(","):
            if name == "inproc":
                engine = InprocEngine(str(pair["target"]), draft_path=str(pair["q4"]), n_ctx=args.ctx).load()
            else:
                config = ServerConfig(
                    str(pair["target"]),
                    draft_model=str(pair["q4"]),
                    drafter_kind="draft",
                    n_ctx=args.ctx,
                    gpu_layers=0,
                    draft_gpu_layers=0,
                    n_max=4,
                )
                engine = LlamaServerEngine(config, log_dir=Path(tmp)).start()
            try:
                run = asyncio.run(run_session(engine, args.turns, repo))
            finally:
                engine.close()
            report(name, run, args.turns)


if __name__ == "__main__":
    main()
