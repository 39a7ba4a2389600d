"""Stopping serve with requests in flight: every handler is ended on purpose, a
stream with a last event in its own API's words (so a client's SDK raises "dspine
serve is stopping" instead of hanging or reading a cut connection), a request
still waiting with 503. aiohttp alone would wait for each one to finish (a
minute, then another) before it gives up."""

from __future__ import annotations

import asyncio
import contextlib
import json

from aiohttp import web

STOPPING = "dspine serve is stopping"
END_WRITE_S = 1.0  # a client that does not read its last event is not waited for


class Stopping:
    def __init__(self) -> None:
        self.requested = False
        self._handlers: set[asyncio.Task] = set()

    def track(self, task: asyncio.Task | None) -> None:
        if task is not None:
            self._handlers.add(task)

    def untrack(self, task: asyncio.Task | None) -> None:
        self._handlers.discard(task)

    def caught_stop(self) -> bool:
        """In a handler that caught CancelledError: whether the stop cancelled it rather
        than its client hanging up. If so the cancellation is taken back (the handler
        answers its client instead of going away)."""
        task = asyncio.current_task()
        if not self.requested or task is None or task not in self._handlers:
            return False
        task.uncancel()
        return True

    async def stop(self, grace_s: float = 2.0) -> None:
        """Cancel every handler in flight and give them `grace_s` to say so to their clients."""
        self.requested = True
        handlers = [task for task in self._handlers if not task.done()]
        for task in handlers:
            task.cancel(STOPPING)
        if handlers:
            await asyncio.wait(handlers, timeout=grace_s)


def final_event(path: str, message: str, code: str = "server_stopping") -> bytes:
    """The error event each streaming API's clients read as an error."""
    if path == "/v1/messages":
        data = {"type": "error", "error": {"type": "api_error", "message": message}}
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
    if path == "/v1/responses":
        data = {"type": "error", "code": code, "message": message}
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
    data = {"error": {"message": message, "type": "server_error", "code": code}}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


async def end_stream(
    response: web.StreamResponse, path: str, at_event_boundary: bool, message: str, code: str = "server_stopping"
) -> None:
    """Close a stream the client is reading: its last event (only where an event
    ended, so that it is not glued to half of one), then the end of the body."""
    with contextlib.suppress(ConnectionError, TimeoutError, RuntimeError):
        async with asyncio.timeout(END_WRITE_S):
            if at_event_boundary:
                await response.write(final_event(path, message, code))
            await response.write_eof()
