"""`dspine run`: one prompt, one reply, no screen."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from backends.errors import EngineError
from backends.remote_info import shown_url

from ..errors import ConfigError, UsageError
from ..hub.store import Manifest
from ..models.catalog import load_catalog
from ..settings import Settings, load_settings
from ..terminal_text import for_terminal
from .base import (
    ApiKeyOption,
    DraftOption,
    EngineOption,
    ModelOption,
    UrlOption,
    _say_warning,
    app,
    err,
    out,
)
from .run_options import (
    CtxOption,
    FirstArgument,
    JsonOption,
    MaxTokensOption,
    MinPOption,
    NMaxOption,
    PresencePenaltyOption,
    SecondArgument,
    SeedOption,
    TempOption,
    ThinkOption,
    TopKOption,
    TopPOption,
)


@app.command("run")
def run_prompt(
    first: FirstArgument = None,
    second: SecondArgument = None,
    model_option: ModelOption = None,
    draft: DraftOption = None,
    engine: EngineOption = None,
    think: ThinkOption = None,
    temp: TempOption = None,
    top_p: TopPOption = None,
    top_k: TopKOption = None,
    min_p: MinPOption = None,
    presence_penalty: PresencePenaltyOption = None,
    seed: SeedOption = None,
    max_tokens: MaxTokensOption = None,
    n_max: NMaxOption = None,
    ctx: CtxOption = 4096,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send one prompt and stream the reply, then its figures (no TUI)."""
    from rich.markup import escape

    from ..run.drafting_choice import with_drafting
    from ..run.engines import EngineOptions, engine_and_url
    from ..run.inputs import check_lengths, check_prompt, check_sampling, read_stdin, with_piped
    from ..run.think_default import no_thinking_note, starting_think

    check_sampling(temp=temp, top_p=top_p, top_k=top_k, min_p=min_p, presence_penalty=presence_penalty, seed=seed)
    check_lengths(max_tokens=max_tokens, n_max=n_max, ctx=ctx)
    settings = load_settings()
    engine, url = engine_and_url(engine, settings, url)
    model, prompt = _model_and_prompt(
        first, second, model_option, engine == "remote", lambda word: _names_a_model(word, settings)
    )
    prompt = read_stdin() if prompt == "-" else with_piped(prompt)
    check_prompt(prompt, "run", 'give the prompt: `dspine run [MODEL] "PROMPT"` (- reads stdin)')
    files, drafting = _files_and_drafting(model, draft, engine, url, settings, as_json)
    thinking, for_the_model = starting_think(think, files.target)
    if for_the_model and not as_json:
        err.print(f"[dim]{escape(no_thinking_note(files.label))}[/]")
    sampling = files.sampling.for_mode(thinking).with_(
        temperature=temp, top_p=top_p, top_k=top_k, min_p=min_p, presence_penalty=presence_penalty, seed=seed,
        max_tokens=max_tokens,
    )  # fmt: skip
    options = EngineOptions(
        engine=engine, ctx=ctx, n_max=n_max, url=url, api_key=api_key, remote_model=model, think=thinking
    )
    if drafting is not None:
        options = with_drafting(options, drafting)
    _answer(files, options, settings, drafting, prompt, sampling, n_max, as_json)


def _answer(
    files, options, settings: Settings, drafting, prompt: str, sampling, n_max: int | None, as_json: bool
) -> None:
    """Open the engine, stream the reply to the prompt (capped as the think mode caps it; the
    user's own --n-max, if any, asked of each step), then print it as JSON or its figures."""
    from backends.reply_guard import cap_for

    from ..run.engines import open_engine

    thinking = options.think
    progress = _start_progress(options.engine, files.label, as_json)
    opened = open_engine(files, options, settings, on_progress=progress, on_warning=_say_warning)
    cap = cap_for(thinking, settings.max_reply_tokens, sampling.max_tokens)
    try:
        messages = [{"role": "user", "content": prompt}]
        text, thoughts, last = _streamed(
            opened, opened.stream(messages, think=thinking, sampling=sampling, n_max=n_max), cap, as_json
        )
    except KeyboardInterrupt:
        opened.cancel()
        raise
    finally:
        opened.close()
    if as_json:
        _print_json(text, thoughts, last, opened.name, files, drafting, thinking)
    else:
        out.print()
        _print_figures(last, opened.name, drafting)


def _files_and_drafting(model, draft, engine: str, url, settings, as_json: bool):
    """The files to run and how they draft (the policy's choice; None on a remote engine)."""
    from rich.markup import escape

    from ..run.drafting_choice import drafting_for
    from ..run.engines import ModelFiles, resolve_files

    if engine == "remote":
        return ModelFiles(model or shown_url(url or "") or "remote", None, None, None), None
    files = resolve_files(model, draft, load_catalog(settings.catalog), settings)
    drafting = drafting_for(files, draft, engine, settings)
    if drafting.note and not as_json:
        err.print(f"[dim]{escape(drafting.note)}[/]")
    return drafting.files, drafting


def _start_progress(engine: str, label: str, as_json: bool):
    """One line while the model loads (the rest is in the log), and the weight repacking notes."""
    from rich.markup import escape

    from ..run.weight_repacking import NOTES as REPACKING_NOTES

    said: list[str] = []

    def progress(line: str) -> None:
        if not as_json and line in REPACKING_NOTES:
            err.print(f"[dim]{line}[/]")
        elif not as_json and not said:
            said.append(line)
            err.print(f"[dim]starting {engine} engine for {escape(label)}…[/]")

    return progress


def _streamed(opened, events, cap: int | None, as_json: bool):
    """The reply as it streams (printed unless --json), stopped at a loop or the cap:
    (answer parts, thinking parts, its End)."""
    from backends.events import Delta, End, Error
    from backends.reply_guard import guarded

    text: list[str] = []
    thoughts: list[str] = []
    last: End | None = None
    for event in guarded(events, opened.cancel, cap):
        if isinstance(event, Delta):
            (thoughts if event.kind == "thinking" else text).append(event.text)
            if not as_json:
                style = "dim" if event.kind == "thinking" else None
                out.print(for_terminal(event.text), style=style, end="", markup=False, highlight=False)
        elif isinstance(event, End):
            last = event
        elif isinstance(event, Error):
            raise EngineError(event.message, event.fix)
    return text, thoughts, last


def _print_json(text, thoughts, last, engine_name: str, files, drafting, thinking: bool) -> None:
    stats = last.stats if last else None
    payload = {
        "text": "".join(text),
        "thinking": "".join(thoughts),
        "finish_reason": last.reason if last else None,
        "finish_note": last.note or None if last else None,
        "stats": {
            **(stats.to_json() if stats else {}),
            "engine": engine_name,
            "drafter": files.drafter_kind,
            "drafting": drafting.label if drafting is not None else None,
            "think": thinking,
        },
    }
    out.print_json(json.dumps(payload))


def _print_figures(last, engine_name: str, drafting) -> None:
    from rich.markup import escape

    if last is not None and last.note:
        err.print(f"[yellow]{escape(last.note)}[/]")
    stats = last.stats if last else None
    if stats:
        how = f"{engine_name}, {drafting.label}" if drafting is not None and drafting.label else engine_name
        err.print(f"[dim]{escape(how)}: {escape(stats.summary())}[/]", soft_wrap=True)


def _model_and_prompt(
    first: str | None,
    second: str | None,
    option: str | None,
    remote: bool = False,
    names_a_model: Callable[[str], bool] = lambda word: False,
) -> tuple[str | None, str]:
    """`run MODEL PROMPT` or `run --model MODEL PROMPT`; `run PROMPT` too, where PROMPT names no
    model: on a remote engine the server's only model, else the model chat and serve take
    without one (None: the default's own rule, app/run/engines.py)."""
    if option is not None and second is not None:
        raise UsageError(f"two models given: {first} and --model {option}", "give one, then the prompt")
    model, prompt = (option, first) if option is not None else (first, second)
    if prompt is None and option is None and first is not None and (remote or not names_a_model(first)):
        model, prompt = None, first
    if prompt is None:
        said = f"run {first} needs a prompt" if first is not None else "run needs a prompt"
        raise UsageError(said, 'write `dspine run [MODEL] "PROMPT"` (- reads stdin)')
    return model, prompt


def _names_a_model(word: str, settings: Settings) -> bool:
    """Whether a lone `run WORD` names a model (a GGUF file, a catalog bundle, a pull) rather
    than asking something: `dspine run smollm2-135m` wants a prompt, not to send the name."""
    if word.lower().endswith(".gguf") or Path(word).is_file():
        return True
    if Manifest(settings.manifest_path).has(word):
        return True
    try:
        load_catalog(settings.catalog).find(word)
    except (UsageError, ConfigError):
        return "/" in word and " " not in word  # ORG/REPO[:QUANT]
    return True
