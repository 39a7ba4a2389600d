"""The chat app. Streaming (the engine, in a worker thread), the reply (a
Reply model), storage (ChatStore) and rendering (the widgets) are kept apart:
the worker batches events, the Reply takes them, the view draws what it took
and the store saves the Reply as it grows."""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import date
from pathlib import Path
from typing import Any, ClassVar, Literal

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.widgets import Footer, Header

from backends.base import Engine
from backends.events import Delta, End, Error, Event, StatsUpdate
from backends.stats import Stats

from ..agent import modes
from ..agent.changes import Change
from ..agent.consent import Consent
from ..agent.context import TOOLS_UNSEEN_NOTE
from ..agent.mcp.tools import McpTools
from ..agent.mcp.view import describe as describe_mcp
from ..agent.paths import ToolRefused
from ..agent.project import system_prompt
from ..agent.session import (
    Answer,
    Compacted,
    ContextMeter,
    Notice,
    Question,
    ReplyEnded,
    ReplyEvents,
    ReplyStarted,
    Session,
    SessionEvent,
    ToolFinished,
    ToolOutput,
    ToolStarted,
)
from ..agent.skills import skill_tool
from ..agent.todos import from_json, to_json
from ..agent.toolbox import Toolbox
from ..chat.setup import ChatSetup
from ..chat.store import Chat, ChatStore
from ..choices import PermissionMode
from ..errors import ERRORS_FOR_PEOPLE
from ..fit.hardware import detect
from ..run.tune_run import TuneProgress
from ..terminal_text import for_terminal, one_line
from .attachments import AttachmentError, expand_mentions
from .custom_slash import with_custom
from .diff_note import diff_note
from .figures import final_line, stats_from
from .full_gc import FullCollections
from .reply import Reply
from .rewinding import record, rewind
from .screens.chat_list import ChatList
from .screens.consent import ConsentScreen
from .screens.first_run import FirstRunScreen, OpenFile
from .slash_commands import SlashCommand, by_name, help_markdown
from .tuning import failed_note, offer_note, outcome_note, progress_line, started_note
from .type_ahead import TypeAhead
from .widgets.compaction_note import CompactionNote, note_title, saved_note_title
from .widgets.conversation import Conversation
from .widgets.message_view import MessageView
from .widgets.prompt_area import PromptArea
from .widgets.readout import Readout
from .widgets.todo_list import TodoList
from .widgets.tool_line import ToolLine

SAVE_S = 0.25  # save a growing reply this often (and always at its end)
DOUBLE_ESCAPE_S = 0.5  # Esc twice within this long, with nothing running: /rewind
MODE_SAYS: dict[PermissionMode, str] = {
    "ask": "edits, writes, commands and MCP calls ask",
    "accept-edits": "edits and writes in the project apply without asking; commands and MCP calls ask",
    "plan": "only reading tools: the model answers with a plan; /plan accept goes ahead",
}
PLAN_DONE = (
    "Plan mode: /plan accept goes ahead with the plan (edits ask), /plan accept edits goes ahead "
    "applying edits without asking; or reply to change the plan"
)
SlashHandler = Callable[["ChatApp", str], Awaitable[None]]  # takes what follows the command


class ChatApp(App):
    CSS_PATH = "chat.tcss"
    TITLE = "dspine"
    BINDINGS = [
        Binding("ctrl+t", "toggle_think", "Think on/off"),
        Binding("escape", "cancel", "Stop reply"),
        Binding("ctrl+n", "new_chat", "New chat"),
        Binding("ctrl+o", "copy_reply", "Copy reply", priority=True),
        Binding("ctrl+l", "chats", "Chats", priority=True),
        Binding("ctrl+g", "toggle_drafts", "Tint drafts", priority=True),
        # Before the screen's own Shift+Tab (focus); not while a question is on screen (check_action).
        Binding("shift+tab", "cycle_mode", "Mode", priority=True),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    def __init__(self, setup: ChatSetup | Engine | None, store: ChatStore | None = None, **fields: Any) -> None:
        """`setup`: the chat as `app/chat/setup.py` assembles it (each field is said there); an
        engine (or None), a store and its fields by name make one here (tests, benchmarks). A saved
        chat opens in the thinking and permission mode it was left in, unless the command line
        named one (`think_given`, `mode_given`)."""
        if not isinstance(setup, ChatSetup):
            if store is None:
                raise TypeError("ChatApp(engine, store, ...) needs a store")
            setup = ChatSetup(setup, store, **fields)
        self._no_notices_held()
        super().__init__()
        self.setup = setup
        self.last_key_at: float | None = None  # when a key was last pressed (on_event)
        self._type_ahead = TypeAhead()  # keys typed before the prompt could take them
        self.engine_problem: str | None = None  # why no model runs, once one failed to start
        self._sent_unattached: set[str] = set()  # command files' prompts sent as written (send_prompt)
        self.tools_unseen: bool | None = None  # whether the template leaves tools out, once counted
        # What drafting an engine was started with when the user did not say (a tune's pick, the
        # no-GPU default): named in the mode line instead of the drafter (app/run/drafting_choice.py).
        self.drafting_label = setup.drafting_label
        self._set_tools(setup)
        self.chain_limit = setup.chain_limit
        self.open_chat = setup.open_chat
        self.continue_last = setup.continue_last
        self._think_given = setup.think_given  # for the first chat shown: the command line's mode wins
        self._think_on_command_line = setup.think_given  # and over a pulled model's lack of a thinking mode
        self._mode_given = setup.mode_given
        # A saved permission mode comes back only where the user asked for that chat (--resume,
        # --continue, the list): a plain start that shows the project's last chat starts in ask,
        # not in an accept-edits left on from another day.
        self._mode_restorable = setup.open_chat is not None or setup.continue_last
        self.session = self._new_session(setup)
        self._live: tuple[Reply, MessageView, int] | None = None  # the reply streaming now
        self._tool_lines: dict[str, ToolLine] = {}
        self.engine = setup.engine
        self.first_run = setup.first_run
        self.open_engine = setup.open_engine
        # What reopens the model running now: the name the first screen pulled or the file it
        # opened; None: the one the chat started with.
        self.engine_model: str | None = None
        self.tuner = setup.tuner
        self.thinks = setup.thinks
        self._think_from_model = False  # set by a pull: the next engine's model decides thinking
        self.tune_progress: TuneProgress | None = None  # while /tune runs
        self.fit_summary = setup.fit_summary
        self.store = setup.store
        self.model = setup.model
        self.model_files = setup.model_files
        self.chat: Chat | None = None
        self.streaming = False
        self.last_end: End | None = None
        self.show_drafts = setup.show_drafts  # tint text that came from accepted draft tokens
        self.full_collections = FullCollections()  # held while a reply streams (lag spikes)
        # The one slash-command table of this chat: the built-ins, then the custom commands.
        commands = setup.commands
        self.slash_commands, clashes = with_custom(self.SLASH_COMMANDS, commands.commands if commands else [])
        self._command_notices = (commands.notices if commands else []) + clashes

    def _no_notices_held(self) -> None:
        """Toasts held while a question is on screen (none may cover it), and those shown lately
        with when they go (they come back after a question that cleared them): none yet."""
        self._questions_live = 0
        self._held_notices: list[tuple[str, dict[str, Any]]] = []
        self._shown_notices: list[tuple[float, tuple[str, dict[str, Any]]]] = []

    def _set_tools(self, setup: ChatSetup) -> None:
        """The project's tools and what comes with them: MCP servers, their trust question,
        skills (none of them without a project)."""
        project = setup.project
        self.project = project
        self.tools_on = project is not None and setup.tools
        # `sandbox`: the user's setting (app/agent/sandbox.py): false runs commands as the user.
        self.toolbox = Toolbox(project.root, sandbox_enabled=setup.sandbox) if project is not None else None
        # The edits and writes the tools applied (told from their worker thread), kept in the
        # store under the prompt they answered once the tool is over: /rewind's records.
        self._applied: list[Change] = []
        if self.toolbox is not None:
            self.toolbox.changes.on_applied = self._applied.append
        self.prompt_id: int | None = None  # the user message the current turn answers
        self._last_escape = 0.0
        self.consent = Consent()
        self.mcp = setup.mcp if self.toolbox is not None else None
        # The question about the project's own servers and hooks (None: it carries neither).
        self.mcp_trust = setup.mcp_trust if self.toolbox is not None else None
        if self.toolbox is not None:
            self.toolbox.guard.name(setup.runs_later)  # what servers and hooks run: asked, read-only
        self.started_without_tools = not setup.tools  # --no-tools: no MCP server starts either
        # Skills: their names and descriptions in the system prompt, read_skill to read one.
        self.skills = setup.skills if self.toolbox is not None and setup.skills is not None else None
        if self.toolbox is not None and self.skills is not None and self.skills.skills:
            self.toolbox.add(skill_tool(self.skills))

    def _new_session(self, setup: ChatSetup) -> Session:
        """The system prompt is made once: the same bytes every request keep the prefix cache
        warm (a yes to the project's trust question adds its skills: once)."""
        project = setup.project
        return Session(
            setup.engine,
            self.toolbox,
            self._ask,
            self._on_session_event,
            consent=self.consent,
            system=self._system_prompt if project is not None else None,
            tools_on=self.tools_on,
            think=setup.think,
            chain_limit=setup.chain_limit,
            reply_limit=setup.reply_limit,
            n_ctx=setup.n_ctx,
            mode=setup.mode,
            tool_sources=[McpTools(self.mcp)] if self.mcp is not None else None,
            hooks=setup.hooks if self.toolbox is not None else None,
            instructions_file=(
                str(project.instructions_file.relative_to(project.root))
                if project is not None and project.instructions_file is not None
                else None
            ),
        )

    def compose(self) -> ComposeResult:
        yield Header()
        yield Conversation(id="conversation")
        yield Readout()
        yield TodoList(id="todos")
        yield PromptArea(id="prompt")
        yield Footer()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A notification, as plain text unless asked: most carry words from elsewhere (a
        command the user typed, a file name, an error), and `[/]` in them is not markup.
        While a question is on screen it waits (a toast would cover the question's end while
        its keys work), and shows once the question is answered."""
        said = (message, {"title": title, "severity": severity, "timeout": timeout, "markup": markup})
        if self._questions_live:
            self._held_notices.append(said)
            return
        self._shown_notices.append((time.monotonic() + (timeout or 5.0), said))
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def _hold_notices(self) -> None:
        """A question comes: the toasts on screen go (to come back after it), none covers it."""
        now = time.monotonic()
        self._held_notices = [said for until, said in self._shown_notices if until > now] + self._held_notices
        self._shown_notices = []
        self._questions_live += 1
        self.clear_notifications()
        # Toasts asked for just before are still on their way (as messages): cleared after them.
        self.call_later(self.clear_notifications)

    async def _toasts_gone(self) -> None:
        """The screen drawn without its toasts before a question goes over it: under a modal
        question the screen beneath still shows as it was last drawn, and a screen in the
        background is not laid out again, so toasts removed after the push stayed drawn."""
        from textual.widgets._toast import ToastRack

        for rack in self.screen.query(ToastRack):
            await rack.remove_children()
        drawn = asyncio.Event()
        self.screen.call_after_refresh(drawn.set)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(drawn.wait(), 1.0)

    def _release_notices(self) -> None:
        self._questions_live -= 1
        if self._questions_live:
            return
        # After the question's screen is gone: shown while it is still on top, they went to its
        # toast rack and left with it.
        self.call_after_refresh(self._show_held_notices)

    def _show_held_notices(self) -> None:
        if self._questions_live:
            return  # another question came first: they wait for it too
        held, self._held_notices = self._held_notices, []
        for message, options in held:
            self.notify(message, **options)

    def action_help_quit(self) -> None:
        """Ctrl+C stops a reply or a tool that runs, as Esc does (what people press first, as in
        a terminal and Claude Code); with nothing running it says how to quit, as Textual's own
        does, but as plain text: Textual's message is markup, which this app's notifications
        show as typed ("Press [b]ctrl+q[/b]")."""
        if self.streaming:
            self.session.stop()
            return
        for key, active in self.active_bindings.items():
            if active.binding.action in ("quit", "app.quit"):
                self.notify(f"Press {key} to quit the app", title="Do you want to quit?")
                return

    async def on_event(self, event: events.Event) -> None:
        # When a key was last pressed anywhere: a question that appears in a pause mid-sentence
        # waits for the keyboard to be quiet counted from here (screens/consent.py).
        if isinstance(event, events.Key):
            self.last_key_at = time.monotonic()
        if self._type_ahead.open and self._typed_ahead(event):
            event.stop()
            return
        await super().on_event(event)

    def _typed_ahead(self, event: events.Event) -> bool:
        """Whether `event` was typed before the prompt could take it (kept for the prompt);
        once the prompt has the focus, or another screen opens over it, the kept text goes in."""
        if not self.screen_stack:  # before the screen exists (its Load, Compose)
            return self._type_ahead.keep(event)
        if not isinstance(self.focused, PromptArea) and len(self.screen_stack) == 1:
            return self._type_ahead.keep(event)
        prompts = self.query(PromptArea)
        typed = self._type_ahead.release()
        if typed and prompts:
            prompts.first().insert(typed)
            if self._type_ahead.enter_pressed:
                self.notify("Typed while the chat opened: kept in the prompt, not sent. Enter sends.")
        return False

    def _show_todos(self, save: bool = False) -> None:
        """The model's todo list above the input; saved with the chat (it outlives compaction
        and comes back with --continue)."""
        todos = self.toolbox.todos if self.toolbox is not None else []
        self.query_one(TodoList).show(todos)
        if save and self.chat is not None:
            self.store.set_todos(self.chat.id, to_json(todos))

    def _subtitle(self) -> str:
        if self.project is None:
            return self.model
        return f"{self.model} · {self.project.root}" + ("" if self.tools_on else " · tools off")

    async def on_mount(self) -> None:
        self.sub_title = self._subtitle()
        self._show_mode()
        if self.project is not None and self.project.instructions_file is not None:
            name = self.project.instructions_file.relative_to(self.project.root)
            self.notify(f"{name} in the system prompt ({self.project.instructions_size:,} bytes)")
        if self.toolbox is not None and self.toolbox.unsafe_root:
            self.notify(
                for_terminal(f"Read-only: {self.toolbox.unsafe_root}."), severity="warning", timeout=30, markup=False
            )
        if self.project is not None and self.project.refused:
            text = f"Not in the system prompt: {self.project.refused}"
            self.notify(for_terminal(text), severity="warning", timeout=20, markup=False)
        for notice in self._command_notices + (self.skills.problems if self.skills is not None else []):
            self.notify(for_terminal(notice), severity="warning", timeout=20, markup=False)
        if self.store.set_aside is not None:
            self.notify(f"The chats database was damaged; it was set aside as {self.store.set_aside}", timeout=30)
        self.chat = self._first_chat()
        await self._show_chat()
        self.query_one(PromptArea).focus()
        self.query_one(Readout).show_state("ready" if self.engine is not None else "no model loaded yet")
        if self.engine is None and self.first_run is not None:
            self.push_screen(FirstRunScreen(self.first_run), self._pulled)
        elif self.engine is not None:
            self._announce_unseen_tools()
            self._offer_tune()
        self._refresh_gpu()
        self.set_interval(2.0, self._refresh_gpu)
        if self.mcp is not None:
            self.mcp.on_notice = self._mcp_notice
            self.mcp.start()  # in the background: the chat is usable now (project servers wait)
        if self.mcp_trust is not None and self.mcp_trust.decision() is None:
            self._ask_trust()

    @work(exclusive=True, group="trust")
    async def _ask_trust(self) -> None:
        """The project's own MCP servers and hooks: they run only if the user says yes to what is shown."""
        assert self.mcp_trust is not None
        asked = self.mcp_trust.question()
        answer = await self.ask(ConsentScreen(asked.title, asked.body, None))
        self.mcp_trust.answer(answer == "yes")
        self.session.remake_system()  # the project's skills, listed or not
        if answer != "yes":
            self.notify("The project's MCP servers and hooks stay off; /mcp trust asks again", timeout=10)

    def _system_prompt(self, tools_seen: bool) -> str:
        """`tools_seen`: the model's chat template shows it the tool list (Session.fit_system)."""
        assert self.project is not None  # a session is given this only with a project
        catalog = self.skills.catalog() if self.skills is not None else ""
        return system_prompt(self.project, tools_seen, date.today().isoformat(), skills=catalog)

    def _project_key(self) -> str:
        return str(self.project.root) if self.project is not None else ""

    def _new_chat(self) -> Chat:
        return self.store.new_chat(model=self.model, project=self._project_key(), model_files=self.model_files)

    def _first_chat(self) -> Chat:
        if self.open_chat is not None:
            chat = self.store.chat(self.open_chat)
            if chat is not None:
                return chat
            self.notify(f"there is no saved chat {self.open_chat}; a new chat starts", severity="warning")
            return self._new_chat()
        # A chat belongs to its project: another project's history never goes to this one's
        # model, nor this one's turns into another's chat (the list can still open any).
        chats = self.store.chats(self._project_key())
        if self.continue_last and not chats:
            self.notify("no saved chat of this project yet; a new chat starts")
        return chats[0] if chats else self._new_chat()

    def on_unmount(self) -> None:
        self.full_collections.release(collect=False)  # the thresholds are the process's, not the app's

    @work(thread=True, exclusive=True, group="gpu")
    def _refresh_gpu(self) -> None:
        gpus = detect().gpus
        used = sum(g.total - g.free for g in gpus) if gpus else None
        total = sum(g.total for g in gpus) if gpus else None
        self.call_from_thread(self._show_gpu, used, total)

    def _show_gpu(self, used: int | None, total: int | None) -> None:
        with contextlib.suppress(NoMatches):  # the app is closing
            self.query_one(Readout).show_gpu(used, total)

    def _pulled(self, result) -> None:
        if result is None:
            return
        if isinstance(result, OpenFile):
            self.model = Path(result.path).name
            self.notify(f"loading {self.model}…")
            chosen = result.path
        else:
            self.model = chosen = result.record.name
            self.notify(f"pulled {self.model}; loading it…")
            self.query_one(Readout).show_state(f"loading {self.model}…")
        self.sub_title = self._subtitle()
        self.engine_model = chosen
        self._think_from_model = not self._think_on_command_line
        self._load_engine(chosen)

    @work(thread=True, exclusive=True, group="engine")
    def _load_engine(self, model: str | None) -> None:
        if self.open_engine is None:
            return
        try:
            engine = self.open_engine(model)
        except ERRORS_FOR_PEOPLE as exc:
            self.call_from_thread(self._engine_failed, model or self.model, exc.cause, exc.fix)  # type: ignore[arg-type]
            return
        self.call_from_thread(self._engine_ready, engine)

    async def _engine_failed(self, model: str, cause: str, fix: str) -> None:
        """A model that cannot start leaves a lasting word in the chat, not a toast that fades
        over a chat that looks ready: what failed, what to do, and that nothing is sent."""
        self.engine_problem = f"{model} did not start: {cause}"
        self.query_one(Readout).show_state(f"no model running: {cause}")
        self.notify(f"{cause} · {fix}", severity="error", timeout=20)
        await self._post_note(
            f"**{model} did not start.**\n\n{cause}\n\n{fix}\n\nNothing you type is sent until a model runs: "
            "your prompt stays in the input."
        )

    @work(thread=True, exclusive=True, group="fit")
    def _show_fit(self) -> None:
        assert self.fit_summary is not None
        try:
            text = self.fit_summary()
        except ERRORS_FOR_PEOPLE as exc:
            text = f"{exc.cause}\n{exc.fix}"
        # mypy cannot solve Textual's `T | Awaitable[T]` for a coroutine function (here and below).
        self.call_from_thread(self._post_note, "**dspine fit**\n\n" + text)  # type: ignore[arg-type]

    async def _post_note(self, text: str) -> None:
        conversation = self.query_one(Conversation)
        await conversation.mount(MessageView("assistant", text))
        conversation.follow(to_the_end=True)

    def _engine_ready(self, engine: Engine) -> None:
        self.engine = engine
        self.engine_problem = None
        if self._think_from_model and self.thinks is not None and self.think and not self.thinks(engine):
            # SmolLM2's template has no thinking mode: "on" would only cost the think preset's sampling.
            self.think = False
            self.notify(f"{self.model} has no thinking mode: thinking is off", markup=False)
        self._think_from_model = False
        self.query_one(Readout).show_state("ready")
        self.session.set_engine(engine)
        self._show_mode()
        self._measure_context()
        self.notify("ready")
        self._announce_unseen_tools()
        self._offer_tune()

    @work(thread=True, exclusive=True, group="tune-offer")
    def _offer_tune(self) -> None:
        """Once per model pair, when it has no fresh tune: the offer, never the tune itself."""
        if self.tuner is None:
            return
        try:
            offer = self.tuner.offer(self.engine_model)
        except ERRORS_FOR_PEOPLE:
            return  # an offer is no reason to bother anyone: `dspine tune` still works
        if offer is not None:
            self.call_from_thread(self._post_note, offer_note(offer))  # type: ignore[arg-type]

    @work(exclusive=True, group="tools-seen")
    async def _announce_unseen_tools(self) -> None:
        """Said at the start, not only under /context: a model whose chat template leaves the
        tool list out answers in prose where a tool call was wanted, and that looks like a bug."""
        if not self.tools_on:
            return
        try:
            usage = await self.session.usage()
        except ERRORS_FOR_PEOPLE:
            return  # the meter says what is wrong with counting; this is only a warning
        self.tools_unseen = usage.tools_unseen
        if usage.tools_unseen:
            # A note in the conversation, not a toast: the toast covered the status line and the
            # /help list for its 30 s, and was gone by the time a reply came out as prose.
            await self._post_note(TOOLS_UNSEEN_NOTE)

    def _show_mode(self) -> None:
        engine = self.engine
        label = self.drafting_label(engine) if engine is not None and self.drafting_label is not None else None
        self.query_one(Readout).set_mode(
            self.think,
            engine.name if engine else None,
            # What drafting runs, as chosen (a tune's pick, the no-GPU default), else the drafter.
            (label or engine.drafter) if engine else None,
            None if label else (engine.drafter_name if engine else None),
            modes.LABELS[self.mode] if self.tools_on else "",
        )

    # -- actions ---------------------------------------------------------------------------

    @property
    def think(self) -> bool:
        return self.session.think

    @think.setter
    def think(self, on: bool) -> None:
        self.session.think = on
        if self.chat is not None:
            self.store.set_think(self.chat.id, on)  # going on with it later goes on in this mode

    @property
    def mode(self) -> PermissionMode:
        """The permission mode: the session decides with it what is offered and what asks."""
        return self.session.mode

    @mode.setter
    def mode(self, mode: PermissionMode) -> None:
        self.session.mode = mode
        if self.chat is not None:
            self.store.set_mode(self.chat.id, mode)  # going on with it later goes on in this mode

    def set_mode(self, mode: PermissionMode) -> None:
        self.mode = mode
        self._show_mode()
        self.notify(f"mode: {modes.LABELS[mode]} ({MODE_SAYS[mode]})")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cycle_mode":
            # Only with tools, and only on the chat itself: a question on screen takes only its own keys.
            return self.tools_on and len(self.screen_stack) == 1
        return True

    def action_cycle_mode(self) -> None:
        self.set_mode(modes.after(self.mode))

    def action_toggle_think(self) -> None:
        if not self.think and self.engine is not None and self.thinks is not None and not self.thinks(self.engine):
            # Its template has no thinking mode: "on" would only sample with the think preset.
            self.notify(f"{self.model or 'this model'} has no thinking mode: thinking stays off", markup=False)
            return
        self.think = not self.think
        self._show_mode()
        self.notify(f"thinking {'on' if self.think else 'off'}")

    async def action_toggle_drafts(self) -> None:
        await self._show_drafts(not self.show_drafts)

    async def _show_drafts(self, on: bool) -> None:
        self.show_drafts = on
        for view in self.query(MessageView):
            await view.show_tint(on)
        self.notify("drafted text tinted" if on else "drafted text not tinted")

    def action_cancel(self) -> None:
        """Esc: the session stops what runs (a reply, a tool); the chat stays as it is. Esc
        twice in a row with nothing running goes back to an earlier prompt (/rewind)."""
        if self.streaming:
            self.session.stop()
            return
        if self.tune_progress is not None:
            self.tune_progress.stop.set()
            self.notify("stopping the tune after the run in progress; nothing is saved")
            return
        now = time.monotonic()
        if now - self._last_escape <= DOUBLE_ESCAPE_S:
            self._last_escape = 0.0
            self._rewind()
        else:
            self._last_escape = now

    @work(exclusive=True, group="rewind")
    async def _rewind(self) -> None:
        await rewind(self)

    @property
    def prompt_area(self) -> PromptArea:
        return self.query_one(PromptArea)

    async def show_chat(self) -> None:
        await self._show_chat()

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        yield SystemCommand("Copy last reply", "Copy the last reply to the clipboard", self.action_copy_reply)
        yield SystemCommand(
            "Copy first code block", "Copy the last reply's first code block", lambda: self.copy_code_block(1)
        )
        yield SystemCommand("Toggle thinking", "Switch think / no-think", self.action_toggle_think)
        yield SystemCommand("New chat", "Start a new chat", self.action_new_chat)
        yield SystemCommand("Tint drafted text", "Show which text the drafter got right", self.action_toggle_drafts)

    def _last_reply(self) -> str:
        replies = [v for v in self.query(MessageView) if v.role == "assistant" and v.answer]
        return replies[-1].answer if replies else ""

    def action_copy_reply(self) -> None:
        text = self._last_reply()
        if text:
            self.copy_to_clipboard(text)
            self.notify(f"copied the last reply ({len(text):,} characters)")

    def copy_code_block(self, number: int) -> None:
        blocks = re.findall(r"```[^\n]*\n(.*?)```", self._last_reply(), re.S)
        if not 1 <= number <= len(blocks):
            self.notify(f"the last reply has {len(blocks)} code blocks", severity="warning")
            return
        self.copy_to_clipboard(blocks[number - 1])
        self.notify(f"copied code block {number}")

    def action_chats(self) -> None:
        if self.streaming:
            return

        async def opened(chat_id: int | None) -> None:
            chats = {c.id: c for c in self.store.chats()}
            if chat_id is not None and chat_id in chats:
                self.chat = chats[chat_id]
            elif self.chat is not None and self.chat.id not in chats:
                self.chat = self._new_chat()  # the open chat was deleted
            else:
                return
            await self._show_chat()

        self.push_screen(ChatList(self.store), opened)

    async def _show_chat(self) -> None:
        """The chat's transcript on screen, and the model's context (compacted as it was) in the session."""
        assert self.chat is not None
        if self.chat.think is not None and not self._think_given and self.chat.think != self.think:
            self.session.think = self.chat.think
            self._show_mode()
        self._think_given = False
        restorable, self._mode_restorable = self._mode_restorable, True
        if self.chat.mode is not None and not self._mode_given and self.chat.mode != self.mode:
            if restorable:
                self.session.mode = self.chat.mode
                self._show_mode()
            else:
                self.notify(
                    f"mode: {modes.LABELS[self.mode]}; this chat was left in {modes.LABELS[self.chat.mode]} "
                    "(Shift+Tab switches; --continue goes on in it)"
                )
        self._mode_given = False
        context = self.store.context(self.chat.id)
        # Another chat opened after one had started: SessionStart hooks run again for it.
        again = ("resume" if context else "clear") if self.session.started else None
        self.session.restore(context, start_source=again)
        if self.toolbox is not None:
            self.toolbox.todos = from_json(self.chat.todos)
            self._show_todos()
        self._measure_context()
        notes: dict[int, list] = {}
        for saved in self.store.compactions(self.chat.id):
            title = saved_note_title(saved.before_tokens, saved.after_tokens)
            notes.setdefault(saved.upto, []).append(CompactionNote(title, saved.summary))
        views: list = notes.pop(0, [])
        for message in self.store.messages(self.chat.id):
            views += self._message_views(message)
            views += notes.pop(message.id, [])
        for rest in notes.values():
            views += rest
        await self.query_one(Conversation).show(views)

    def _measure_context(self) -> None:
        """The meter for the context as it now stands (a chat reopened, a new chat): counted off
        the loop, since the engine's tokenizer may be a server away."""
        self.query_one(Readout).clear_context()
        if self.engine is not None and self.session.history:
            self._count_context(self.chat.id if self.chat is not None else None, len(self.session.history))

    @work(exclusive=True, group="context")
    async def _count_context(self, chat_id: int | None, messages: int) -> None:
        usage = await self.session.usage()
        current = self.chat.id if self.chat is not None else None
        # A turn that began meanwhile shows its own figure: this one is older.
        if current == chat_id and len(self.session.history) == messages and not self.streaming:
            with contextlib.suppress(NoMatches):  # the app is closing
                self.query_one(Readout).show_context(usage.used, usage.available, usage.exact)

    def _message_views(self, message) -> list:
        if message.role == "tool":
            function = (message.tool_calls or [{}])[0].get("function", {})
            return [
                ToolLine(function.get("name", "?"), function.get("arguments", ""), message.content, message.decision)
            ]
        stats = stats_from(message.stats)
        figures = final_line(stats, None if message.complete else "cancelled") if message.role == "assistant" else ""
        return [
            MessageView(
                message.role,
                message.content,
                message.thinking,
                figures,
                drafted=message.drafted,
                tinted=self.show_drafts,
            )
        ]

    async def action_new_chat(self) -> None:
        if self.streaming:
            return
        self.chat = self._new_chat()
        self.session.restore([], start_source="clear")
        self._measure_context()
        await self.query_one(Conversation).remove_children()

    async def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        text = message.text
        if text.startswith("/"):
            await self._command(text)
            return
        if not self._can_send():
            # Nothing typed is lost: the prompt goes back into the input (the notice says why).
            if not self.prompt_area.text.strip():
                self.prompt_area.load_text(text)
                self.prompt_area.move_cursor(self.prompt_area.document.end)
            return
        if text in self._sent_unattached:
            # A command file's prompt coming back (/rewind put it in the input): it was the file's
            # words, sent without attaching, and it still is: its `@~/.ssh/...` attaches nothing.
            await self._send(text)
            return
        try:
            full, attached = expand_mentions(text, Path.cwd())
        except AttachmentError as exc:
            self.notify(str(exc), severity="error")
            return
        for attachment in attached:
            self.notify(f"attached {attachment.path.name} ({attachment.size:,} bytes)")
        await self._send(full)

    def _can_send(self) -> bool:
        if self.streaming:
            self.notify("a reply is still streaming: Esc stops it", severity="warning")
            return False
        if self.engine is None:
            self.notify(self.engine_problem or "no model is loaded yet", severity="warning")
            return False
        return True

    async def send_prompt(self, text: str) -> None:
        """Send `text` as the user's message, exactly (no `@file` is attached): a custom command's prompt."""
        if self._can_send():
            self._sent_unattached.add(text)
            await self._send(text)

    async def _command(self, text: str) -> None:
        parts = text.split(maxsplit=1)
        command, argument = parts[0].lower(), parts[1] if len(parts) > 1 else ""
        slash = self.slash_commands.get(command)
        if slash is None:
            self.notify(f"unknown command {command}; /help lists them", severity="warning")
            return
        await slash.handler(self, argument)

    # -- slash commands: each takes what follows the command ---------------------------------

    async def _slash_think(self, argument: str) -> None:
        self.think = True
        self._show_mode()

    async def _slash_no_think(self, argument: str) -> None:
        self.think = False
        self._show_mode()

    async def _slash_new(self, argument: str) -> None:
        await self.action_new_chat()

    async def _slash_exit(self, argument: str) -> None:
        await self.action_quit()

    async def _slash_quit(self, argument: str) -> None:
        await self.action_quit()

    async def _slash_clear(self, argument: str) -> None:
        await self.query_one(Conversation).remove_children()

    async def _slash_copy(self, argument: str) -> None:
        words = argument.split()
        self.copy_code_block(int(words[0]) if words and words[0].isdigit() else 1)

    async def _slash_export(self, argument: str) -> None:
        assert self.chat is not None
        target = Path(argument).expanduser() if argument else Path.cwd() / f"dspine-chat-{self.chat.id}.md"
        if target.suffix == ".jsonl":  # the prompts format of `dspine bench --prompts`
            target.write_text(self.store.export_prompts([self.chat.id]), encoding="utf-8")
        else:
            target.write_text(self.store.export_markdown(self.chat.id), encoding="utf-8")
        self.notify(f"exported to {target}")

    async def _slash_model(self, argument: str) -> None:
        engine = self.engine
        self.notify(
            f"model {self.model or '-'} · engine {engine.name if engine else '-'} · "
            f"drafter {(engine.drafter_name if engine else None) or 'none'} · thinking {'on' if self.think else 'off'}",
            timeout=10,
            markup=False,  # a model's or a server's name is text: brackets in it are not markup
        )

    async def _slash_fit(self, argument: str) -> None:
        if self.fit_summary is None:
            self.notify("no fit for this chat's model (dspine fit plans it)", severity="warning")
        else:
            self._show_fit()

    async def _slash_tune(self, argument: str) -> None:
        if self.tuner is None:
            self.notify("tune measures an engine on this machine; this chat's model runs elsewhere", severity="warning")
            return
        if self.tune_progress is not None:
            self.notify("a tune is running: Esc stops it", severity="warning")
            return
        if not self._can_send():  # a reply streaming, or no model: the same words as a prompt gets
            return
        assert self.engine is not None
        engine, self.engine = self.engine, None
        self.engine_problem = "the tune is measuring this machine: the model opens again when it ends (Esc stops it)"
        readout = self.query_one(Readout)

        def said(what: str) -> None:
            assert self.tune_progress is not None
            readout.show_state(progress_line(self.tune_progress, what))

        self.tune_progress = TuneProgress(
            on_start=lambda what: self.call_from_thread(said, what),
            on_retry=lambda why: self.call_from_thread(
                self.notify, f"the speeds wandered ({why}): measuring again", markup=False
            ),
        )
        readout.show_state("tuning: closing the model…")
        await self._post_note(started_note(self.model or "the model"))
        self._run_tune(engine, self.tune_progress)

    @work(thread=True, exclusive=True, group="tune")
    def _run_tune(self, engine: Engine, progress: TuneProgress) -> None:
        assert self.tuner is not None
        engine.close()  # before the tune's own engines: one GPU holds one model at a time
        try:
            note = outcome_note(self.tuner.run(self.engine_model, progress))
        except ERRORS_FOR_PEOPLE as exc:
            note = failed_note(exc.cause, exc.fix)
        self.call_from_thread(self._tune_over, note)  # type: ignore[arg-type]

    async def _tune_over(self, note: str) -> None:
        self.tune_progress = None
        await self._post_note(note)
        self.query_one(Readout).show_state(f"loading {self.model}…")
        self._load_engine(self.engine_model)

    async def _slash_undo(self, argument: str) -> None:
        if self.toolbox is None:
            self.notify("this chat has no project tools", severity="warning")
            return
        try:
            self.notify(self.toolbox.changes.undo())
        except ToolRefused as exc:
            self.notify(str(exc), severity="warning")
            return
        if self.chat is not None:
            self.store.drop_last_change(self.chat.id)

    async def _slash_rewind(self, argument: str) -> None:
        self._rewind()

    async def _slash_diff(self, argument: str) -> None:
        if self.toolbox is None:
            self.notify("this chat has no project tools", severity="warning")
            return
        # The chat's records in the store: the same ones /rewind uses, so a resumed chat shows its
        # changes too (and what /undo or /rewind put back is not among them).
        root = self.toolbox.root
        recorded = self.store.changes(self.chat.id) if self.chat is not None else []
        await self._post_note(diff_note(Change(root / c.name, c.name, c.before, c.after) for c in recorded))

    async def _slash_tools(self, argument: str) -> None:
        if self.project is None:
            self.notify("this chat has no project (started with --no-tools)", severity="warning")
            return
        word = argument.strip().lower()
        if word not in ("on", "off"):
            self.notify(f"tools are {'on' if self.tools_on else 'off'}; /tools on or /tools off switches them")
            return
        self.tools_on = self.session.tools_on = word == "on"
        self.sub_title = self._subtitle()
        self._show_mode()
        self.refresh_bindings()
        self.notify(f"tools {word}")

    async def _slash_mode(self, argument: str) -> None:
        if not self.tools_on:
            self.notify("this chat has no project tools (/tools on switches them on)", severity="warning")
            return
        if not argument.strip():
            self.notify(f"mode: {modes.LABELS[self.mode]} ({MODE_SAYS[self.mode]}); Shift+Tab switches", timeout=10)
            return
        mode = modes.parse(argument)
        if mode is None:
            self.notify(
                f"/mode {argument.strip()}: say {', '.join(modes.MODES)}, or nothing to see the mode",
                severity="warning",
                markup=False,
            )
            return
        self.set_mode(mode)

    async def _slash_plan(self, argument: str) -> None:
        if not self.tools_on:
            self.notify("this chat has no project tools (/tools on switches them on)", severity="warning")
            return
        words = argument.lower().split()
        if not words:
            self.set_mode("plan")
            return
        if words[0] != "accept" or words[1:] not in ([], ["edits"]):
            self.notify(
                "/plan switches to plan mode; /plan accept [edits] goes ahead with the plan",
                severity="warning",
                markup=False,
            )
            return
        if self.mode != "plan":
            self.notify("the chat is not in plan mode: nothing to accept (/plan switches to it)", severity="warning")
            return
        if self.streaming:
            self.notify("a reply is still streaming: Esc stops it", severity="warning")
            return
        if self.engine is None:
            self.notify("no model is loaded yet", severity="warning")
            return
        self.set_mode("accept-edits" if words[1:] == ["edits"] else "ask")
        await self._send(modes.GO_AHEAD)

    # -- MCP servers -------------------------------------------------------------------------

    def _mcp_notice(self, text: str, warning: bool) -> None:
        """From the MCP manager's thread, or this one (a switch)."""
        severity: Literal["warning", "information"] = "warning" if warning else "information"
        if threading.get_ident() == self._thread_id:
            self.notify(text, severity=severity, timeout=10, markup=False)
            return
        with contextlib.suppress(RuntimeError):  # the chat is closing
            self.call_from_thread(self.notify, text, severity=severity, timeout=10, markup=False)

    async def _slash_mcp(self, argument: str) -> None:
        words = argument.split()
        if not words:
            self._show_mcp()
            return
        if words == ["trust"]:
            if self.mcp_trust is None:
                self.notify("this project carries no MCP servers or hooks of its own to trust", severity="warning")
            else:
                self._ask_trust()
            return
        if self.mcp is None:
            self.notify("no MCP servers in this chat (none configured, or --no-tools)", severity="warning")
            return
        if words[0] not in ("on", "off") or len(words) != 2 or words[1] not in self.mcp.servers:
            names = ", ".join(self.mcp.servers)
            self.notify(
                f"/mcp lists the servers; /mcp on NAME or /mcp off NAME switches one ({names}); "
                "/mcp trust asks about the project's own servers again",
                severity="warning",
            )
            return
        self.mcp.set_enabled(words[1], words[0] == "on")
        self.notify(f"MCP {words[1]} {words[0]} for this project; its tools change from your next message")

    @work(thread=True, exclusive=True, group="mcp")
    def _show_mcp(self) -> None:
        engine, toolbox = self.engine, self.toolbox
        counter = None
        # Only the server and in-process engines count with the model's tokenizer; a remote
        # engine's count is an estimate, shown as one (~).
        if engine is not None and toolbox is not None and self.session.budget.exact:
            builtin = [spec.schema for spec in toolbox.specs.values() if spec.source == "dspine"]
            probe = [{"role": "user", "content": "."}]

            def counter(tools: list[dict]) -> int:
                assert engine is not None
                return engine.count_tokens(probe, builtin + tools, self.think)

        if self.mcp is None and self.started_without_tools:
            text = "**MCP servers**\n\nNone started: the chat began with --no-tools."
        else:
            text = describe_mcp(self.mcp, counter, self.session.budget.n_ctx or None, self.session.tools_on)
        self.call_from_thread(self._post_note, text)  # type: ignore[arg-type]

    async def _slash_drafts(self, argument: str) -> None:
        word = argument.strip().lower()
        if word not in ("", "on", "off"):
            self.notify(f"/drafts {word}: say on, off, or nothing to switch", severity="warning")
            return
        await self._show_drafts(not self.show_drafts if not word else word == "on")

    async def _slash_help(self, argument: str) -> None:
        await self._post_note(help_markdown(self.slash_commands.values()))

    async def _slash_context(self, argument: str) -> None:
        usage = await self.session.usage()
        self.query_one(Readout).show_context(usage.used, usage.available, usage.exact)
        await self._post_note("**What fills the context**\n\n" + usage.breakdown())

    async def _slash_compact(self, argument: str) -> None:
        if self.streaming:
            self.notify("a reply is still streaming: Esc stops it, then /compact", severity="warning")
            return
        if self.engine is None:
            self.notify("no model is loaded yet", severity="warning")
            return
        if not self.session.history:
            self.notify("nothing to compact yet")
            return
        self.streaming = True
        self._compact(argument.strip())

    @work(exclusive=True, group="session")
    async def _compact(self, focus: str) -> None:
        self.notify("compacting…" + (f" (focus: {focus})" if focus else ""))
        try:
            await self.session.compact(focus)
        finally:
            self._turn_over()

    SLASH_COMMANDS: ClassVar[dict[str, SlashCommand[SlashHandler]]] = by_name(
        [
            SlashCommand("/think", "", "thinking on (with its sampling preset); **Ctrl+T** switches", _slash_think),
            SlashCommand("/no_think", "", "thinking off (with its sampling preset)", _slash_no_think),
            SlashCommand(
                "/drafts", "[on|off]", "tint the text from accepted draft tokens (alone: switch)", _slash_drafts
            ),
            SlashCommand("/copy", "[N]", "copy the N-th code block of the last reply (default the first)", _slash_copy),
            SlashCommand(
                "/export",
                "[FILE]",
                "write the chat as Markdown (`FILE.jsonl`: as prompts for `dspine bench --prompts`)",
                _slash_export,
            ),
            SlashCommand("/model", "", "say what runs: model, engine, drafter, thinking", _slash_model),
            SlashCommand("/fit", "", "show the memory plan for this model on this GPU", _slash_fit),
            SlashCommand(
                "/tune", "", "measure which drafting pays on this machine and use it (the model pauses)", _slash_tune
            ),
            SlashCommand("/undo", "", "revert the last applied edit or write (a created file is removed)", _slash_undo),
            SlashCommand(
                "/rewind",
                "",
                "go back to before an earlier prompt (also Esc Esc): the conversation, the files this chat "
                "changed since, or both; the prompt comes back into the input",
                _slash_rewind,
            ),
            SlashCommand("/diff", "", "everything this chat changed in the project, as a unified diff", _slash_diff),
            SlashCommand("/tools", "[on|off]", "switch the project tools off or on", _slash_tools),
            SlashCommand(
                "/mode",
                "[ask|accept-edits|plan]",
                "show or set the permission mode (**Shift+Tab** cycles): `ask` asks before edits, writes, "
                "commands and MCP calls; `accept-edits` applies edits and writes in the project without asking "
                "(commands and MCP calls still ask); `plan` offers only the reading tools, for a plan",
                _slash_mode,
            ),
            SlashCommand(
                "/plan",
                "[accept [edits]]",
                "switch to plan mode; `/plan accept` goes ahead with the plan in `ask` mode "
                "(`/plan accept edits`: in `accept-edits`), sending “Go ahead with the plan.”",
                _slash_plan,
            ),
            SlashCommand("/context", "", "show what fills the model's context", _slash_context),
            SlashCommand(
                "/compact",
                "[focus]",
                "summarise the older part of the chat now (it also happens by itself before the context "
                "would overflow; the meter in the readout shows how full it is)",
                _slash_compact,
            ),
            SlashCommand(
                "/mcp",
                "[on|off NAME|trust]",
                "list the MCP servers (from `.mcp.json`, `opencode.json`, dspine's settings), their tools and "
                "what their definitions cost in tokens; `/mcp off NAME` / `/mcp on NAME` switches one for this "
                "project; `/mcp trust` asks again whether the project's own servers may start",
                _slash_mcp,
            ),
            SlashCommand("/new", "", "start a new chat (**Ctrl+N**)", _slash_new),
            SlashCommand("/clear", "", "clear the screen", _slash_clear),
            SlashCommand("/help", "", "show this", _slash_help),
            # What people type to leave (Claude Code, Codex, aider): built-ins, so no project's
            # command file can take the name and send a prompt instead.
            SlashCommand("/exit", "", "quit the chat (**Ctrl+Q**)", _slash_exit),
            SlashCommand("/quit", "", "quit the chat (**Ctrl+Q**)", _slash_quit),
        ]
    )

    # -- a turn: the session runs it, the chat draws what it says ----------------------------

    async def _send(self, text: str) -> None:
        assert self.chat is not None
        if not self.store.messages(self.chat.id):
            self.store.rename(self.chat.id, text[:60])
        self.prompt_id = self.store.add_message(self.chat.id, "user", text)
        self.store.set_think(self.chat.id, self.think)
        if self.tools_on:
            self.store.set_mode(self.chat.id, self.mode)
        await self.query_one(Conversation).mount(MessageView("user", text))
        self.streaming = True
        self._turn(text)

    @work(exclusive=True, group="session")
    async def _turn(self, text: str) -> None:
        try:
            await self.session.send(text)
        finally:
            self._turn_over()
        if self.mode == "plan" and self.tools_on:
            self.notify(PLAN_DONE, timeout=20)

    def _turn_over(self) -> None:
        self.streaming = False
        self._live = None
        self._tool_lines.clear()

    async def _ask(self, question: Question) -> Answer:
        return await self.ask(ConsentScreen(question.title, question.body, question.always_label))

    async def ask(self, screen: ConsentScreen) -> Answer:
        """A consent question; what the user was typing as it appeared goes back into the
        message box, where it was going."""
        self._hold_notices()
        try:
            await self._toasts_gone()
            answer = await self.push_screen_wait(screen)
        finally:
            self._release_notices()
        if screen.typed:
            with contextlib.suppress(NoMatches):
                self.prompt_area.insert(screen.typed)
        return answer

    async def _on_session_event(self, event: SessionEvent) -> None:
        """Everything the session says, drawn and saved; nothing here decides what happens next."""
        assert self.chat is not None
        conversation = self.query_one(Conversation)
        if isinstance(event, ReplyStarted):
            reply_id = self.store.add_message(self.chat.id, "assistant", "", complete=False)
            reply = Reply()
            view = MessageView("assistant", live=True, drafted=reply.drafted, tinted=self.show_drafts)
            self._live = (reply, view, reply_id)
            await conversation.mount(view)
            conversation.follow(to_the_end=True)
            self.full_collections.hold()
            self.query_one(Readout).start()
        elif isinstance(event, ReplyEvents) and self._live is not None:
            await self._apply(event.events, *self._live)
        elif isinstance(event, ReplyEnded) and self._live is not None:
            reply, _, reply_id = self._live
            self.store.save_reply(reply_id, reply)
            if reply.tool_calls:
                self.store.set_tool_calls(reply_id, [call.as_message_part() for call in reply.tool_calls])
            # The full collection that waited runs once the reply's last frame is drawn.
            self.call_after_refresh(self.full_collections.release)
            self._live = None
        elif isinstance(event, ToolStarted):
            line = ToolLine(event.call.name, event.call.arguments)
            self._tool_lines[event.call.id] = line
            await conversation.mount(line)
            conversation.follow(to_the_end=True)
        elif isinstance(event, ToolOutput):
            if event.call.id in self._tool_lines:
                self._tool_lines[event.call.id].append(event.text)
        elif isinstance(event, ToolFinished):
            record(self, self._applied)
            finished = self._tool_lines.pop(event.call.id, None)
            if finished is not None:
                finished.finish(event.result, event.decision, event.shown)
            self.store.add_tool_result(self.chat.id, event.call.as_message_part(), event.result, event.decision)
            if event.call.name == "todo_write" and self.toolbox is not None:
                self._show_todos(save=True)
        elif isinstance(event, ContextMeter):
            self.query_one(Readout).show_context(event.used, event.available, event.exact)
        elif isinstance(event, Compacted):
            done = event.compaction
            self.store.save_context(self.chat.id, event.history, done.summary, done.before, done.after)
            title = note_title(done.before, done.after, done.pruned, done.summarised, event.automatic)
            await conversation.mount(CompactionNote(title, done.summary))
            conversation.follow(to_the_end=True)
            if done.note:
                self.notify(done.note, severity="warning", timeout=10)
        elif isinstance(event, Notice):
            self.notify(for_terminal(event.text), severity=event.severity, timeout=20, markup=False)
            if event.severity == "error":
                await self._post_note(event.text)

    async def _apply(self, events: list[Event], reply: Reply, view: MessageView, reply_id: int) -> None:
        """The model takes the batch first; the view draws what it took; the store saves the model."""
        stats: Stats | None = None
        for event in reply.feed(events):
            if isinstance(event, Delta):
                if event.kind == "thinking":
                    await view.add_thinking(event.text)
                else:
                    await view.add_answer(event.text)
            elif isinstance(event, StatsUpdate):
                stats = event.stats
            elif isinstance(event, End):
                stats = event.stats
                self.last_end = event
                await view.finish(reply.figures)
            elif isinstance(event, Error):
                await view.finish(reply.figures)
                self.notify(for_terminal(event.message), severity="error", timeout=10, markup=False)
        if stats is not None:
            self.query_one(Readout).show(stats)
        elif reply.error is not None and reply.stats is None:
            # Nothing came before the error: the readout said "waiting for the first token…" for good.
            self.query_one(Readout).show_state(f"no reply: {one_line(reply.error.message)}")
        if reply.due_for_save(SAVE_S):
            self.store.save_reply(reply_id, reply)
        self.query_one(Conversation).follow()
