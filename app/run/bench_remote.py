"""`dspine bench --engine remote`: the same table against a remote server. Plain rows only
where the server turns speculation off per request (dspine's patched llama-server); else
the server's figures as they are, and the table says so. Each setup runs on a connection
of its own, taking turns with the others prompt by prompt as a local bench does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from backends.remote import RemoteEngine

from ..settings import Settings
from .bench import PLAIN, Prompt, Row, Setup, run_bench, summarize
from .remote_engine import open_remote


@dataclass(frozen=True)
class RemotePlan:
    setups: list[Setup]
    label: str  # what the server drafts with, as the table names it
    note: str | None  # said under the table: why there is no plain row


def plan(engine: RemoteEngine, lengths: list[int]) -> RemotePlan:
    server = engine.server
    assert server is not None
    label = server.speculation or f"{server.kind}'s own setup"
    if not server.per_request_draft:
        return RemotePlan(
            [Setup(label, None)],
            label,
            f"{server.kind} at {server.shown_url} cannot turn speculation off per request: no plain row to "
            "compare with, its figures as they are (for a speedup, run it once without speculation and "
            "compare the tok/s)",
        )
    asked: list[int | None] = list(lengths) or [None]  # None: the server's own draft length
    setups = [Setup(PLAIN, None)] + [Setup(label, length) for length in asked]
    return RemotePlan(setups, label, None)


def opener(connect: Callable[[], RemoteEngine], label: str) -> Callable[[Setup], RemoteEngine]:
    """Each setup its own engine: plain asks for no drafts on every request."""

    def open_for(setup: Setup) -> RemoteEngine:
        engine = connect()
        engine.draft_off = setup.drafter == PLAIN
        return engine

    return open_for


@dataclass(frozen=True)
class RemoteBench:
    url: str | None
    api_key: str | None  # @FILE, or None for DSPINE_API_KEY
    model: str | None
    ctx: int
    lengths: list[int]
    thinks: list[bool]


@dataclass(frozen=True)
class RemoteBenchDone:
    rows: list[Row]
    title: str
    note: str | None


def run_remote(
    asked: RemoteBench,
    prompts: list[Prompt],
    repeat: int,
    max_tokens: int,
    seed: int,
    settings: Settings,
    warn: Callable[[str], None],
) -> RemoteBenchDone:
    said: list[str] = []

    def warn_once(warning: str) -> None:  # every setup's connection would say it again
        if warning not in said:
            said.append(warning)
            warn(warning)

    def connect() -> RemoteEngine:
        return open_remote(
            asked.url, asked.api_key, asked.model, None, settings.read_timeout_s, asked.ctx, warn=warn_once
        )

    first = connect()
    remote = plan(first, asked.lengths)
    first.close()
    runs = run_bench(opener(connect, remote.label), remote.setups, prompts, asked.thinks, repeat, max_tokens, seed)
    kind = first.server.kind if first.server else "remote"
    return RemoteBenchDone(summarize(runs), f"dspine bench: {first.model or 'remote'} on {kind}", remote.note)
