"""`dspine chat -p`: the agent session on the project, no screen, on the chat `assemble` builds
(app/chat/setup.py) with the rules of app/agent/headless.py deciding what would ask."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

from backends.errors import BackendError

from ..agent.headless import Decider, Rule, RuleError
from ..agent.headless_output import HeadlessOutput, OutputFormat
from ..agent.session import Compacted, Notice, ReplyEnded, Session, ToolFinished
from ..agent.todos import from_json, to_json
from ..agent.toolbox import Toolbox
from ..errors import ConfigError, DspineError, UsageError
from .setup import ChatRequest, ChatSetup, Tell, assemble
from .store import Chat, ChatStore

if TYPE_CHECKING:
    from ..agent.project import Project
    from ..models.catalog import Catalog
    from ..settings import Settings


class StartFailed(Exception):
    """The run never started (`error` says why): the command line reports it, and for a script
    reading JSON writes the `result` object of a failed start."""

    def __init__(self, error: DspineError | BackendError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class HeadlessRequest:
    """What -p adds to a chat: the prompt, the output form and the rules that answer in place of
    the questions a screen would ask."""

    prompt: str
    form: OutputFormat  # text, json, stream-json
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    allow_unsandboxed: bool = False


def decider(asked: HeadlessRequest, settings: Settings) -> Decider:
    """The command line's rules and the settings' (a deny from either wins)."""
    try:
        rules = Decider([Rule.parse(r) for r in asked.allow], [Rule.parse(r) for r in asked.deny])
        rules.allow_unsandboxed = asked.allow_unsandboxed or not settings.sandbox  # the user said so
    except RuleError as exc:
        raise UsageError(str(exc), "see `dspine chat --help`") from None
    for name, configured, into in (
        ("headless_allow", settings.headless_allow, rules.allow),
        ("headless_deny", settings.headless_deny, rules.deny),
    ):
        try:
            into.extend(Rule.parse(r) for r in configured)
        except RuleError as exc:
            raise ConfigError(f"setting {name}: {exc}", f"fix the rule in {name}") from None
    return rules


def run_headless(
    asked: HeadlessRequest,
    request: ChatRequest,
    settings: Settings,
    catalog: Catalog,
    store: ChatStore,
    project: Project,
    warn=lambda text: None,
) -> int:
    """The run's exit code; StartFailed where it never started. Everything it opened is
    closed when it returns, the store included."""
    from ..run.inputs import check_prompt, read_stdin, with_piped

    try:
        prompt = read_stdin() if asked.prompt == "-" else with_piped(asked.prompt)
        check_prompt(prompt, "-p", "give the prompt after -p, or - and the prompt on standard input")
        rules = decider(asked, settings)
        setup = assemble(request, settings, catalog, store, project, Tell(warn=warn), screen=False)
    except (DspineError, BackendError) as exc:
        store.close()
        raise StartFailed(exc) from None
    except BaseException:
        store.close()
        raise
    try:
        return _run(setup, prompt, rules, HeadlessOutput(asked.form, sys.stdout, sys.stderr, rules))
    finally:
        setup.close()


def _chat_for(setup: ChatSetup, prompt: str) -> Chat:
    """The saved chat -p goes on with (--resume, --continue), else a new one."""
    store, project = setup.store, setup.project
    assert project is not None
    chat = None
    if setup.open_chat is not None:
        chat = store.chat(setup.open_chat)
    elif setup.continue_last:
        chat = next(iter(store.chats(str(project.root))), None)
    if chat is None:
        chat = store.new_chat(title=prompt.strip().splitlines()[0][:60], model=setup.model, project=str(project.root))
    return chat


def _saver(setup: ChatSetup, chat: Chat, output: HeadlessOutput, toolbox: Toolbox | None):
    """Each event emitted, and saved as the chat saves it: --continue and --resume (and the
    chat) go on from here."""
    store = setup.store

    async def emit(event) -> None:
        await output.emit(event)
        if isinstance(event, Compacted):
            store.save_context(chat.id, event.history, event.compaction.summary)
        elif isinstance(event, ReplyEnded):
            reply = store.add_message(chat.id, "assistant", event.answer)
            if event.tool_calls:
                store.set_tool_calls(reply, [c.as_message_part() for c in event.tool_calls])
        elif isinstance(event, ToolFinished):
            store.add_tool_result(chat.id, event.call.as_message_part(), event.result, event.decision)
            if event.call.name == "todo_write" and toolbox is not None:
                store.set_todos(chat.id, to_json(toolbox.todos))

    return emit


def _use_project_parts(setup: ChatSetup, toolbox: Toolbox, output: HeadlessOutput) -> None:
    """A project's hooks and skills are used here only where the user already trusted its files
    as they are now (in the chat): headless never asks, and never assumes."""
    from ..agent.skills import skill_tool

    if toolbox.unsafe_root:
        asyncio.run(output.emit(Notice(f"read-only: {toolbox.unsafe_root}", "warning")))
    toolbox.guard.name(setup.runs_later)  # what servers and hooks run, the user's own too
    if setup.mcp_trust is not None:
        try:
            say_untrusted(setup.mcp_trust, output)
        except DspineError as exc:
            raise StartFailed(exc) from None
    skills = setup.skills
    if skills is not None and skills.skills:
        toolbox.add(skill_tool(skills))
    for problem in skills.problems if skills is not None else []:
        asyncio.run(output.emit(Notice(problem, "warning")))


def _run(setup: ChatSetup, prompt: str, rules: Decider, output: HeadlessOutput) -> int:
    from ..agent.project import system_prompt

    project = setup.project
    assert project is not None and setup.engine is not None
    chat = _chat_for(setup, prompt)
    toolbox = Toolbox(project.root, sandbox_enabled=setup.sandbox) if setup.tools else None
    if toolbox is not None:
        toolbox.todos = from_json(chat.todos)
        output.todos = lambda: toolbox.todos
        _use_project_parts(setup, toolbox, output)
    skills = setup.skills.catalog() if toolbox is not None and setup.skills is not None else ""
    session = Session(
        setup.engine,
        toolbox,
        rules.ask,
        _saver(setup, chat, output, toolbox),
        system=(lambda seen: system_prompt(project, seen, date.today().isoformat(), skills=skills))
        if setup.tools
        else None,
        tools_on=setup.tools,
        think=setup.think,
        chain_limit=setup.chain_limit,
        mode=setup.mode,
        hooks=setup.hooks if toolbox is not None else None,
        vetoed=rules.refuses,
        reply_limit=setup.reply_limit,
    )
    session.restore(setup.store.context(chat.id))
    if setup.tools:
        warn_tools_unseen(session, output)
    setup.store.add_message(chat.id, "user", prompt)
    asyncio.run(session.send(prompt))
    return output.finish(chat.id, setup.model)


def say_untrusted(trust, output: HeadlessOutput) -> None:
    """-p never asks the trust question: what the project carries and did not run is said in every
    output form, and a project trusted before whose files changed stops the run (its guard, a
    PreToolUse hook, would be off)."""
    from ..agent.headless import EXIT_DENIED

    if trust.decision() is True:
        return
    what = ", ".join(trust.not_used())
    if trust.changed_since_yes():
        changed = DspineError(
            f"this project's hooks, MCP servers or skills changed since you trusted them ({what}): "
            "-p does not run without them, nor with them unseen",
            "run `dspine chat` here once to see what changed and answer its question",
        )
        changed.exit_code = EXIT_DENIED
        raise changed
    why = "you declined them" if trust.decision() is False else "you have not trusted this project's files yet"
    output.not_run.extend(f"{thing}: {why}" for thing in trust.not_used())
    text = f"not used: the project's {what} ({why}; `dspine chat` here asks)"
    asyncio.run(output.emit(Notice(text, "warning")))


def warn_tools_unseen(session: Session, output: HeadlessOutput) -> None:
    """As the chat's screen does: a model whose template leaves the tool list out can only chat,
    and says nothing of it (asked about a file, it makes one up)."""
    from ..agent.context import TOOLS_UNSEEN_NOTE

    try:
        asyncio.run(session.fit_system())  # what the first request would ask: asked once, here
    except (DspineError, BackendError):
        return  # counting failed: the reply itself says what is wrong
    if not session.tools_seen:
        asyncio.run(output.emit(Notice(TOOLS_UNSEEN_NOTE, "warning")))
