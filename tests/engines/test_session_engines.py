"""A long session on both local engines with the generated tool-call model
(tests/support/script_model.py): it reads README.md whenever the file's marker is not in its
context, and answers from it once it is. Forty turns with a README of several KB at a
4K context: every request fits (the engine's own tokenizer counts it), compaction
happens, and the session never ends in an overflow."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.agent.compaction import is_summary_request
from app.agent.project import open_project, system_prompt
from app.agent.session import Compacted, Notice, Question, ReplyEnded, Session
from app.agent.toolbox import Toolbox
from backends.events import Error, Event
from tests.support.local_engines import KINDS, Counts, Passthrough, open_local
from tests.support.script_model import ANSWER_TEXT, MARKER, write_script_model

pytestmark = pytest.mark.slow  # forty turns on each engine

# This model's tokenizer spends about a token a byte: the system prompt and the tool list (todo_write and
# the sandbox's words included) take about 3.1K of it, so 5K leaves a conversation room to grow and compact.
N_CTX = 5120
AGENTS = "Answer from the README. Keep it short.\n"
# Several KB, the marker near the top: a capped result keeps its head.
README = f"# Demo\n\nThe word is {MARKER}.\n\n" + "".join(f"Filler line {i} of the demo readme.\n" for i in range(90))


@dataclass
class Counted(Counts, Passthrough):
    """The engine, with every chat request counted by its own tokenizer as it was sent."""

    sent: list[int] = field(default_factory=list)
    summaries: int = 0
    errors: list[Error] = field(default_factory=list)

    @property
    def drafter(self) -> str | None:
        return None

    @property
    def drafter_name(self) -> str | None:
        return None

    def stream(self, messages, think=True, sampling=None, n_max=None, tools=None) -> Iterator[Event]:
        if is_summary_request(messages):
            self.summaries += 1
        else:
            self.sent.append(self.engine.count_tokens(messages, tools, think))
        for event in self.engine.stream(messages, think=think, sampling=sampling, n_max=n_max, tools=tools):
            if isinstance(event, Error):
                self.errors.append(event)
            yield event


@pytest.fixture(scope="module")
def script_model(tmp_path_factory) -> Path:
    return write_script_model(tmp_path_factory.mktemp("script") / "script.gguf")


@pytest.fixture(params=KINDS)
def engine(request, script_model, tmp_path):
    opened = open_local(request.param, script_model, N_CTX, tmp_path)
    yield Counted(opened)
    opened.close()


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README.md").write_text(README)
    (root / "AGENTS.md").write_text(AGENTS)
    return root


def test_forty_turns_at_a_5k_context_on_a_real_engine(engine, repo):
    assert engine.context_size == N_CTX
    events: list = []

    async def emit(event) -> None:
        events.append(event)

    async def ask(question: Question):
        return "yes"

    session = Session(engine, Toolbox(repo), ask, emit, system=system_prompt(open_project(repo), True), think=False)

    async def go() -> None:
        for turn in range(40):
            # A prompt of a few hundred bytes each turn: the history grows past the context.
            await session.send(f"Turn {turn}: what does the README say? " + "Some detail. " * 20)

    asyncio.run(go())
    assert not engine.errors, engine.errors[:2]
    assert not [e for e in events if isinstance(e, Notice) and e.severity == "error"]
    assert max(engine.sent) <= N_CTX - session.budget.reserve  # counted by the engine's own tokenizer
    compactions = [e.compaction for e in events if isinstance(e, Compacted)]
    assert compactions and engine.summaries
    replies = [e for e in events if isinstance(e, ReplyEnded)]
    assert sum(r.answer == ANSWER_TEXT for r in replies) == 40  # every turn was answered from the file
    # The newest turn is verbatim, and README.md is named in every summary's input.
    assert session.history[-1] == {"role": "assistant", "content": ANSWER_TEXT}
    assert any(m.get("content", "").startswith("Turn 39: ") for m in session.history)
    assert all("README.md" in c.summary_input for c in compactions if c.summary_input)
    assert AGENTS in session.messages()[0]["content"]
    print(
        f"{engine.name}: {len(engine.sent)} requests, largest {max(engine.sent)} tokens, "
        f"{len(compactions)} compactions, {engine.summaries} summaries"
    )


@dataclass
class Unsized(Counted):
    """The engine, not saying its context (as a remote server does not): the session goes by
    the size it was told, which is too large, until the engine refuses a prompt."""

    @property
    def context_size(self) -> int | None:
        return None


@pytest.fixture(params=["inproc", "server"])
def small_engine(request, script_model, tmp_path):
    opened = open_local(request.param, script_model, SMALL_CTX, tmp_path)
    yield Unsized(opened)
    opened.close()


SMALL_CTX = N_CTX


def test_a_real_overflow_error_compacts_retries_once_and_teaches_the_context(small_engine, repo):
    assert small_engine.engine.context_size == SMALL_CTX
    events: list = []

    async def emit(event) -> None:
        events.append(event)

    async def ask(question: Question):
        return "yes"

    system = system_prompt(open_project(repo), True)
    session = Session(small_engine, Toolbox(repo), ask, emit, system=system, think=False, n_ctx=4 * SMALL_CTX)

    async def go() -> None:
        for turn in range(8):
            await session.send(f"Turn {turn}: what does the README say? " + "Some detail. " * 20)

    asyncio.run(go())
    overflows = [e for e in small_engine.errors if e.overflow]
    # The engine's own refusal (llama-server's 400, llama.cpp's check), once: the retry after the
    # compaction fit, and from then on the session counted against the context the engine named.
    assert len(overflows) == 1 and len(small_engine.errors) == 1, small_engine.errors
    assert session.budget.n_ctx == SMALL_CTX
    notices = [e for e in events if isinstance(e, Notice)]
    assert any("does not fit its context: compacting" in n.text for n in notices)
    assert not [n for n in notices if n.severity == "error"]
    assert [e for e in events if isinstance(e, Compacted)] and small_engine.summaries
    replies = [e for e in events if isinstance(e, ReplyEnded)]
    assert sum(r.answer == ANSWER_TEXT for r in replies) == 8  # every turn answered, the refused one too
    assert max(small_engine.sent[-3:]) <= SMALL_CTX - session.budget.reserve
