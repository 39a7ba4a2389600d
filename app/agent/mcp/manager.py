"""The MCP servers of one chat: started in the background, watched, called, stopped.

The MCP SDK is asyncio (anyio); the chat's tool loop runs in worker threads and the
agent session knows no screen. So the manager runs its own event loop on a thread of
its own: any thread can call a tool (blocking, stoppable), the SDK's cancel scopes
never mix with Textual's loop, the servers start while the chat is already usable,
and the same manager works without a TUI (tests, other front ends). Each server is
one task that opens the transport, initializes within a deadline, lists its tools,
then waits for the stop or for the server's end. A server that fails in any way is a
notice, and its tools are left out; the others go on.

On Linux every stdio server runs under `guard.py` (its own process group, killed when
the chat's manager thread or the chat dies, `kill -9` included); everywhere the SDK
closes stdin, then terminates the group at stop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from . import results
from .config import ConfigProblem, ServerSpec, expanded
from .stderr_tail import StderrTail
from .switches import Switches

START_TIMEOUT_S = 30.0  # initialize + tools/list; a server installing itself (npx, uvx) needs a while
CALL_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 6.0  # the SDK's own shutdown: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL
GUARD = Path(__file__).with_name("guard.py")
MAX_NAME = 64  # OpenAI function names: ^[a-zA-Z0-9_-]{1,64}$

# "untrusted": a project's server before the user trusts the project (app/agent/trust.py).
Status = Literal["off", "untrusted", "starting", "ready", "failed", "stopped"]


def tool_name(server: str, tool: str) -> str:
    """`server__tool`, in the characters every engine's tool schema allows."""
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{tool}")
    return clean[:MAX_NAME]


@dataclass(frozen=True)
class McpTool:
    name: str  # what the model calls: server__tool
    server: str
    tool: str  # the server's own name for it
    description: str
    parameters: dict[str, Any]

    @property
    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def definitions_text(tools: list[McpTool]) -> str:
    """The tools as a chat template puts them in the prompt (one JSON object a line)."""
    return "\n".join(json.dumps(tool.schema, ensure_ascii=False) for tool in tools)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 3.5 characters a token for JSON-heavy text)."""
    return (len(text) * 2 + 6) // 7


@dataclass
class _Run:
    """One start of a server, to its end: a switch off and on again makes a new one, and an
    old run still winding down never touches the server's state."""

    stopping: bool = False
    wake: anyio.Event | None = None  # set when asked to stop or when the server's output ends
    starting: anyio.CancelScope | None = None  # initialize and tools/list, until ready
    tail: StderrTail | None = None
    future: concurrent.futures.Future | None = None
    http_error: str = ""  # the last HTTP error status an http server answered


@dataclass
class Server:
    spec: ServerSpec
    status: Status = "off"
    reason: str = ""  # why it failed or stopped, for people
    tools: list[McpTool] = field(default_factory=list)
    server_info: str = ""
    _session: Any = None
    _run: _Run | None = None

    @property
    def name(self) -> str:
        return self.spec.name


def _parameters(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    schema = dict(schema)
    schema.setdefault("type", "object")
    if schema["type"] == "object":
        schema.setdefault("properties", {})
    return schema


def _quiet_sdk_logs() -> None:
    # The SDK logs a garbage line with a traceback; the chat says it in a notice instead,
    # and nothing may write to the terminal under the TUI.
    sdk = logging.getLogger("mcp")
    if not any(isinstance(h, logging.NullHandler) for h in sdk.handlers):
        sdk.addHandler(logging.NullHandler())
    sdk.propagate = False


class McpManager:
    def __init__(
        self,
        specs: list[ServerSpec],
        root: Path,
        switches: Switches | None = None,
        environ: Mapping[str, str] | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        call_timeout_s: float = CALL_TIMEOUT_S,
        on_notice: Callable[[str, bool], None] | None = None,
        on_change: Callable[[], None] | None = None,
        problems: list[str] | None = None,
    ) -> None:
        """`on_notice(text, warning)` and `on_change()` are called from the manager's thread (or
        the caller's, for set_enabled); `problems`: what was wrong in the config files, said at start."""
        self.root = root
        self.switches = switches
        self.environ = dict(os.environ if environ is None else environ)
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self.on_notice = on_notice or (lambda text, warning: None)
        self.problems = list(problems or [])
        self.on_change = on_change or (lambda: None)
        self.servers: dict[str, Server] = {spec.name: Server(spec) for spec in specs}
        # A project's own servers start only once the user trusts the project: until then none
        # of them is started, and no variable is expanded for one.
        self.project_trusted = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    def enabled(self, name: str) -> bool:
        server = self.servers[name]
        chosen = self.switches.get().get(name) if self.switches is not None else None
        return server.spec.enabled if chosen is None else chosen

    def start(self) -> None:
        """Start every enabled server in the background; returns at once."""
        _quiet_sdk_logs()
        for problem in self.problems:
            self.on_notice(problem, True)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()
        for server in self.servers.values():
            if not self._may_start(server):
                server.status = "untrusted"
            elif self.enabled(server.name):
                self._launch(server)

    def _may_start(self, server: Server) -> bool:
        return not server.spec.project or self.project_trusted

    @property
    def project_servers(self) -> list[ServerSpec]:
        """The servers the project's own files name."""
        return [s.spec for s in self.servers.values() if s.spec.project]

    @property
    def untrusted(self) -> list[ServerSpec]:
        """The project's servers waiting for the user's trust."""
        return [] if self.project_trusted else self.project_servers

    def trust(self, trusted: bool) -> None:
        """The user's answer about the project's servers: yes starts the enabled ones now."""
        self.project_trusted = trusted
        for server in self.servers.values():
            if not server.spec.project:
                continue
            if not trusted:
                self._stop(server)
                server.status, server.tools, server.reason = "untrusted", [], ""
            elif server.status == "untrusted":
                server.status = "off"
                if self.enabled(server.name) and self._loop is not None and not self.closed:
                    self._launch(server)
        self.on_change()

    def _launch(self, server: Server) -> None:
        assert self._loop is not None
        if not self._may_start(server):  # every start goes through here: the one gate
            server.status = "untrusted"
            return
        server.status, server.reason, server.tools = "starting", "", []
        run = server._run = _Run()
        run.future = asyncio.run_coroutine_threadsafe(self._serve(server, run), self._loop)

    def set_enabled(self, name: str, on: bool) -> None:
        """Switch a server on or off for this project (remembered); its tools follow."""
        server = self.servers[name]
        if self.switches is not None:
            self.switches.set(name, on)
        if not self._may_start(server):
            return  # remembered; it starts with the project's trust
        if on and server.status not in ("starting", "ready") and not self.closed:
            self._launch(server)
        elif not on:
            self._stop(server)
            server.status, server.tools, server.reason = "off", [], ""
            self.on_change()

    def _stop(self, server: Server) -> None:
        run = server._run
        if run is None or self._loop is None:
            return
        run.stopping = True

        def wake() -> None:
            if run.starting is not None:
                run.starting.cancel()  # a server stuck in initialize is not waited for
            if run.wake is not None:
                run.wake.set()

        self._loop.call_soon_threadsafe(wake)

    def close(self) -> None:
        """Stop every server and the loop; a server that outstays STOP_TIMEOUT_S is killed
        with the manager's thread (its guard's parent-death signal)."""
        if self.closed:
            return
        self.closed = True
        for server in self.servers.values():
            self._stop(server)
        futures = [s._run.future for s in self.servers.values() if s._run is not None and s._run.future is not None]
        concurrent.futures.wait(futures, timeout=STOP_TIMEOUT_S)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=2)

    # -- what the chat reads ---------------------------------------------------------------

    def tools(self) -> list[McpTool]:
        """The tools of every running, enabled server, in config order (names made unique across
        servers: `a` with `b__c` and `a__b` with `c` would both be `a__b__c`)."""
        with self._lock:
            return _unique([tool for s in self.servers.values() if s.status == "ready" for tool in s.tools])

    def find(self, name: str) -> McpTool | None:
        return next((t for t in self.tools() if t.name == name), None)

    def cost(self, name: str, counter: Callable[[list[dict]], int] | None = None) -> tuple[int, bool]:
        """The tokens a server's tool definitions add to the prompt, and whether they were
        counted with the model's tokenizer (False: estimated). `counter(tools)`: the tokens of
        a prompt with these tool schemas added to the others (the engine's count)."""
        tools = self.servers[name].tools
        if not tools:
            return 0, counter is not None
        if counter is not None:
            with contextlib.suppress(Exception):  # an engine that cannot count: estimate
                return max(0, int(counter([t.schema for t in tools])) - int(counter([]))), True
        return estimate_tokens(definitions_text(tools)), False

    # -- calls -------------------------------------------------------------------------------

    def call(self, name: str, arguments: dict[str, Any], stop: threading.Event | None = None) -> str:
        """Call `server__tool` and wait for its result (as text for the model); `stop` set
        from another thread ends the wait at once."""
        tool = self.find(name)
        if tool is None or self._loop is None:
            return f"error: the MCP tool {name} is not available now (its server stopped or was switched off)"
        server = self.servers[tool.server]
        future = asyncio.run_coroutine_threadsafe(self._call(server, tool.tool, arguments), self._loop)
        while True:
            try:
                return future.result(timeout=0.05)
            except concurrent.futures.TimeoutError:
                if stop is not None and stop.is_set():
                    future.cancel()
                    return "the user stopped the call"

    async def _call(self, server: Server, tool: str, arguments: dict[str, Any]) -> str:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        session = server._session
        if session is None:
            return f"error: the MCP server {server.name} is not running"
        try:
            with anyio.fail_after(self.call_timeout_s):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            return f"error: the MCP server {server.name} did not answer within {self.call_timeout_s:g} s"
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                return f"error: the MCP server {server.name} stopped during the call; its tools are gone"
            return f"error: {exc.error.message}"
        except Exception as exc:
            return f"error: the MCP server {server.name} failed: {type(exc).__name__}: {exc}"[:2000]
        return results.for_model(list(result.content or []), result.structured_content, bool(result.is_error))

    # -- one server --------------------------------------------------------------------------

    def _notice(self, server: Server, text: str, warning: bool = False) -> None:
        self.on_notice(f"MCP {server.name} ({_short(server.spec.source)}): {text}", warning)

    async def _stderr_tail(self, run: _Run, spec: ServerSpec) -> str:
        """The last line the server wrote on stderr (secrets from its config masked), once the
        pipe has drained (a moment at most: a child of the server may still hold it)."""
        tail = run.tail
        if tail is None:
            return ""
        with anyio.move_on_after(0.5):
            while not tail.ended.is_set():
                await asyncio.sleep(0.01)
        return _redact(tail.last_line(), spec)[:300]

    async def _serve(self, server: Server, run: _Run) -> None:
        run.wake = anyio.Event()
        run.starting = anyio.CancelScope()
        try:
            spec = expanded(server.spec, self.environ)
        except ConfigProblem as exc:
            self._fail(server, run, str(exc))
            return
        run.tail = StderrTail() if spec.transport == "stdio" else None
        try:
            await self._session_lifetime(server, run, spec)
        except Exception as exc:  # whatever the SDK or the server did: a notice, never a crash
            leaf = _leaf(exc)
            if isinstance(leaf, ConfigProblem | _Failed):
                self._fail(server, run, str(leaf))
            elif run.http_error:
                self._fail(server, run, f"left out: it answered {run.http_error}")
            elif spec.transport == "http":
                self._fail(server, run, f"left out: {server.spec.url}: {_describe(leaf)}")  # as written: no secret
            else:
                tail = await self._stderr_tail(run, spec)
                self._fail(server, run, f"failed: {_describe(leaf)}" + (f" · it said: {tail}" if tail else ""))
        finally:
            if run.tail is not None:
                run.tail.close()

    async def _session_lifetime(self, server: Server, run: _Run, spec: ServerSpec) -> None:
        from mcp.client.session import ClientSession
        from mcp.shared.message import SessionMessage

        ended = {"eof": False, "garbage": ""}
        deadline = spec.timeout_s or self.start_timeout_s
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport(run, spec))
            if run.tail is not None:
                run.tail.spawned()
            forward_send, forward_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(group.cancel_scope.cancel)
            starting, wake = run.starting, run.wake
            assert starting is not None and wake is not None

            async def forward() -> None:
                # Between the transport and the session: notices the server's end (EOF) and a
                # line that is not JSON-RPC, which the SDK would only log.
                async with forward_send:
                    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        async for item in read:
                            if isinstance(item, Exception):
                                ended["garbage"] = _redact(_garbage(item), spec)
                                break
                            await forward_send.send(item)
                ended["eof"] = True
                starting.cancel()
                wake.set()

            group.start_soon(forward)
            session = await stack.enter_async_context(ClientSession(forward_read, write))
            with starting:
                try:
                    with anyio.fail_after(deadline):
                        init = await session.initialize()
                        listed = await _list_tools(session)
                except TimeoutError:
                    raise _Failed(f"left out: no answer to initialize within {deadline:g} s") from None
            if run.stopping:
                return  # switched off or the chat ends: no notice
            if ended["garbage"]:
                raise _Failed(f"left out: it wrote something that is not MCP on stdout: {ended['garbage']}")
            if ended["eof"]:
                tail = await self._stderr_tail(run, spec)
                raise _Failed("left out: it exited at start" + (f" · it said: {tail}" if tail else ""))
            if server._run is not run:
                return
            self._ready(server, session, init, listed)
            if not run.stopping:
                await wake.wait()
            with self._lock:
                if server._run is run:
                    server._session = None
            if not run.stopping and server._run is run:
                await self._ended(server, run, spec, str(ended["garbage"]))

    def _ready(self, server: Server, session, init, listed) -> None:
        """The server answered: its tools, named for the chat, and what they cost in tokens."""
        tools = [
            McpTool(
                tool_name(server.name, t.name), server.name, t.name, t.description or "", _parameters(t.input_schema)
            )
            for t in listed
        ]
        tools = _unique(tools)
        cost = estimate_tokens(definitions_text(tools))
        self._notice(server, f"ready, {len(tools)} tools (~{cost:,} tokens of definitions; /mcp counts them)")
        with self._lock:
            server._session, server.tools, server.status = session, tools, "ready"
            info = init.server_info
            server.server_info = f"{info.name} {info.version}" if info else ""
        self.on_change()

    async def _ended(self, server: Server, run: _Run, spec: ServerSpec, garbage: str) -> None:
        """A ready server that went away on its own: said, and its tools left out from the next turn."""
        what = f"it wrote something that is not MCP on stdout: {garbage}" if garbage else "the server exited"
        tail = await self._stderr_tail(run, spec)
        reason = what + (f" · it said: {tail}" if tail else "")
        self._notice(server, f"stopped: {reason}; its tools are left out from the next turn", True)
        with self._lock:
            server.status, server.tools, server.reason = "stopped", [], reason
        self.on_change()

    def _fail(self, server: Server, run: _Run, reason: str) -> None:
        if run.stopping or server._run is not run:
            return  # an end that was asked for, or an old run: nothing to say
        # Said first: whoever sees the new state finds the notice already given.
        self._notice(server, reason, True)
        with self._lock:
            server.status, server.reason, server.tools, server._session = "failed", reason, [], None
        self.on_change()

    def _transport(self, run: _Run, spec: ServerSpec):
        if spec.transport == "http":
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = create_mcp_http_client(headers=dict(spec.headers))

            async def note_error(response: Any) -> None:
                # The SDK reports any HTTP error as "Server returned an error response": keep the status.
                if response.status_code >= 400:
                    hint = " (check its headers: a token?)" if response.status_code in (401, 403) else ""
                    run.http_error = f"HTTP {response.status_code}{hint}"

            client.event_hooks["response"].append(note_error)
            return _http(streamable_http_client, client, spec.url)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        command, args = spec.command, list(spec.args)
        if sys.platform.startswith("linux"):
            command, args = sys.executable, ["-I", "-S", str(GUARD), str(os.getpid()), command, *args]
        params = StdioServerParameters(command=command, args=args, env=dict(spec.env), cwd=self.root)
        assert run.tail is not None
        return stdio_client(params, errlog=run.tail.writer)


class _Failed(Exception):
    """A server left out, with the reason for people."""


@contextlib.asynccontextmanager
async def _http(open_client, http_client, url: str):
    async with http_client, open_client(url, http_client=http_client) as streams:
        yield streams


async def _list_tools(session: Any) -> list[Any]:
    from mcp_types import PaginatedRequestParams

    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # a server that pages forever is cut off
        result = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(result.tools)
        cursor = result.next_cursor
        if not cursor:
            break
    return tools


def _unique(tools: list[McpTool]) -> list[McpTool]:
    """Two tools whose names clean to the same `server__tool`: the later gets a number."""
    seen: set[str] = set()
    out = []
    for tool in tools:
        name, n = tool.name, 2
        while name in seen:
            suffix = f"_{n}"
            name, n = tool.name[: MAX_NAME - len(suffix)] + suffix, n + 1
        seen.add(name)
        out.append(
            tool if name == tool.name else McpTool(name, tool.server, tool.tool, tool.description, tool.parameters)
        )
    return out


def _redact(text: str, spec: ServerSpec) -> str:
    """A secret from the config that the server printed never reaches the screen."""
    for value in [*spec.env.values(), *spec.headers.values()]:
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def _garbage(exc: Exception) -> str:
    """What the server wrote instead of a JSON-RPC message, shortened."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except Exception:
        first = None
    if not first:
        return _describe(exc)
    shown = first.get("input")
    shown = shown if isinstance(shown, str) else json.dumps(shown, default=str)
    kind = "not JSON" if first.get("type") == "json_invalid" else "JSON, but not a JSON-RPC message"
    return f"{shown[:80]!r} ({kind})"


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:200] if first else type(exc).__name__


def _short(source: str) -> str:
    return Path(source).name if "/" in source or os.sep in source else source
