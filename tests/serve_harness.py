"""The serve proxy in a thread of the test process, in front of a real
llama-server: tests reach it with real clients (openai SDK, llm, aider) and
read its board and the engine directly."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from app.serve.board import Board
from app.serve.proxy import Proxy, ProxyConfig
from backends.llama_server import LlamaServerEngine, free_port


@dataclass
class ProxyThread:
    engine: LlamaServerEngine
    model_name: str = "test-model"
    default_think: bool = True
    parallel: int = 1
    api_key: str | None = None
    cache_rules: bool = True
    board: Board = field(default_factory=Board)
    logged: list[tuple[Any, dict]] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ProxyThread:
        assert self.engine.base_url and self.engine.api_key
        config = ProxyConfig(
            self.engine.base_url,
            self.engine.api_key,
            self.model_name,
            self.engine.config.n_ctx,
            self.default_think,
            self.parallel,
            self.api_key,
            cache_rules=self.cache_rules,
        )
        proxy = Proxy(config, self.board, on_done=lambda f, body: self.logged.append((f, body)))
        self.port = free_port()
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def serve() -> None:
            self._runner = web.AppRunner(proxy.app(), access_log=None, handler_cancellation=True)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
            ready.set()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        assert ready.wait(30), "proxy did not start"
        return self

    def stop(self) -> None:
        if self._loop is None or self._runner is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
