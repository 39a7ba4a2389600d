"""The two local engines opened on a generated model the same way by every test that runs a
chat through both, and pass-through wrappers for tests that watch what goes by."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from backends.base import Engine
from backends.events import Event
from backends.inproc import InprocEngine
from backends.llama_server import LlamaServerEngine, ServerConfig

KINDS = ["inproc", "server"]


def open_local(kind: str, model: Path, n_ctx: int, log_dir: Path, self_draft: bool = False) -> Engine:
    """`kind` ("inproc" or "server") on `model`, on the CPU; with `self_draft` the model drafts
    for itself, four tokens a step, so speculation runs through every turn."""
    path = str(model)
    if kind == "inproc":
        if self_draft:
            return InprocEngine(path, draft_path=path, n_ctx=n_ctx, n_max=4).load()
        return InprocEngine(path, n_ctx=n_ctx).load()
    if self_draft:
        config = ServerConfig(
            path, draft_model=path, drafter_kind="draft", n_ctx=n_ctx, gpu_layers=0, draft_gpu_layers=0, n_max=4
        )
    else:
        config = ServerConfig(path, n_ctx=n_ctx, gpu_layers=0)
    return LlamaServerEngine(config, log_dir=log_dir).start()


@dataclass
class Passthrough:
    """The engine interface handed on to `engine`; a subclass watches or changes one part."""

    engine: Engine

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def drafter(self) -> str | None:
        return self.engine.drafter

    @property
    def drafter_name(self) -> str | None:
        return self.engine.drafter_name

    def stream(self, messages, think=True, sampling=None, n_max=None, tools=None) -> Iterator[Event]:
        return self.engine.stream(messages, think=think, sampling=sampling, n_max=n_max, tools=tools)

    def cancel(self) -> None:
        self.engine.cancel()

    def close(self) -> None:
        self.engine.close()


class Counts:
    """The engine's own token count and context size handed on too (what /mcp and the
    session's budget read); a mixin for a Passthrough."""

    engine: Engine

    def count_tokens(self, messages, tools=None, think=True) -> int:
        return self.engine.count_tokens(messages, tools, think)

    @property
    def context_size(self) -> int | None:
        return self.engine.context_size


@dataclass
class Recorded(Passthrough):
    """An engine whose every reply is kept: what it was sent and the events it streamed."""

    sent: list[list[dict]] = field(default_factory=list)
    replies: list[list[Event]] = field(default_factory=list)

    def stream(self, messages, think=True, sampling=None, n_max=None, tools=None) -> Iterator[Event]:
        self.sent.append(messages)
        self.replies.append([])
        for event in self.engine.stream(messages, think=think, sampling=sampling, n_max=n_max, tools=tools):
            self.replies[-1].append(event)
            yield event
