"""An agent session: the loop between the user, the model and the project's tools.

Engine, toolbox, consent and an async `ask` callback go in; events come out through
an async `emit` callback (the chat draws them, a test records them). The session runs
the tool rounds, the chain limit, consent, and the context budget: before every
request the prompt is counted against what the engine holds, and the conversation is
compacted when it would not fit. It never draws anything itself, so it runs the same
under Textual, in a test, or in a benchmark.

Engine streams and tool work run on threads of their own, never on the caller's event
loop: a tool that hangs (a catastrophic regex) leaves the chat responsive, and `stop()`
abandons it (a command's process group is killed).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar

from backends.events import STATS_INTERVAL_S, Delta, End, Error, Event, ToolCall
from backends.reply_guard import cap_for, guarded, without_loop
from backends.sampling import Sampling
from backends.stats import Stats

from ..choices import PermissionMode
from ..terminal_text import for_terminal
from . import apart, modes
from .capture import head_tail, saved_hint
from .changes import APPLIED
from .commands import run_command
from .compaction import Compaction, compact, engine_summariser
from .consent import Consent, shown_command
from .context import Budget, Usage, is_overflow
from .hooks import HookRun, Hooks, claude_input, claude_name
from .paths import ToolRefused
from .records import for_engine
from .toolbox import DECLINED, Done, ProposedCall, ProposedChange, ProposedCommand, Step, Toolbox, parse_arguments

DEFAULT_CHAIN_LIMIT = 10  # tool rounds in one reply before the session asks whether to go on
# A tool result takes at most this share of the context the model has; the rest is saved.
RESULT_SHARE = 0.25
MAX_RESULT_CHARS = 16_000
CHARS_PER_TOKEN = 3
RESULT_OVERHEAD = 64  # tokens a call and its result's framing take in the prompt
MIN_RESULT_TOKENS = 64  # a result is never cut below this: the model needs its first lines
STOPPED = "the user stopped this tool before it finished"

Answer = Literal["yes", "no", "always"]
T = TypeVar("T")


# -- what the session asks and says ------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """Something only the user can answer: a change or command to consent to, or whether to go on."""

    title: str
    body: str
    always_label: str | None = None  # what "always" would cover; None: not offered
    tool: str = ""  # the tool asking ("" for the chain limit)
    command: str = ""  # run_command's command, whole (what a headless rule matches word for word)
    outside_sandbox: bool = False  # the model asked to run it outside a sandbox that would hold it
    # A write to a place that runs code later outside the sandbox (app/agent/guarded.py), and why:
    # asked in every mode, never covered by "always" or a rule.
    guarded: str = ""
    unsandboxed: str = ""  # a command that runs with no sandbox: what the question says of it


@dataclass(frozen=True)
class ReplyStarted:
    pass


@dataclass(frozen=True)
class ReplyEvents:
    events: list[Event]  # a batch of the engine's events, in order


@dataclass(frozen=True)
class ReplyEnded:
    answer: str
    tool_calls: list[ToolCall]
    end: End | None
    error: Error | None


@dataclass(frozen=True)
class ToolStarted:
    call: ToolCall


@dataclass(frozen=True)
class ToolOutput:
    call: ToolCall
    text: str  # streamed command output


def _message_chars(message: dict) -> int:
    """A message's size as sent: its text and the arguments of its tool calls."""
    calls = message.get("tool_calls") or []
    return len(message.get("content") or "") + sum(len(c.get("function", {}).get("arguments") or "") for c in calls)


@dataclass(frozen=True)
class ToolFinished:
    call: ToolCall
    result: str  # what the model gets
    decision: str  # "auto", "yes", "always (this chat)", "accept edits", "no", "stopped", "refused (plan mode)"
    shown: str = ""  # what the user sees beside the result: the diff of a change applied
    unsandboxed: str = ""  # a command that ran outside any sandbox: why (every output form says so)


@dataclass(frozen=True)
class ContextMeter:
    used: int
    available: int
    n_ctx: int
    exact: bool = True


@dataclass(frozen=True)
class Compacted:
    compaction: Compaction
    history: list[dict[str, Any]]  # the model's context now (system prompt apart)
    automatic: bool


@dataclass(frozen=True)
class Notice:
    text: str
    severity: Literal["information", "warning", "error"] = "information"
    # Set where the prompt did not go to the model: too large for the context even after
    # compacting, or kept back by a UserPromptSubmit hook. A headless run ends in an error.
    not_sent: Literal["", "too_large", "model_too_large", "blocked"] = ""


SessionEvent = (
    ReplyStarted
    | ReplyEvents
    | ReplyEnded
    | ToolStarted
    | ToolOutput
    | ToolFinished
    | ContextMeter
    | Compacted
    | Notice
)
Emit = Callable[[SessionEvent], Awaitable[None]]
Ask = Callable[[Question], Awaitable[Answer]]


class ToolSource(Protocol):
    def sync(self, toolbox: Toolbox) -> str | None: ...  # bring its tools in; what changed, for people


@dataclass
class _Reply:
    """What one reply brought, as the history keeps it."""

    answer: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    end: End | None = None
    error: Error | None = None
    started: bool = False  # something was handed to the view
    overflow: bool = False  # the engine refused the prompt as too long, before any text

    @property
    def stats(self) -> Stats | None:
        return self.end.stats if self.end is not None else None

    def take(self, event: Event) -> None:
        if isinstance(event, Delta) and event.kind == "answer":
            self.answer += for_terminal(event.text)
        elif isinstance(event, ToolCall):
            self.tool_calls.append(event)
        elif isinstance(event, End):
            self.end = event
        elif isinstance(event, Error):
            self.error = event


def _thread(loop: asyncio.AbstractEventLoop, work: Callable[[], T]) -> asyncio.Future[T]:
    """`work` on a daemon thread of its own: a hung tool never holds up the loop, nor the exit."""
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return  # abandoned (stopped)
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def run() -> None:
        value, error = None, None
        try:
            value = work()
        except BaseException as exc:
            error = exc
        # The loop may be gone (the chat closed while abandoned work went on): nobody waits then.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    # The thread runs in a copy of the caller's context, knowing that context for what it hands back.
    caller = contextvars.copy_context()
    context = caller.copy()
    context.run(_loop_context.set, caller)
    threading.Thread(target=lambda: context.run(run), daemon=True, name="dspine-session").start()
    return future


def _emit_from_thread(loop: asyncio.AbstractEventLoop, emit: Emit, event: SessionEvent) -> None:
    """Hand `event` to `emit` on the loop and wait until it is handled (the view keeps up with the
    stream). The task runs in the caller's context as it was when the work began: a UI's context
    variables (Textual's active app) hold there as they do on the loop."""
    context = _loop_context.get()
    handled: concurrent.futures.Future[None] = concurrent.futures.Future()

    def finished(task: asyncio.Task) -> None:
        if task.cancelled():
            handled.cancel()
        elif task.exception() is not None:
            handled.set_exception(task.exception())
        else:
            handled.set_result(None)

    def start() -> None:
        loop.create_task(emit(event)).add_done_callback(finished)  # type: ignore[arg-type]

    loop.call_soon_threadsafe(start, context=context)
    handled.result()


# The loop-side context a worker thread hands its events back into (set by `_thread`).
_loop_context: contextvars.ContextVar[contextvars.Context | None] = contextvars.ContextVar("loop_context", default=None)


MAX_STOP_HOOK_TURNS = 2  # a Stop hook sends the model on at most this often a turn (no endless loop)


def _arguments_for_hooks(arguments: str | dict) -> dict[str, Any]:
    try:
        return parse_arguments(arguments)
    except ToolRefused:  # a call whose arguments do not parse: the hook sees them as text
        return {"raw": str(arguments)}


@dataclass
class _Asked:
    """A step's question, and what sets it apart: the command it runs (its sandbox wrap, where it
    runs outside one), a guarded file it writes."""

    question: Question
    command: str = ""
    wrap: list[str] | None = None  # the sandbox a command runs in
    unsandboxed: str = ""
    guarded: str = ""


class Session:
    def __init__(
        self,
        engine: Any,
        toolbox: Toolbox | None,
        ask: Ask,
        emit: Emit,
        consent: Consent | None = None,
        system: str | Callable[[bool], str] | None = None,
        tools_on: bool = True,
        think: bool = True,
        chain_limit: int = DEFAULT_CHAIN_LIMIT,
        n_ctx: int | None = None,
        history: list[dict[str, Any]] | None = None,
        sampling: Sampling | None = None,
        tool_sources: list[ToolSource] | None = None,
        instructions_file: str | None = None,
        mode: PermissionMode = modes.DEFAULT_MODE,
        hooks: Hooks | None = None,
        vetoed: Callable[[str, str], bool] | None = None,
        reply_limit: int = 0,
    ) -> None:
        """`system`: the system prompt (with AGENTS.md), sent first while tools are on, the same
        bytes every request; or what makes it, asked before the first request whether the
        model's chat template shows the tool list (`fit_system`); `n_ctx`: the context when the
        engine cannot say (a remote server); `sampling`: fixed sampling for every reply (None:
        the engine's preset for the think mode); its max_tokens is the room kept for the reply;
        `tool_sources`: tools from elsewhere (MCP servers), brought into the toolbox at the start
        of each user turn only, so a reply and its tool rounds see one tool list (prefix cache);
        `instructions_file`: the name of the project's instructions file in the system prompt
        (AGENTS.md), for the error when it does not fit; `mode`: the permission mode
        (app/agent/modes.py), which the chat may change between requests: which tools are
        offered, and which calls go through without a question."""
        # One piece: one assignment a field, each with its why.
        self.engine = engine
        self.toolbox = toolbox
        self.ask = ask
        self.emit = emit
        self.consent = consent or Consent()
        self.system_for = system if callable(system) else None
        self.system = system(True) if callable(system) else system
        self.tools_seen = True  # the chat template shows the tool list (asked before the first request)
        self._system_fitted = self.system_for is None
        self.instructions_file = instructions_file
        self.tools_on = tools_on and toolbox is not None
        self.chain_limit = chain_limit
        self.reply_limit = reply_limit  # the max_reply_tokens setting (0: by think mode)
        self.history: list[dict[str, Any]] = list(history or [])
        self.sampling = sampling
        self.budget = Budget(engine, think, n_ctx, sampling.max_tokens if sampling else None)
        self.requests: list[int] = []  # prompt tokens counted for each request (benchmarks, tests)
        self.compactions: list[Compaction] = []
        self._futile: tuple[int, str] | None = None  # the history a compaction could not shrink
        self.tool_sources = list(tool_sources or [])
        self.mode: PermissionMode = mode
        self._start_turn_state()
        self._start_hook_state(hooks, vetoed)

    def _start_turn_state(self) -> None:
        """What a running reply and its tool calls keep (Esc, the meter, the sandbox's word)."""
        self._stop = threading.Event()
        self._stopped = asyncio.Event()
        self._pending_meter: ContextMeter | None = None
        self._round_calls = 1  # tool calls in the round running: they share the results' room
        self._tool_running = False
        self._ran_unsandboxed = ""  # why the command of the tool call running ran with no sandbox
        self._streaming = False

    def _start_hook_state(self, hooks: Hooks | None, vetoed: Callable[[str, str], bool] | None) -> None:
        # The user's hooks and, once the project is trusted, its own (app/agent/hooks.py).
        self.hooks = hooks
        # (tool, command) -> True where the user's own rules refuse it (headless --deny): a
        # hook's "allow" never overrides those.
        self.vetoed = vetoed
        self._started = False  # SessionStart hooks ran (for this chat; again after /new or a compaction)
        self._problems_said = False  # hooks that cannot run were said (once a session)
        # Why SessionStart runs next, as Claude Code names it: startup, resume (a saved chat goes
        # on), clear (/new) or compact; None: startup, or resume when the history is a saved one.
        self._start_source: str | None = None
        self._start_context: list[str] = []  # what they said, until a prompt takes it to the model

    # -- settings the chat changes between turns -------------------------------------------

    @property
    def think(self) -> bool:
        return self.budget.think

    @think.setter
    def think(self, on: bool) -> None:
        self.budget.think = on

    def set_engine(self, engine: Any) -> None:
        self.engine = engine
        self.budget = Budget(engine, self.budget.think, self.budget.n_ctx, self.budget.max_tokens)
        self._system_fitted = self.system_for is None  # another template: asked again

    async def fit_system(self) -> None:
        """A model told of tools its chat template leaves out recites them (SmolLM2 ended its
        first reply with the tool paragraph): its system prompt says nothing of them. Asked once
        before the first request, and after a model switch: every request sends the same bytes."""
        if self._system_fitted or self.system_for is None or not self.tools_on:
            return
        self._system_fitted = True
        told = [{"role": "system", "content": self.system_for(True)}]
        tools = self.tools()
        loop = asyncio.get_running_loop()
        self.tools_seen = not await _thread(loop, lambda: self.budget.tools_unseen(told, tools))
        self.system = self.system_for(self.tools_seen)

    def remake_system(self) -> None:
        """What makes the system prompt has more to say (the project's skills, once trusted)."""
        if self.system_for is not None:
            self.system = self.system_for(self.tools_seen)

    def restore(self, history: list[dict[str, Any]], start_source: str | None = None) -> None:
        """The model's context of a saved chat (compacted as it was). `start_source`: another
        chat now (the list's, `resume`; /new's, `clear`): SessionStart hooks run again for it."""
        self.history = list(history)
        self._futile = None
        if start_source is not None:
            self._restart(start_source)

    @property
    def started(self) -> bool:
        """SessionStart hooks ran for the chat in the session."""
        return self._started

    def _restart(self, source: str) -> None:
        self._started = False
        self._start_source = source

    # -- what the engine is sent ---------------------------------------------------------

    def tools(self) -> list[dict[str, Any]] | None:
        """The tools offered in the mode in force (plan: only those that need no consent)."""
        if not self.tools_on or self.toolbox is None:
            return None
        mode = self.mode
        return self.toolbox.schemas(lambda spec: modes.offered(mode, spec))

    def _system_messages(self) -> list[dict[str, Any]]:
        if self.system is not None and self.tools_on:
            return [{"role": "system", "content": self.system}]
        return []

    def messages(self, history: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """What the engine is sent (and counted): dspine's own records in the history taken off."""
        return self._system_messages() + for_engine(self.history if history is None else history)

    def _count(self, history: list[dict[str, Any]]) -> int:
        return self.budget.count(self.messages(history), self.tools())

    async def usage(self) -> Usage:
        """The breakdown for /context: system prompt + AGENTS.md, tools, history, this turn."""
        last_user = max((i for i, m in enumerate(self.history) if m.get("role") == "user"), default=len(self.history))
        before, turn = self.history[:last_user], self.history[last_user:]
        loop = asyncio.get_running_loop()
        return await _thread(
            loop, lambda: self.budget.usage(self._system_messages(), self.tools(), for_engine(before), for_engine(turn))
        )

    # -- stopping ------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._streaming or self._tool_running

    def stop(self) -> None:
        """Esc: stop the reply streaming, or the tool running (abandoned; a command is killed)."""
        self._stop.set()
        self._stopped.set()
        if self._streaming and self.engine is not None:
            self.engine.cancel()

    # -- a turn --------------------------------------------------------------------------

    async def send(self, text: str) -> None:
        """The user's prompt, then replies and tool rounds until the model stops, the user
        stops it, or the chain limit is declined."""
        if self.mode == "plan" and self.tools_on:
            text = f"{text}\n\n{modes.PLAN_NOTE}"
        if not self._started:
            self._started = True
            if not self._problems_said:
                self._problems_said = True
                for problem in self.hooks.config.problems if self.hooks is not None else []:
                    await self.emit(Notice(problem, "warning"))  # a hook that cannot run is said, once
            source = self._start_source or ("resume" if self.history else "startup")
            self._start_source = None
            # Kept for the first prompt that goes to the model (a hook may keep this one back).
            self._start_context += self._contexts(await self._hooks("SessionStart", {"source": source}))
        prompted = await self._hooks("UserPromptSubmit", {"prompt": text})
        blocked = next((r for r in prompted if r.blocks), None)
        if blocked is not None:
            await self.emit(
                Notice(
                    f"a UserPromptSubmit hook ({blocked.hook.source}) kept this prompt from the model: "
                    f"{blocked.reason or 'no reason given'}",
                    "error",
                    not_sent="blocked",
                )
            )
            return
        context, self._start_context = self._start_context + self._contexts(prompted), []
        if context:
            text = text + "\n\n" + "\n\n".join(context)
        self.history.append({"role": "user", "content": text})
        await self.sync_tools()
        await self.run_turn()

    async def _hooks(self, event: str, fields: dict[str, Any], tool: str | None = None) -> list[HookRun]:
        """The hooks of `event` run off the event loop; their failures are said in the chat."""
        if self.hooks is None:
            return []
        hooks = self.hooks
        payload = {"permission_mode": self.mode, **fields}
        if not hooks.for_event(event, tool):
            return []
        runs = await _thread(asyncio.get_running_loop(), lambda: hooks.fire(event, payload, tool))
        for done in runs:
            if done.failed:
                await self.emit(Notice(done.failed, "warning"))
            elif done.said:  # a formatter's "1 file reformatted": the user sees what a hook did
                await self.emit(Notice(f"{event} hook `{done.hook.command}`: {done.said}"))
        return runs

    @staticmethod
    def _contexts(runs: list[HookRun]) -> list[str]:
        return [f"(from the {r.hook.event} hook `{r.hook.command}`)\n{r.context}" for r in runs if r.context]

    async def sync_tools(self) -> None:
        """Tools from elsewhere, as they are now (between turns); a change is said."""
        if self.toolbox is None:
            return
        for source in self.tool_sources:
            change = source.sync(self.toolbox)
            if change:
                await self.emit(Notice(change))

    async def run_turn(self) -> None:
        """Replies and tool rounds from the history as it stands (after a prompt)."""
        await self.fit_system()
        rounds = 0
        stop_hooks = 0
        while True:
            reply = await self._reply()
            if reply is None or reply.end is None or reply.end.reason in ("cancelled", "loop"):
                return  # a loop ends the turn too: its tool calls and Stop hooks would only go on with it
            if not reply.tool_calls:
                # The model is done: a Stop hook may send it on, with its words (twice at most a turn).
                said = [r for r in await self._hooks("Stop", {"stop_hook_active": stop_hooks > 0}) if r.blocks]
                if not said or stop_hooks >= MAX_STOP_HOOK_TURNS:
                    return
                stop_hooks += 1
                reasons = "\n".join(f"- {r.reason or 'go on'}" for r in said)
                self.history.append({"role": "user", "content": f"A Stop hook asks you to go on:\n{reasons}"})
                await self.emit(Notice(f"a Stop hook sent the model on: {said[0].reason or 'no reason given'}"))
                continue
            if self.toolbox is None:
                return
            self._round_calls = len(reply.tool_calls)
            for call in reply.tool_calls:
                await self._run_tool(call)
            rounds += 1
            if rounds >= self.chain_limit:
                go_on = await self.ask(
                    Question(
                        f"The model has chained {rounds} rounds of tool calls. Go on?",
                        "It may be looping; n stops here and the chat waits for you.",
                    )
                )
                if go_on != "yes":
                    return
                rounds = 0

    async def _reply(self) -> _Reply | None:
        """One request: made to fit first, retried once after a compaction if the engine
        still says it overflowed."""
        for attempt in (1, 2):
            fits = await self._fit(force=attempt == 2)
            if not fits:
                return None
            reply = await self._stream()
            if not reply.overflow:
                self._keep(reply)
                await self._flush_meter()
                return reply
            if reply.error is not None:
                # The context the engine names is the one that holds (a remote server whose size
                # the user guessed): the compaction that follows aims under it.
                self.budget.overflowed(reply.error)
            if attempt == 1:
                await self.emit(
                    Notice("the engine said the prompt does not fit its context: compacting, then trying again")
                )
        error = reply.error.message if reply.error else "the prompt is too long"
        await self.emit(
            Notice(
                f"The engine still refuses the prompt as too long after compacting ({error}). "
                "/compact with a focus, /new for a fresh chat, or a larger --ctx.",
                "error",
                not_sent="too_large",
            )
        )
        return None

    def _keep(self, reply: _Reply) -> None:
        if reply.answer or reply.tool_calls:
            looped = reply.end is not None and reply.end.reason == "loop"
            answer = without_loop(reply.answer) if looped else reply.answer
            message: dict[str, Any] = {"role": "assistant", "content": answer}
            if reply.tool_calls:
                message["tool_calls"] = [call.as_message_part() for call in reply.tool_calls]
            self.history.append(message)
        self.budget.reported(reply.stats)
        if reply.stats is not None:
            used = reply.stats.prompt_tokens + reply.stats.prompt_cached + reply.stats.generated_tokens
            if used:
                self._meter(used)

    def _meter(self, used: int) -> None:
        self._pending_meter = ContextMeter(used, self.budget.available, self.budget.n_ctx, self.budget.exact)

    async def _flush_meter(self) -> None:
        meter = self._pending_meter
        if meter is not None:
            self._pending_meter = None
            await self.emit(meter)

    async def _fit(self, force: bool = False) -> bool:
        """Count the next request; compact when it would not fit (or `force`). False: it cannot be
        made to fit, and the user was told why."""
        loop = asyncio.get_running_loop()
        counted = await _thread(loop, lambda: self._count(self.history))
        fixed = 0
        if counted > self.budget.available:
            # What every request carries: no compaction of the conversation makes it smaller.
            fixed = await _thread(loop, lambda: self._count([]))
            if fixed >= self.budget.available:
                await self._too_large_system_prompt(fixed)
                return False
        if force or counted > self.budget.available:
            fingerprint = (len(self.history), repr(self.history[-1:]))
            if not force and self._futile == fingerprint:
                pass  # the last compaction of this very history gained nothing: do not loop
            else:
                done = await self._compact(automatic=True, force=force)
                if done is not None and not done.gained:
                    self._futile = fingerprint
                counted = await _thread(loop, lambda: self._count(self.history))
        if counted > self.budget.available:
            if fixed >= counted - fixed:
                await self._too_large_system_prompt(fixed)
                return False
            await self.emit(self._too_large_notice(counted))
            return False
        self.requests.append(counted)
        self.budget.counted_request(counted)
        self._meter(counted)
        await self._flush_meter()
        return True

    def _too_large_notice(self, counted: int) -> Notice:
        """The conversation cannot be made to fit: name the message that is too large, the user's
        or the model's (a tool call it wrote, a tool's result), since the last prompt."""
        since = next((i for i in range(len(self.history) - 1, -1, -1) if self.history[i].get("role") == "user"), 0)
        largest = max(self.history[since:] or [{}], key=_message_chars)
        role = largest.get("role")
        what = {
            "assistant": "the model's reply, with its tool calls,",
            "tool": "a tool's result",
        }.get(str(role), "the newest message")
        return Notice(
            f"The conversation needs {counted:,} tokens but only {self.budget.available:,} are available "
            f"(context {self.budget.n_ctx:,}, {self.budget.reserve:,} kept for the reply), even after "
            f"compacting: {what} ({_message_chars(largest):,} characters) is too large to send. Nothing was "
            "sent. Try /compact with a focus, a shorter message, /new for a fresh chat, or a larger --ctx.",
            "error",
            # The model's own output overflowing is not bad input from the user (headless exits 11).
            not_sent="too_large" if role in (None, "user") else "model_too_large",
        )

    async def _too_large_system_prompt(self, fixed: int) -> None:
        instructions = self.instructions_file
        what = f"The system prompt with {instructions} and the tool list" if instructions else "The tool list"
        shorten = f"Shorten {instructions}, switch" if instructions else "Switch"
        await self.emit(
            Notice(
                f"{what} take {fixed:,} tokens of the "
                f"{self.budget.available:,} available (context {self.budget.n_ctx:,}, {self.budget.reserve:,} kept "
                f"for the reply), leaving {max(self.budget.available - fixed, 0):,} for the conversation: it is "
                "too large for this context. Nothing was sent. "
                f"{shorten} the tools off with /tools off (the system prompt and the tool list go only with "
                "them), or use a larger --ctx.",
                "error",
                not_sent="too_large",
            )
        )

    async def compact(self, focus: str = "") -> Compaction | None:
        """/compact [focus]: summarise the older part now, whatever the budget says."""
        return await self._compact(automatic=False, force=True, focus=focus)

    async def _compact(self, automatic: bool, force: bool, focus: str = "") -> Compaction | None:
        if not self.history:
            return None
        loop = asyncio.get_running_loop()
        summariser = (
            engine_summariser(self.engine, lambda request: (self.messages(request), self.tools()))
            if self.engine is not None
            else None
        )
        history = list(self.history)
        self._stop.clear()
        self._streaming = True  # Esc stops the summary as it would a reply
        try:
            done = await _thread(
                loop,
                lambda: compact(
                    history,
                    self._count,
                    self.budget.target,
                    summariser,
                    self.budget.n_ctx,
                    focus,
                    force,
                    self.budget.available,
                ),
            )
        except Exception as exc:  # counting or summarising broke: the history stays as it was
            await self.emit(Notice(f"compaction failed: {exc}; the conversation is unchanged", "error"))
            return None
        finally:
            self._streaming = False
        if self._stop.is_set():
            await self.emit(Notice("compaction stopped; the conversation is unchanged", "warning"))
            return None
        self.compactions.append(done)
        if not done.gained:
            await self.emit(
                Notice(
                    "Compaction gained nothing: "
                    + (done.note or "what is left is the newest turn, which stays verbatim")
                    + f" ({done.before:,} tokens).",
                    "warning",
                )
            )
            return done
        self.history = done.history
        self._restart("compact")  # what SessionStart hooks added went with the summarised turns
        self._meter(done.after)
        await self.emit(Compacted(done, list(done.history), automatic))
        await self._flush_meter()
        return done

    async def _stream(self) -> _Reply:
        """One reply streamed on a thread; its events handed on in batches (20 a second at most).
        An overflow error before any text is held back: the caller compacts and tries again."""
        loop = asyncio.get_running_loop()
        reply = _Reply()
        messages, tools, think = self.messages(), self.tools(), self.think
        self._stop.clear()

        def deliver(batch: list[Event]) -> None:
            if not batch:
                return
            if not reply.started:
                reply.started = True
                _emit_from_thread(loop, self.emit, ReplyStarted())
            _emit_from_thread(loop, self.emit, ReplyEvents(list(batch)))
            batch.clear()

        def consume() -> None:
            batch: list[Event] = []
            flushed = time.monotonic()
            try:
                extra: dict[str, Any] = {"tools": tools} if tools else {}
                if self.sampling is not None:
                    extra["sampling"] = self.sampling
                # Where a reply ends when the model does not end it: backends/reply_guard.py.
                cap = cap_for(think, self.reply_limit, self.sampling.max_tokens if self.sampling else None)
                events = guarded(self.engine.stream(messages, think=think, **extra), self.engine.cancel, cap)
                for event in events:
                    if isinstance(event, Error) and not reply.started and not batch and is_overflow(event):
                        reply.overflow = True
                        reply.error = event
                        return
                    reply.take(event)
                    batch.append(event)
                    if isinstance(event, (End, Error)) or time.monotonic() - flushed >= STATS_INTERVAL_S:
                        deliver(batch)
                        flushed = time.monotonic()
            except Exception as exc:  # an engine bug must not take the conversation down
                error = Error(f"the engine failed: {exc}", "the conversation is kept; try again")
                reply.take(error)
                batch.append(error)
            deliver(batch)

        self._streaming = True
        try:
            await _thread(loop, consume)
        finally:
            self._streaming = False
        if reply.started:
            await self.emit(ReplyEnded(reply.answer, list(reply.tool_calls), reply.end, reply.error))
        if reply.end is not None and reply.end.note:
            await self.emit(Notice(reply.end.note, "warning"))
        return reply

    # -- tools ---------------------------------------------------------------------------

    async def _until_stopped(self, work: asyncio.Future[T]) -> T | None:
        """`work`'s result, or None when the user stopped it first (it is left to finish alone)."""
        waiter: asyncio.Future[Any] = asyncio.ensure_future(self._stopped.wait())
        try:
            done, _ = await asyncio.wait([work, waiter], return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if work in done:
            return work.result()
        work.cancel()
        return None

    async def _run_tool(self, call: ToolCall) -> None:
        assert self.toolbox is not None
        toolbox = self.toolbox
        loop = asyncio.get_running_loop()
        await self.emit(ToolStarted(call))
        self._stop.clear()
        self._stopped.clear()
        self._tool_running = True
        toolbox.result_chars = self.result_cap()
        self._ran_unsandboxed = ""
        arguments = _arguments_for_hooks(call.arguments)
        hook_fields = {
            "tool_name": claude_name(call.name),
            "dspine_tool_name": call.name,
            "tool_input": claude_input(call.name, arguments),
        }
        before = await self._hooks("PreToolUse", hook_fields, call.name)
        refused = next((r for r in before if r.blocks), None)
        try:
            if refused is not None:
                reason = refused.reason or "no reason given"
                result, decision, saved, shown = (
                    f"blocked by a hook ({refused.hook.source}): {reason}",
                    "blocked by a hook",
                    None,
                    "",
                )
            else:
                allowed = any(r.allows for r in before)
                result, decision, saved, shown = await self._tool_result(call, toolbox, loop, allowed)
        finally:
            self._tool_running = False
        if refused is None:
            after = await self._hooks("PostToolUse", {**hook_fields, "tool_response": result}, call.name)
            feedback = [r.reason for r in after if r.blocks and r.reason]
            if feedback:
                result += "\n\nA PostToolUse hook says:\n" + "\n".join(feedback)
        result = await _thread(loop, lambda: self._fit_result(call, result, saved))
        self.history.append({"role": "tool", "tool_call_id": call.id, "content": result})
        await self.emit(ToolFinished(call, result, decision, shown, self._ran_unsandboxed))

    async def _tool_result(
        self, call: ToolCall, toolbox: Toolbox, loop: asyncio.AbstractEventLoop, allowed: bool = False
    ) -> tuple[str, str, str | None, str]:
        """The result for the model, the user's decision, where a command's whole output was saved,
        and what the user is shown beside the result (an applied change's diff)."""
        spec = toolbox.spec(call.name)
        mode = self.mode  # as the call came: a switch while it is prepared does not change its answer
        if modes.refused(mode, spec):
            return modes.PLAN_REFUSAL, "refused (plan mode)", None, ""  # never prepared: nothing runs
        step = await self._until_stopped(_thread(loop, lambda: self._prepare(toolbox, call)))
        if step is None:
            return STOPPED, "stopped", None, ""
        if isinstance(step, Done):
            return step.result, "auto", None, ""
        asked = await self._question(step, call, toolbox, loop)
        decision = await self._decision(step, call, toolbox, asked, allowed, mode)
        if decision == "no":
            return DECLINED, decision, None, ""
        result, saved, shown = await self._carried_out(step, call, toolbox, loop, asked)
        return result, decision, saved, shown

    async def _question(self, step: Step, call: ToolCall, toolbox: Toolbox, loop) -> _Asked:
        """What the user would be asked before the step runs (a change's diff, a call's words, a
        command and where it runs), and what sets it apart (a guarded file, no sandbox)."""
        if isinstance(step, ProposedChange):
            guarded = step.guarded
            title = f"{step.change.summary}?"
            body = step.change.diff
            if guarded:
                title = f"{step.change.summary}: a file that runs later OUTSIDE the sandbox?"
                body = f"{guarded}: what is written there runs later as you, unsandboxed.\n\n{body}"
            return _Asked(Question(title, body, tool=call.name, guarded=guarded), guarded=guarded)
        if isinstance(step, ProposedCall):
            return _Asked(Question(step.title, step.body, tool=call.name))
        assert isinstance(step, ProposedCommand)
        where, place, wrap = await _thread(loop, lambda: toolbox.command_place(step))
        unsandboxed = place if where == "outside" else ""
        title = f"Run this in {toolbox.root}" + (" OUTSIDE the sandbox?" if where == "outside" else "?")
        question = Question(title, f"{shown_command(step.command)}\n\n{place}", tool=call.name, unsandboxed=unsandboxed)
        return _Asked(question, command=step.command, wrap=wrap, unsandboxed=unsandboxed)

    async def _decision(
        self, step: Step, call: ToolCall, toolbox: Toolbox, asked: _Asked, allowed: bool, mode: PermissionMode
    ) -> str:
        """Whether the step runs: a hook's allow, the mode, a remembered "always", or the
        user's answer (asked here)."""
        command, guarded = asked.command, asked.guarded
        # "Always" never covers a command the model asked to run outside a sandbox that exists.
        left_sandbox = isinstance(step, ProposedCommand) and step.outside and toolbox.sandbox_left(step)
        vetoed = self.vetoed is not None and self.vetoed(call.name, command)
        if allowed and not left_sandbox and not guarded and not vetoed:
            return "allowed by a hook"  # a PreToolUse hook the user has (or a trusted project's)
        if not guarded and not (
            toolbox.needs_consent(call.name) and (left_sandbox or self.consent.must_ask(call.name, command))
        ):
            return "always (this chat)"
        if modes.accepted(mode, toolbox.spec(call.name)) and isinstance(step, ProposedChange) and not guarded:
            return "accept edits"  # the diff is shown in the chat, /undo reverts it
        # A call elsewhere (an MCP server's tool) says itself what "always" covers.
        always = step.always if isinstance(step, ProposedCall) else self.consent.always_label(call.name, command)
        if left_sandbox or guarded:
            always = None
        question = replace(asked.question, always_label=always, command=command, outside_sandbox=left_sandbox)
        answer = await self.ask(question)
        if not left_sandbox and not guarded:
            self.consent.remember(call.name, answer, command)
        return answer

    async def _carried_out(
        self, step: Step, call: ToolCall, toolbox: Toolbox, loop, asked: _Asked
    ) -> tuple[str, str | None, str]:
        """The step done: (the result for the model, where a command's output was saved, the diff shown)."""
        if isinstance(step, ProposedChange):
            change = step.change
            applied = await self._until_stopped(_thread(loop, lambda: toolbox.apply(change)))
            if applied is None:
                return STOPPED, None, ""
            return applied, None, (change.diff if applied.startswith(APPLIED) else "")
        if isinstance(step, ProposedCall):
            self._stop.clear()
            run = step.run
            answered = await self._until_stopped(_thread(loop, lambda: run(self._stop)))
            return (answered if answered is not None else STOPPED), None, ""
        assert isinstance(step, ProposedCommand)
        # A command stops itself when asked (its process group is killed), so it is awaited whole.
        self._stop.clear()
        self._ran_unsandboxed = asked.unsandboxed

        def show(text: str) -> None:
            _emit_from_thread(loop, self.emit, ToolOutput(call, text))

        # The sandbox's binds as the project is now, not as it was when the question was asked.
        wrap = await _thread(loop, toolbox.sandbox_wrap) if asked.wrap is not None else None
        ran = await _thread(
            loop,
            lambda: run_command(toolbox.root, step.command, step.timeout_s, show, self._stop, toolbox.scratch, wrap),
        )
        result = ran.for_model()
        made = await _thread(loop, lambda: toolbox.after_command(sandboxed=wrap is not None))
        if made:
            result += "\n\n" + made
            await self.emit(Notice(made, "warning"))
        return result, ran.saved, ""

    def _prepare(self, toolbox: Toolbox, call: ToolCall) -> Step | None:
        """The call made a Step; a tool that runs apart runs in a child process the user can stop."""
        spec = toolbox.spec(call.name)
        if spec is None or spec.apart is None:
            return toolbox.prepare(call.name, call.arguments)
        try:
            return apart.call(spec.apart, toolbox.root, parse_arguments(call.arguments), self._stop)
        except ToolRefused as exc:
            return Done(f"error: {exc}")
        except apart.Stopped:
            return None
        except RuntimeError as exc:
            return Done(f"error: the tool failed: {exc}")

    def result_cap(self) -> int:
        """Characters one tool result may take at first sight: a share of the context the model has
        (at a few characters a token; `_fit_result` then checks it in the model's own tokens)."""
        return max(500, min(MAX_RESULT_CHARS, int(self.result_tokens() * CHARS_PER_TOKEN)))

    def result_tokens(self) -> int:
        """A round's results share a quarter of the context (a round of many calls, down to a
        sixteenth each), and never more than the room the last request left, so the newest round
        fits beside the rest (older rounds can be compacted; the newest cannot)."""
        calls = min(max(self._round_calls, 1), 4)
        share = self.budget.available * RESULT_SHARE / calls
        if self.requests:
            left = self.budget.available - self.requests[-1] - RESULT_OVERHEAD * self._round_calls
            share = min(share, max(left, 0) * 0.8 / max(self._round_calls, 1))
        return max(int(share), MIN_RESULT_TOKENS)

    def _fit_result(self, call: ToolCall, result: str, saved: str | None) -> str:
        """A result over its cap keeps its head and tail (a test run's summary is at its end). A
        command's whole output was saved as it streamed; a read points back at its file; anything
        else is saved now, for read_file. The cap is checked in the model's tokens: a vocabulary
        that spends a token a byte gets fewer characters."""
        if self.toolbox is None:
            return result
        toolbox = self.toolbox
        hint: str | None = None

        def cut(limit: int) -> str:
            nonlocal hint, saved
            if hint is None:
                if call.name == "read_file":
                    hint = "read the lines you need with read_file start_line and end_line"
                else:
                    if saved is None:
                        try:
                            saved = toolbox.scratch.shown(toolbox.scratch.save(call.name, result))
                        except OSError:
                            saved = None
                    hint = saved_hint(saved)
            return head_tail(result, limit, hint)

        room = self.result_tokens()
        text = result if len(result) <= self.result_cap() else cut(self.result_cap())
        tokens = self.budget.count([{"role": "tool", "content": text}])
        if tokens > room:
            text = cut(max(200, int(len(text) * room / tokens * 0.95)))
        return text
