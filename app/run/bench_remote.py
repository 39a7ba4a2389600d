"""`dspine bench --engine remote`: the same table against a remote server. Plain rows only
where the server turns speculation off per request (dspine's patched llama-server); else
the server's figures as they are, and the table says so. Each setup runs on a connection
of its own, taking turns with the others prompt by prompt as a local bench does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from backends.remote import RemoteEngine

from .bench import PLAIN, Setup


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
            f"{server.kind} at {server.url} cannot turn speculation off per request: no plain row to "
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
