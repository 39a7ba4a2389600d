"""`dspine chat`: options parsed into a ChatRequest; the chat assembled by app/chat/setup.py runs
on the screen (app/tui/app.py) or headless (app/chat/headless.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import UsageError
from ..models.catalog import load_catalog
from ..settings import load_settings
from ..terminal_text import controls_shown
from .base import (
    ApiKeyOption,
    DraftOption,
    EngineOption,
    ModelOption,
    UrlOption,
    _failed_start,
    _has_terminal,
    _headless_failure,
    _say_warning,
    app,
    err,
)
from .chat_options import (
    AllowOption,
    AllowUnsandboxedOption,
    ContinueOption,
    CtxOption,
    DenyOption,
    ModeOption,
    NoToolsOption,
    OutputFormatOption,
    PrintOption,
    ResumeOption,
    ThinkOption,
)


def _say_context_note(files, ctx: int, settings) -> None:
    note = _context_note(files, ctx, settings)
    if note:
        err.print(note)


def _context_note(files, ctx: int, settings) -> str | None:
    """The context this chat opens with, and how much the fit plan allows on this GPU (where
    there is one): --ctx can take that much."""
    from ..fit.hardware import detect
    from ..fit.service import FitRequest
    from ..fit.service import fit as fit_model

    if files.target is None:
        return None
    try:
        hardware = detect()
        if not hardware.gpus:
            return f"context {ctx:,} tokens (no GPU found: no fit plan to compare with)"
        drafter = str(files.drafter) if files.drafter else "none"
        request = FitRequest(str(files.target), draft=drafter, measure=False)
        plan = fit_model(request, load_catalog(settings.catalog), settings, hardware).plan
    except Exception:  # the note is a help: a plan that cannot be made must not stop the chat
        return None
    if ctx > plan.n_ctx:
        return (
            f"[yellow]notice:[/] context {ctx:,} tokens is more than the fit plan allows on this GPU "
            f"({plan.n_ctx:,}); it may not fit. --ctx {plan.n_ctx} is what fits."
        )
    more = f"; the fit plan allows up to {plan.n_ctx:,} (--ctx {plan.n_ctx})" if plan.n_ctx > ctx else ""
    return f"context {ctx:,} tokens{more}"


@app.command()
def chat(
    model: ModelOption = None,
    draft: DraftOption = None,
    engine: EngineOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    ctx: CtxOption = 8192,
    think: ThinkOption = None,
    mode: ModeOption = None,
    no_tools: NoToolsOption = False,
    continue_last: ContinueOption = False,
    resume: ResumeOption = None,
    print_prompt: PrintOption = None,
    output_format: OutputFormatOption = "text",
    allow: AllowOption = None,
    deny: DenyOption = None,
    allow_unsandboxed: AllowUnsandboxedOption = False,
) -> None:
    """Open the coding chat on the project here: it reads, searches, edits and runs with your consent;
    streaming replies, think / no-think, live tok/s and acceptance."""
    from ..agent.project import open_project
    from ..chat.setup import ChatRequest, Tell, assemble
    from ..run.engines import EngineOptions, engine_and_url
    from ..run.inputs import check_lengths

    form = output_format if print_prompt is not None else "text"
    with _headless_failure(form, model):
        check_lengths(ctx=ctx)
        settings = load_settings()
    from ..agent import child_env

    child_env.configure(settings.env_keep)  # what commands and hooks get of the environment
    catalog = load_catalog(settings.catalog)
    engine, url = engine_and_url(engine, settings, url)
    options = EngineOptions(engine=engine, ctx=ctx, url=url, api_key=api_key, remote_model=model, think=think != "off")
    store = _open_chats(settings, form, model, continue_last, resume)
    project = open_project(Path.cwd())
    if model is None and draft is None and engine != "remote" and (continue_last or resume is not None):
        model, draft = _saved_model(store, resume, str(project.root))
    request = ChatRequest(model, draft, engine, options, think, mode, not no_tools, continue_last, resume)
    if print_prompt is not None:
        from ..chat.headless import HeadlessRequest

        asked = HeadlessRequest(print_prompt, output_format, allow or [], deny or [], allow_unsandboxed)
        raise typer.Exit(_headless(asked, request, settings, catalog, store, project))
    _refuse_headless_flags(store, output_format, allow, deny, allow_unsandboxed)
    tell = Tell(
        say=lambda text: err.print(text, markup=False),
        warn=_say_warning,
        context_note=lambda files, n_ctx: _say_context_note(files, n_ctx, settings),
    )
    setup = assemble(request, settings, catalog, store, project, tell)
    from ..tui.app import ChatApp

    try:
        ChatApp(setup).run()
    finally:
        setup.close()


def _open_chats(settings, form: str, model: str | None, continue_last: bool, resume: int | None):
    """The chats database, opened before the engine (a bad chats_db fails fast), with the chat
    --resume names checked to be there."""
    from ..chat.store import ChatStore

    store = ChatStore(settings.chats_db)
    if store.set_aside is not None:
        err.print(
            f"[yellow]notice:[/] the chats database was damaged; it was set aside as {store.set_aside} "
            "and the chat starts fresh"
        )
    with _headless_failure(form, model):
        if continue_last and resume is not None:
            store.close()
            raise UsageError(
                "--continue and --resume together", "give one: --continue (this project's last chat) or --resume N"
            )
        if resume is not None and store.chat(resume) is None:
            known = ", ".join(str(c.id) for c in store.chats()[:10]) or "none yet"
            store.close()
            raise UsageError(
                f"there is no saved chat {resume}", f"give one of the saved chats ({known}), or leave --resume out"
            )
    return store


def _refuse_headless_flags(store, output_format: str, allow, deny, allow_unsandboxed: bool) -> None:
    """The chat's screen with options only -p reads, or with no terminal to draw on: refused."""
    for_headless = {
        "--output-format": output_format != "text",
        "--allow": bool(allow),
        "--deny": bool(deny),
        "--allow-unsandboxed": allow_unsandboxed,
    }
    said_for_headless = [flag for flag, given in for_headless.items() if given]
    if said_for_headless:
        store.close()
        raise UsageError(
            f"{', '.join(said_for_headless)} only apply to a headless run (-p)",
            'add -p "PROMPT" (- reads standard input), or leave them out for the chat',
        )
    if not _has_terminal():
        store.close()
        raise UsageError(
            "the chat needs a terminal, and standard input or output is not one",
            'for a script or a pipe run it headless: dspine chat -p "PROMPT" (- reads standard input)',
        )


def _headless(asked, request, settings, catalog, store, project) -> int:
    """`dspine chat -p` (app/chat/headless.py); a start that failed is reported here, and for a
    script reading JSON ends in its `result` object."""
    from ..chat.headless import StartFailed, run_headless

    try:
        return run_headless(asked, request, settings, catalog, store, project, warn=_say_warning)
    except StartFailed as failed:
        if asked.form == "text":
            raise failed.error from None
        return _failed_start(failed.error, asked.form, request.model)


def _saved_model(store, resume: int | None, project: str) -> tuple[str | None, str | None]:
    """The --model and --draft a chat being gone on with was made with (None, None: the default)."""
    from rich.markup import escape

    from ..run.chat_model import saved

    chats = [store.chat(resume)] if resume is not None else store.chats(project)[:1]
    if not chats or chats[0] is None:
        return None, None
    found = saved(chats[0].model_files)
    if found is None:
        return None, None
    if found.missing:
        err.print(
            f"[yellow]notice:[/] the chat was made with {escape(controls_shown(found.missing))}, which is gone; "
            "it goes on with the default model (give --model to choose)"
        )
        return None, None
    err.print(f"going on with the model the chat was made with: {escape(controls_shown(found.model or ''))}")
    return found.model, found.draft
