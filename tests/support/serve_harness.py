"""The serve proxy in a thread of the test process, in front of a real
llama-server: tests reach it with real clients (openai SDK, llm, aider) and
read its board and the engine directly. It listens as `dspine serve` does
(app/serve/connections.py), with the deadlines a test may shorten."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from app.serve.board import Board
from app.serve.connections import HEADER_S, IDLE_S, WRITE_STALL_S, listen, runner
from app.serve.proxy import Proxy, ProxyConfig
from backends.llama_server import LlamaServerEngine, ServerConfig
from backends.message_order import MERGE


class AppThread:
    """An aiohttp app served on 127.0.0.1 from its own event loop thread."""

    def __init__(
        self,
        app: web.Application,
        header_s: float = HEADER_S,
        idle_s: float = IDLE_S,
        write_stall_s: float = WRITE_STALL_S,
        before_cleanup: Any = None,
    ) -> None:
        self.app = app
        self.header_s, self.idle_s, self.write_stall_s = header_s, idle_s, write_stall_s
        self.before_cleanup = before_cleanup  # an async callable, run when stopping (Proxy.stop)
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._server: asyncio.AbstractServer | None = None

    def start(self) -> AppThread:
        sock = socket.create_server(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def serve() -> None:
            self._runner = runner(self.app, idle_s=self.idle_s)
            await self._runner.setup()
            self._server = await listen(self._runner, sock, self.header_s, self.write_stall_s)
            ready.set()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        assert ready.wait(30), "the app did not start"
        return self

    def stop(self) -> None:
        if self._loop is None or self._runner is None:
            return

        async def stop() -> None:
            assert self._runner is not None and self._server is not None
            self._server.close()
            if self.before_cleanup is not None:
                await self.before_cleanup()
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)


@dataclass
class ProxyThread:
    engine: LlamaServerEngine
    model_name: str = "test-model"
    default_think: bool = True
    parallel: int = 1
    api_key: str | None = None
    origins: tuple[str, ...] = ()
    cache_rules: bool = True
    board: Board = field(default_factory=Board)
    logged: list[tuple[Any, dict]] = field(default_factory=list)
    port: int = 0
    proxy: Proxy | None = None
    _app: AppThread | None = None

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
            origins=self.origins,
            system_rule=self.engine.template_choice.rule if self.engine.template_choice else MERGE,
            cache_rules=self.cache_rules,
            upstream_extra=self.engine.request_extra,  # as app/serve/service.py
        )
        self.proxy = Proxy(config, self.board, on_done=lambda f, body: self.logged.append((f, body)))
        self._app = AppThread(self.proxy.app(), before_cleanup=self.proxy.stop).start()
        self.port = self._app.port
        return self

    def stop(self) -> None:
        if self._app is not None:
            self._app.stop()


@contextmanager
def proxies(log_dir: Path) -> Iterator[Callable[..., ProxyThread]]:
    """start(config, **proxy options) -> a ProxyThread in front of a llama-server of its own;
    every one started is stopped, proxy first, when the block ends."""
    started: list[tuple[LlamaServerEngine, ProxyThread]] = []

    def start(config: ServerConfig, **options: Any) -> ProxyThread:
        engine = LlamaServerEngine(config, log_dir=log_dir).start()
        proxy = ProxyThread(engine, **options).start()
        started.append((engine, proxy))
        return proxy

    try:
        yield start
    finally:
        for engine, proxy in started:
            proxy.stop()
            engine.close()


class ServeProcess:
    """`dspine serve` as a user runs it, in its own process group (as a terminal would
    start it, so a test can send the group Ctrl-C); its URL read from what it prints."""

    def __init__(self, env: dict[str, str], *args: str, extra_env: dict[str, str] | None = None) -> None:
        import re
        import subprocess

        from backends.llama_server import free_port
        from tests.conftest import ROOT, dspine_cmd, wait_for

        if "--port" not in args:
            args = (*args, "--port", str(free_port()))
        self.process = subprocess.Popen(
            dspine_cmd("serve", *args),
            env={**env, **(extra_env or {})},
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        assert self.process.stdout is not None and self.process.stderr is not None
        threading.Thread(target=self._read, args=(self.process.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stderr, self.errors), daemon=True).start()
        serving = wait_for(
            lambda: (
                next((line for line in self.lines if line.startswith("serving")), None)
                or self.process.poll() is not None
            ),
            timeout=120,
            what="dspine serve to be ready",
        )
        assert self.process.poll() is None, "\n".join(self.errors)
        found = re.search(r"http://127\.0\.0\.1:(\d+)/v1", str(serving))
        assert found, serving
        self.port = int(found.group(1))

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def llama_servers(self) -> list[Any]:
        import psutil

        children = psutil.Process(self.process.pid).children(recursive=True)
        return [child for child in children if "llama-server" in child.name()]

    def stop(self, timeout: float = 30) -> int:
        """Ctrl-C, as a user stops it; its exit code."""
        import signal

        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
