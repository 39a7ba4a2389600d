"""Request bodies read within bounds: how many bytes of bodies the proxy holds at
once (a budget handed out first come, first served, reserved before a byte is
read, so six 60 MiB requests queued behind a busy slot wait unread instead of
taking a gigabyte), how large one may be, and how long a client may pause
while sending one."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
from collections.abc import AsyncIterator

from aiohttp import web

MAX_BODY = 64 * 2**20  # long contexts and pasted images fit; more is refused with 413
BODY_IDLE_S = 30.0  # a client that sends nothing of its body for this long is cut off


def _error_text(message: str) -> str:
    return json.dumps({"type": "error", "error": {"message": message, "type": "invalid_request_error"}})


class BodyBudget:
    """Bytes of request bodies in memory at once. A request reserves its
    Content-Length (the largest body allowed when it sends none) before its body is
    read and keeps it until it is answered; one that does not fit waits its turn."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        self._waiting: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    @contextlib.asynccontextmanager
    async def hold(self, size: int) -> AsyncIterator[None]:
        size = min(size, self.total)
        await self._take(size)
        try:
            yield
        finally:
            self._give(size)

    async def _take(self, size: int) -> None:
        if not self._waiting and size <= self.free:
            self.free -= size
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((size, turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._give(size)  # granted as the client went away
            else:
                with contextlib.suppress(ValueError):  # _wake may have dropped it already
                    self._waiting.remove((size, turn))
                self._wake()
            raise

    def _give(self, size: int) -> None:
        self.free += size
        self._wake()

    def _wake(self) -> None:
        while self._waiting and self._waiting[0][0] <= self.free:
            size, turn = self._waiting.popleft()
            if turn.done():  # its request was cancelled while it waited
                continue
            self.free -= size
            turn.set_result(None)


def reservation(content_length: int | None) -> int:
    """What a request reserves: its announced size, or the most it may send."""
    return MAX_BODY if content_length is None else min(content_length, MAX_BODY)


def too_large(content_length: int | None) -> web.HTTPRequestEntityTooLarge | None:
    if content_length is None or content_length <= MAX_BODY:
        return None
    return _too_large(content_length)


def _too_large(size: int) -> web.HTTPRequestEntityTooLarge:
    return web.HTTPRequestEntityTooLarge(
        MAX_BODY,
        size,
        text=_error_text(f"the request body ({size:,} bytes) is over dspine serve's limit of {MAX_BODY:,} bytes"),
        content_type="application/json",
    )


async def read_body(request: web.BaseRequest, idle_s: float = BODY_IDLE_S) -> bytes:
    """The whole body, refusing one over MAX_BODY (413) and a client silent for
    `idle_s` mid-body (408)."""
    refused = too_large(request.content_length)
    if refused is not None:
        raise refused
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            async with asyncio.timeout(idle_s):
                chunk = await request.content.readany()
        except TimeoutError:
            raise web.HTTPRequestTimeout(
                text=_error_text(f"the client sent no part of its request body for {idle_s:g} s"),
                content_type="application/json",
            ) from None
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY:
            raise _too_large(size)
        chunks.append(chunk)
