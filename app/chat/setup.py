"""A chat assembled once, for the TUI and for headless `-p` alike: the engine (or the first
screen that pulls one), its drafting, the project with its hooks, skills, MCP servers and their
trust, the tuner and the store, as one `ChatSetup`. The command line only parses options into a
`ChatRequest` and hands the setup to the screen (`app/tui/app.py`) or to `app/chat/headless.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from backends.remote_info import shown_url

from ..agent import modes
from ..agent.session import DEFAULT_CHAIN_LIMIT
from ..choices import PermissionMode, Think
from .store import ChatStore

if TYPE_CHECKING:
    from pathlib import Path

    from backends.base import Engine

    from ..agent.command_files import LoadedCommands
    from ..agent.hooks import Hooks
    from ..agent.mcp.manager import McpManager
    from ..agent.mcp.setup import ProjectTrust
    from ..agent.project import Project
    from ..agent.skills import SkillSet
    from ..models.catalog import Catalog
    from ..run.drafting_choice import Drafting
    from ..run.engines import EngineOptions, ModelFiles
    from ..run.first_run_offer import FirstRun
    from ..run.tune_run import Tuner
    from ..settings import Settings


@dataclass
class ChatRequest:
    """What the command line asked of a chat (the engine already chosen by `engine_and_url`)."""

    model: str | None
    draft: str | None
    engine: str  # server, inproc or remote
    options: EngineOptions
    think: Think | None = None
    mode: PermissionMode | None = None
    tools: bool = True
    continue_last: bool = False
    resume: int | None = None


@dataclass
class ChatSetup:
    """Everything a chat runs on. `engine` None: nothing runs yet (`first_run` offers a pull,
    `open_engine` opens what it pulled). `drafting_label` and `thinks` answer for any engine the
    chat holds; `close` ends what the setup opened (MCP servers, engines, the store)."""

    engine: Engine | None
    store: ChatStore
    model: str = ""  # the model's name as the chat shows it
    think: bool = True
    think_given: bool = False  # the command line named a thinking mode (it wins over a saved chat's)
    mode: PermissionMode = modes.DEFAULT_MODE
    mode_given: bool = False
    first_run: FirstRun | None = None
    # A pulled name or a GGUF path -> its engine; None: the model the chat started with again.
    open_engine: Callable[[str | None], Engine] | None = None
    fit_summary: Callable[[], str] | None = None
    project: Project | None = None  # None: a plain chat, no tools
    tools: bool = True  # False: start with the tools off (/tools on switches them on)
    chain_limit: int = DEFAULT_CHAIN_LIMIT
    reply_limit: int = 0
    show_drafts: bool = False
    n_ctx: int | None = None  # the context where the engine cannot say (a remote server)
    open_chat: int | None = None  # --resume
    continue_last: bool = False  # --continue
    mcp: McpManager | None = None  # the project's MCP servers, not started yet
    mcp_trust: ProjectTrust | None = None  # the question about the project's own servers and hooks
    runs_later: list[Path] = field(default_factory=list)  # ProjectParts.runs_later
    model_files: str = ""  # what reopens the model (saved with each new chat)
    commands: LoadedCommands | None = None
    sandbox: bool = True
    drafting_label: Callable[[Engine], str | None] | None = None
    hooks: Hooks | None = None
    skills: SkillSet | None = None
    tuner: Tuner | None = None
    thinks: Callable[[Engine], bool] | None = None
    engines: ChatEngines | None = None  # the engines the setup opened, closed with it

    def close(self) -> None:
        try:
            if self.mcp is not None:
                self.mcp.close()
        finally:
            try:
                if self.engines is not None:
                    self.engines.close()
            finally:
                self.store.close()


@dataclass
class ChatEngines:
    """The engines a chat opened (the one it started with, one per pull), with the drafting
    label each runs with and whether its model has a thinking mode."""

    request: ChatRequest
    settings: Settings
    catalog: Catalog
    opened: list[Engine] = field(default_factory=list)
    labels: dict[int, str | None] = field(default_factory=dict)
    thinking: dict[int, bool] = field(default_factory=dict)  # per engine a pull opened

    def add(self, engine: Engine, label: str | None) -> Engine:
        self.opened.append(engine)
        if label is not None:
            self.labels[id(engine)] = label
        return engine

    def files_of(self, chosen: str | None) -> tuple[ModelFiles, str | None]:
        """The files a name the first screen pulled stands for (no --draft then); None: the
        chat's own start, with its --draft."""
        from ..run.engines import resolve_files

        if chosen:
            return resolve_files(chosen, None, self.catalog, self.settings), None
        request = self.request
        return resolve_files(request.model, request.draft, self.catalog, self.settings), request.draft

    def open_after_pull(self, chosen: str | None) -> Engine:
        from ..run.drafting_choice import drafting_for, with_drafting
        from ..run.engines import open_engine
        from ..run.think_default import model_has_thinking

        files, drafted = self.files_of(chosen)
        after = drafting_for(files, drafted, self.request.engine, self.settings)
        engine = open_engine(after.files, with_drafting(self.request.options, after), self.settings)
        self.add(engine, after.label)
        if after.files.target is not None:
            self.thinking[id(engine)] = model_has_thinking(after.files.target)
        return engine

    def drafting_label(self, engine: Engine) -> str | None:
        return self.labels.get(id(engine))

    def thinks(self, engine: Engine) -> bool:
        return self.thinking.get(id(engine), True)

    def close(self) -> None:
        for engine in self.opened:
            engine.close()


@dataclass
class ChatTuning:
    """/tune and its once-only offer on the model the chat runs, and /fit's summary."""

    engines: ChatEngines
    ctx: int
    files: ModelFiles | None  # what the chat started with (None: the first screen's pull)

    def offer(self, chosen: str | None):
        from ..run.tune_run import offer

        files, drafted = self.engines.files_of(chosen)
        return offer(files, self.engines.request.engine, self.engines.settings) if drafted is None else None

    def run(self, chosen: str | None, progress):
        from ..errors import UsageError
        from ..run.tune_run import tune_and_save

        files, drafted = self.engines.files_of(chosen)
        if drafted is not None:
            raise UsageError(
                "this chat was started with --draft, which a tune's pick never overrides",
                "start the chat without --draft, or run `dspine tune` from the shell",
            )
        return tune_and_save(files, self.engines.request.engine, self.engines.settings, progress)

    def fit_summary(self) -> str:
        from ..fit.service import FitRequest
        from ..fit.service import fit as fit_model

        files = self.files
        target = files.target if files and files.target else None
        drafter = files.drafter if files and files.drafter else "none"
        request = FitRequest(str(target) if target else None, draft=str(drafter), ctx=self.ctx)
        plan = fit_model(request, self.engines.catalog, self.engines.settings).plan
        head = f"{plan.total / 2**20:,.0f} MiB of {plan.budget / 2**20:,.0f} MiB at context {plan.n_ctx:,}"
        memory = "\n".join(f"- {k.replace('_', ' ')}: {v / 2**20:,.0f} MiB" for k, v in plan.memory.items())
        return head + "\n\n" + memory + "\n\n" + "\n".join(f"- {r}" for r in plan.reasons)


@dataclass
class Started:
    """The model a chat starts with: its files (None: the first screen pulls one), how it
    drafts, its engine once open, and the thinking mode it starts in."""

    files: ModelFiles | None
    drafting: Drafting | None
    think: bool
    first_run: FirstRun | None = None
    engine: Engine | None = None


@dataclass
class Tell:
    """What the start says as it goes: `say` for notes (the chat's start prints them; headless
    keeps quiet), `warn` for what the user must hear before the engine opens (both)."""

    say: Callable[[str], None] = lambda text: None
    warn: Callable[[str], None] = lambda text: None
    context_note: Callable[[ModelFiles, int], None] = lambda files, ctx: None  # says the context it opens with


def model_files(request: ChatRequest, settings: Settings, catalog: Catalog, screen: bool):
    """The files the chat starts on, or the first screen where there is nothing to open (on a
    screen: nothing pulled, or a catalog name not pulled yet); headless has no screen to offer a
    pull and says so."""
    from ..errors import UsageError
    from ..hub.store import Manifest
    from ..run.engines import ModelFiles, resolve_files
    from ..run.first_screen import first_run, unpulled_bundle

    model = request.model
    if request.engine == "remote":
        return ModelFiles(model or shown_url(request.options.url or "") or "remote", None, None, None), None
    if model is None and not Manifest(settings.manifest_path).records:
        if not screen:
            raise UsageError(
                "nothing is pulled, and -p has no screen to offer a pull",
                "run `dspine pull smollm2-135m` (or another model) first, or give --model FILE.gguf",
            )
        return None, first_run(settings, catalog)
    if screen and model is not None and unpulled_bundle(model, catalog, settings):
        # A catalog name not pulled yet: the first screen offers its pull (the README's
        # `dspine chat --model smollm2-135m` on a fresh machine), rather than an exit.
        return None, first_run(settings, catalog, model)
    return resolve_files(model, request.draft, catalog, settings), None


def start(request: ChatRequest, settings: Settings, catalog: Catalog, tell: Tell, screen: bool) -> Started:
    """The model opened as the chat starts it: drafting as the policy chooses, thinking off for
    a model without a thinking mode unless the user said otherwise."""
    from ..run.drafting_choice import drafting_for, with_drafting
    from ..run.engines import ModelFiles, open_engine
    from ..run.think_default import starting_think

    files, offered = model_files(request, settings, catalog, screen)
    if files is None:
        return Started(None, None, request.think != "off", first_run=offered)
    drafting = drafting_for(files, request.draft, request.engine, settings)
    options = with_drafting(request.options, drafting)
    if drafting.note:
        tell.say(drafting.note)
    think = request.think != "off"
    if request.think is None and starting_think(None, files.target)[1]:
        think = False
        tell.say(f"{files.label} has no thinking mode: the chat starts with thinking off")
    tell.say(f"starting the {request.engine} engine for {files.label}…")
    if request.engine != "remote":
        tell.context_note(files, options.ctx)
    engine = open_engine(drafting.files, replace(options, think=think), settings, on_warning=tell.warn)
    if request.engine == "remote":  # saved under the model the server serves, not its URL
        from ..terminal_text import controls_shown

        files = ModelFiles(controls_shown(getattr(engine, "model", None) or files.label), None, None, None)
    return Started(files, drafting, think, engine=engine)


@dataclass
class ProjectParts:
    """What the project carries that a chat with tools uses: hooks and skills (the project's
    only once trusted), MCP servers (not started) and the trust question about them."""

    hooks: Hooks | None = None
    skills: SkillSet | None = None
    mcp: McpManager | None = None
    trust: ProjectTrust | None = None
    # The project's files that any hook or MCP server runs, the user's own included (a hook in
    # ~/.claude that runs "$CLAUDE_PROJECT_DIR"/scripts/fmt.sh): asked, read-only to commands.
    runs_later: list[Path] = field(default_factory=list)


def project_parts(project: Project, settings: Settings, tools: bool) -> ProjectParts:
    """--no-tools: no MCP server starts, no hook runs, no skill is offered."""
    if not tools:
        return ProjectParts()
    from ..agent.hooks import for_chat
    from ..agent.mcp.setup import for_project
    from ..agent.skills import discover
    from ..agent.trust import named_by

    hooks = for_chat(project.root, settings.hooks)
    skills = discover(project.root)
    mcp, trust = for_project(
        project.root, settings.mcp_servers, settings.mcp_switches_file, settings.project_trust_file, hooks, skills
    )
    servers = [server.spec for server in mcp.servers.values()] if mcp is not None else []
    return ProjectParts(hooks, skills, mcp, trust, named_by(project.root, servers, hooks.config.hooks))


def assemble(
    request: ChatRequest,
    settings: Settings,
    catalog: Catalog,
    store: ChatStore,
    project: Project,
    tell: Tell,
    screen: bool = True,
) -> ChatSetup:
    """The chat: `screen` True for the TUI (a first screen where nothing is pulled), False for
    headless -p. On a failure everything opened so far is closed, the store included."""
    from ..run.chat_model import remembered

    engines = ChatEngines(request, settings, catalog)
    setup = ChatSetup(None, store, engines=engines)
    try:
        started = start(request, settings, catalog, tell, screen)
        if started.engine is not None:
            engines.add(started.engine, started.drafting.label if started.drafting else None)
        parts = project_parts(project, settings, request.tools)
    except BaseException:
        setup.close()
        raise
    files = started.files
    tuning = ChatTuning(engines, request.options.ctx, files)
    setup.engine = started.engine
    setup.model = files.label if files else ""
    setup.think, setup.think_given = started.think, request.think is not None
    setup.mode, setup.mode_given = request.mode or modes.DEFAULT_MODE, request.mode is not None
    setup.first_run = started.first_run
    setup.open_engine = engines.open_after_pull
    setup.fit_summary = tuning.fit_summary if files and files.target else None
    setup.project, setup.tools = project, request.tools
    setup.chain_limit = max(1, settings.tool_chain_limit)
    setup.reply_limit = settings.max_reply_tokens
    setup.n_ctx = request.options.ctx
    setup.open_chat, setup.continue_last = request.resume, request.continue_last
    setup.hooks, setup.skills, setup.mcp, setup.mcp_trust = parts.hooks, parts.skills, parts.mcp, parts.trust
    setup.runs_later = parts.runs_later
    setup.model_files = remembered(request.model, request.draft, files) if files is not None else ""
    setup.sandbox = settings.sandbox
    setup.drafting_label, setup.thinks = engines.drafting_label, engines.thinks
    if screen:
        from ..agent.command_files import load_for_chat
        from ..run.tune_run import Tuner

        setup.commands = load_for_chat(project.root)  # prompts only: reading them runs nothing
        setup.tuner = Tuner(tuning.offer, tuning.run) if request.engine != "remote" else None
    return setup
