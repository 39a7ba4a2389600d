"""A long chat on the real SmolLM2-135M (Q8_0; --drafter q4 adds the Q4_1 file as its
drafter: the pair) at a 4K context (its own is 8K), on both local engines, through the
agent session: every turn pastes a file of a few KB (as an @mention does) and asks
about it, so the history passes the context within a few turns. Without compaction
the first overflow would end the chat; here it runs on.

Ctrl+C (or SIGTERM) stops it and prints the figures of the turns so far. On a busy
2-core machine a turn of the default size takes minutes: --ctx 2048 --chars 1500
compacts within a few turns at a fraction of the cost.

Printed per engine: turns survived of those asked and overflow errors; compactions;
prompt tokens processed per turn (the rest is reused from the engine's prefix cache)
in the turns before the first compaction and in the turns right after one; and the
share of the new prompt re-processed right after a compaction (the price of a
compaction on the prefix cache); and what each summary request processed of its
prompt (it is the conversation as the engine last read it plus the request to
summarise, so the prefix cache should hold all but that request).

    .venv/bin/python benchmarks/long_session.py [--turns 40] [--ctx 4096] [--engines inproc,server]
        [--chars 3500] [--reply-tokens 64] [--drafter none|q4]
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.agent.compaction import is_summary_request  # noqa: E402
from app.agent.project import open_project, system_prompt  # noqa: E402
from app.agent.session import Compacted, Notice, Question, ReplyEnded, Session  # noqa: E402
from app.agent.toolbox import Toolbox  # noqa: E402
from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

# Files of a few KB each, so that every turn adds about a thousand tokens.
SOURCES = sorted(p for p in (ROOT / "app").rglob("*.py") if p.stat().st_size >= 4000)


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
    summaries: list[Turn] = field(default_factory=list)  # each summary request's prompt and processed


class SummaryCounting:
    """The engine, with each summary request's prompt figures kept (the session sees only
    the summary's text)."""

    def __init__(self, engine, run: Run) -> None:
        self.engine, self.run = engine, run

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def stream(self, messages, **kwargs):
        started = time.monotonic()
        for event in self.engine.stream(messages, **kwargs):
            if isinstance(event, End) and is_summary_request(messages):
                stats = event.stats
                self.run.summaries.append(Turn(stats.prompt_tokens + stats.prompt_cached, stats.prompt_tokens, True))
                print(
                    f"  summary request: prompt/processed {stats.prompt_tokens + stats.prompt_cached}/"
                    f"{stats.prompt_tokens}, {stats.generated_tokens} tokens written "
                    f"({event.reason}), {time.monotonic() - started:.1f} s",
                    flush=True,
                )
            yield event


def file_turn(n: int, chars: int) -> str:
    path = SOURCES[n % len(SOURCES)]
    text = path.read_text()[:chars]
    return f"Here is {path.relative_to(ROOT)}:\n\n```python\n{text}\n```\n\nIn one sentence: what does it do?"


async def run_session(engine, turns: int, repo: Path, run: Run, chars: int, reply: Sampling) -> None:
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
        SummaryCounting(engine, run),
        Toolbox(repo),
        ask,
        emit,
        system=system_prompt(open_project(repo), True),
        think=False,
        sampling=reply,
    )
    for n in range(turns):
        started = time.monotonic()
        await session.send(file_turn(n, chars))
        last = run.turns[-1] if run.turns else None
        shown = f"{last.prompt}/{last.processed}" if last else "-"
        print(
            f"  turn {n + 1}: prompt/processed {shown}, {len(run.errors)} errors, {run.compactions} compactions, "
            f"{time.monotonic() - started:.1f} s",
            flush=True,
        )


def report(name: str, run: Run, asked: int, stopped: bool = False) -> None:
    if stopped:
        print(f"\n(stopped by hand after {len(run.turns)} turns: the figures below are for those)")
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
    if run.summaries:
        print(
            f"  summary requests: {statistics.mean(t.processed for t in run.summaries):,.0f} processed of "
            f"{statistics.mean(t.prompt for t in run.summaries):,.0f} "
            f"({statistics.mean(t.processed / t.prompt for t in run.summaries):.0%} of their prompt)"
        )
    print("  per turn (prompt / processed, * after a compaction):")
    print("   " + " ".join(f"{t.prompt}/{t.processed}{'*' if t.after_compaction else ''}" for t in run.turns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--ctx", type=int, default=4096, help="the context (the model's own is 8192)")
    parser.add_argument("--engines", default="inproc,server")
    parser.add_argument("--chars", type=int, default=3500, help="characters of a source file pasted each turn")
    parser.add_argument("--reply-tokens", type=int, default=64, help="each reply's limit (greedy)")
    parser.add_argument(
        "--drafter",
        choices=("q4", "none"),
        default="none",
        help="q4: the Q4_1 file drafts for the Q8_0 target (the pair); none (default): the target alone. "
        "On a CPU the drafter processes every prompt too, doubling the time, and changes nothing measured here",
    )
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: where a slow run is
    folder = Path(tempfile.gettempdir()) / "dspine-bench-models"
    pair = smollm2_pair(folder)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / "AGENTS.md").write_text("Answer in one sentence.\n")
        drafter = str(pair["q4"]) if args.drafter == "q4" else None
        with_drafter = " + Q4_1 drafter" if drafter else ", no drafter"
        print(
            f"SmolLM2-135M Q8_0{with_drafter}, context {args.ctx}, {args.turns} turns, each pasting "
            f"{args.chars:,} characters of a source file, replies of at most {args.reply_tokens} tokens"
        )
        for name in args.engines.split(","):
            if name == "inproc":
                engine = InprocEngine(str(pair["target"]), draft_path=drafter, n_ctx=args.ctx).load()
            else:
                config = ServerConfig(
                    str(pair["target"]),
                    draft_model=drafter,
                    drafter_kind="draft" if drafter else None,
                    n_ctx=args.ctx,
                    gpu_layers=0,
                    draft_gpu_layers=0,
                    n_max=4,
                )
                engine = LlamaServerEngine(config, log_dir=Path(tmp)).start()
            run = Run()

            def stop(signum, frame, engine=engine) -> None:
                engine.cancel()  # the reply or summary streaming ends, so the session can unwind
                raise KeyboardInterrupt

            signal.signal(signal.SIGINT, stop)
            signal.signal(signal.SIGTERM, stop)
            reply = Sampling(temperature=0.0, max_tokens=args.reply_tokens)  # the prompts are what grows
            try:
                asyncio.run(run_session(engine, args.turns, repo, run, args.chars, reply))
            except KeyboardInterrupt:
                report(name, run, args.turns, stopped=True)
                return
            finally:
                engine.close()
            report(name, run, args.turns)


if __name__ == "__main__":
    main()
