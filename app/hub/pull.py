"""`dspine pull`: resolve a name to files, check the disk, fetch, verify, record.

    catalog/repo ref -> hub listing -> chosen files -> plan (what is already
    here, what is in the HF cache, what to fetch) -> disk check -> fetch each
    file (resumable, verified) -> manifest

A drafter published only as safetensors (catalog `source = "safetensors"`) is pulled
as its checkpoint (role "source"), then converted on this machine to one GGUF (role
"drafter", convert_run.py); the checkpoint is deleted once the GGUF is whole, unless
the user keeps it. A kill during the conversion leaves the checkpoint and `.part`
files only: the next pull converts again without fetching anything.

The hub client and the downloader (huggingface_hub, httpx2: a fifth of a second
to import) are imported when a pull runs, so that naming what to pull and
drawing its progress cost nothing to commands that never reach the hub.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DspineError, NetworkError, NotFoundError, UsageError
from ..models.catalog import Catalog, Drafter, parse_repo_ref
from ..models.selection import RemoteFile, select_by_glob, select_by_quant, select_checkpoint
from ..settings import Settings
from ..units import format_bytes
from .locks import held, lock_path
from .orphans import left_behind
from .pull_plan import Conversion, PlannedFile, PullProgress, PullResult, Request, check_disk, fetch_planned
from .store import (
    UNWRITABLE_ERRNOS,
    Manifest,
    PullRecord,
    StoredFile,
    check_writable,
    converted_path,
    find_in_hf_cache,
    listing_from_hf_cache,
    local_path,
    partial_bytes,
    record_status,
    unwritable,
)

if TYPE_CHECKING:
    from .convert_run import Converted
    from .download import FetchReport


def make_request(
    spec: str, catalog: Catalog, quant: str | None, drafter: str | None, keep_sources: bool = False
) -> Request:
    ref = parse_repo_ref(spec)
    if ref is not None:
        if drafter is not None:
            raise UsageError(
                "--draft only applies to catalog bundles",
                f"pull the drafter's repository on its own: dspine pull ORG/REPO:QUANT (and {ref.repo} as you did)",
            )
        if quant and ref.quant and quant.lower() != ref.quant.lower():
            raise UsageError(f"two quants given: {ref.quant} in the name and {quant} in --quant", "give one")
        chosen = quant or ref.quant
        name = f"{ref.repo}:{chosen}" if chosen else ref.repo
        return Request(name, "repo", chosen, ref.repo, None, None)
    bundle = catalog.find(spec)
    quant_name, pattern = bundle.quant_pattern(quant)
    chosen_drafter = bundle.drafter(drafter)
    notes = [n for n in (bundle.note, chosen_drafter.note if chosen_drafter else "") if n]
    if chosen_drafter and chosen_drafter.builtin:
        notes.append(f"drafter {chosen_drafter.variant} is built into the target file: nothing more to download")
    if keep_sources and not (chosen_drafter and chosen_drafter.converted):
        raise UsageError(
            "--keep-safetensors only applies to a drafter converted from safetensors",
            f"leave it out; drafters converted on this machine: {', '.join(_converted(bundle.drafters)) or 'none'}",
        )
    if bundle.index is not None:
        return Request(bundle.name, "index", quant_name, "", None, chosen_drafter, tuple(notes), index=bundle.index)
    return Request(
        bundle.name,
        "catalog",
        quant_name,
        bundle.target_repo,
        pattern,
        chosen_drafter,
        tuple(notes),
        shape=bundle.shape,
        size=bundle.sizes.get(quant_name),
        keep_sources=keep_sources,
    )


def _converted(drafters: dict[str, Drafter]) -> list[str]:
    return [name for name, d in drafters.items() if d.converted]


def _choose_files(request: Request) -> list[tuple[str, RemoteFile]]:
    from . import client as hub

    listings: dict[str, list[RemoteFile]] = {}

    def listing(repo: str) -> list[RemoteFile]:
        if repo not in listings:
            if hub.is_offline() and (cached := listing_from_hf_cache(repo)):
                listings[repo] = cached
            else:
                listings[repo] = hub.list_files(repo)
        return listings[repo]

    try:
        target_listing = listing(request.target_repo)
        if request.target_pattern is None:
            targets = select_by_quant(request.target_repo, target_listing, request.quant)
        else:
            targets = select_by_glob(request.target_repo, target_listing, request.target_pattern)
        chosen = [("target", f) for f in targets]
        drafter = request.drafter
        if drafter is not None and not drafter.builtin:
            assert drafter.repo is not None and drafter.pattern is not None
            if drafter.converted:
                chosen += [
                    ("source", f) for f in select_checkpoint(drafter.repo, listing(drafter.repo), drafter.pattern)
                ]
            else:
                chosen += [("drafter", f) for f in select_by_glob(drafter.repo, listing(drafter.repo), drafter.pattern)]
    except NotFoundError as exc:
        if hub.is_offline():
            raise NetworkError(
                f"offline mode is on (HF_HUB_OFFLINE) and your HF cache lacks it: {exc.cause}",
                "unset HF_HUB_OFFLINE to download it",
            ) from exc
        raise
    return chosen


def _plan(chosen: list[tuple[str, RemoteFile]], models_dir: Path) -> list[PlannedFile]:
    planned = []
    for role, remote in chosen:
        final = local_path(models_dir, remote)
        if final.exists() and final.stat().st_size == remote.size:
            planned.append(PlannedFile(role, remote, final, "present"))
        elif (cached := find_in_hf_cache(remote)) is not None:
            planned.append(PlannedFile(role, remote, cached, "hf-cache"))
        else:
            planned.append(PlannedFile(role, remote, final, "fetch", partial_bytes(final)))
    return planned


def _conversion(
    request: Request, chosen: list[tuple[str, RemoteFile]], manifest: Manifest, models_dir: Path
) -> Conversion | None:
    """The converted drafter of this pull, present when an earlier pull recorded it whole."""
    drafter = request.drafter
    if drafter is None or not drafter.converted:
        return None
    assert drafter.repo is not None and drafter.convert_to is not None
    commit = next((f.commit for role, f in chosen if role == "source"), "")
    final = converted_path(models_dir, drafter.repo, drafter.convert_to)
    for record in manifest.records.values():
        for stored in record.files:
            whole = stored.sha256 and stored.size and final.is_file() and final.stat().st_size == stored.size
            if stored.local == str(final) and whole:
                return Conversion(drafter, final, stored.remote, present=True)
    return Conversion(drafter, final, RemoteFile(drafter.repo, final.name, 0, None, commit), present=False)


def _record(request: Request, planned: list[PlannedFile], conversion: Conversion | None) -> PullRecord:
    files = list(planned)
    if conversion is not None and not conversion.present:
        files.append(PlannedFile("drafter", conversion.remote, conversion.final, "convert"))
    return PullRecord(
        name=request.name,
        source=request.source,
        quant=request.quant,
        drafter=request.drafter.variant if request.drafter else None,
        drafter_kind=request.drafter.kind if request.drafter else None,
        files=[
            StoredFile(
                role=p.role,
                repo=p.remote.repo,
                path=p.remote.path,
                size=p.remote.size,
                sha256=p.remote.sha256,
                commit=p.remote.commit,
                local=str(p.local),
            )
            for p in files
        ],
    )


def _from_manifest(request: Request, manifest: Manifest, exc: NetworkError) -> PullResult:
    """Offline or unreachable hub: fine if this exact pull is already complete."""
    record = manifest.records.get(request.name)
    same = (
        record is not None
        and record.quant == request.quant
        and record.drafter == (request.drafter.variant if request.drafter else None)
    )
    if not same or record is None or record_status(record) != "complete":
        raise exc
    planned = [PlannedFile(f.role, f.remote, Path(f.local), "present") for f in record.files]
    return PullResult(record, planned, notes=[f"hub not reachable; {request.name} is already complete on disk"])


def _tell_waiting(progress: PullProgress, item: PlannedFile, holder: str) -> None:
    progress.notice(item, f"waiting: another dspine pull ({holder}) is fetching {item.label}")


def _settle(item: PlannedFile, settings: Settings, progress: PullProgress) -> FetchReport | None:
    """Make `item` complete and verified on disk, whatever state another pull left it in."""
    from .download import FetchReport, verify_present

    if item.action == "hf-cache":
        return None
    if item.local.exists():
        if verify_present(item.remote, item.local, partial(progress.rehash, item)):
            if item.action == "present":
                return None
            progress.notice(item, f"{item.label} was finished by another pull; sha256 ok")
            return FetchReport(reused_bytes=item.remote.size, fetched_bytes=0)
        progress.notice(
            item,
            f"{item.label} on disk failed its checksum: set aside as {item.local.name}.corrupt, fetching it again",
        )
    return fetch_planned(item, settings, progress)


def pull(
    request: Request,
    settings: Settings,
    progress: PullProgress | None = None,
) -> PullResult:
    progress = progress or PullProgress()
    if request.source == "index":
        from .index_pull import pull_from_index

        return pull_from_index(request, settings, progress)
    models_dir: Path = settings.models_dir
    manifest = Manifest(settings.manifest_path)
    started = time.monotonic()
    try:
        chosen = _choose_files(request)
    except NetworkError as exc:
        return _from_manifest(request, manifest, exc)
    conversion = _conversion(request, chosen, manifest, models_dir)
    if conversion is not None and conversion.present:
        chosen = [(role, f) for role, f in chosen if role != "source"]  # the GGUF is here: no checkpoint needed
    planned = _plan(chosen, models_dir)
    if conversion is not None and conversion.present:
        planned.append(PlannedFile("drafter", conversion.remote, conversion.final, "present"))
    check_writable(models_dir)
    converting = 0
    if conversion is not None and not conversion.present:
        from .convert_run import needed_bytes

        assert conversion.drafter.convert_to is not None
        checkpoint = sum(p.remote.size for p in planned if p.role == "source")
        converting = needed_bytes(checkpoint, conversion.drafter.convert_to)
        fetching = sum(p.remote.size - p.partial for p in planned if p.action == "fetch")
        progress.say(
            f"the drafter {conversion.drafter.variant} is converted here from safetensors to "
            f"{conversion.drafter.convert_to}: this pull needs {format_bytes(fetching + converting)} of disk "
            f"({format_bytes(fetching)} to download, {format_bytes(converting)} more while converting; "
            f"the checkpoint is deleted afterwards{' unless kept' if not request.keep_sources else ': kept'})"
        )
    check_disk(planned, models_dir, converting)
    record = _record(request, planned, conversion)
    before = manifest.records.get(request.name)
    manifest.put(record)  # before the first byte, so `dspine list` shows a partial pull

    result = PullResult(record, planned, notes=list(request.notes), left_behind=left_behind(before, manifest))
    progress.begin(planned)
    try:
        for item in planned:
            _settle_locked(item, settings, progress, result)
        if conversion is not None and not conversion.present:
            result.converted = _convert(request, conversion, planned, record, settings, progress)
            result.left_behind = left_behind(before, manifest)
    finally:
        progress.end()
    result.notes += catalog_differences(request, planned)
    result.seconds = time.monotonic() - started
    return result


def catalog_differences(request: Request, planned: list[PlannedFile]) -> list[str]:
    """Where a file is not what the catalog says (its size, its header's shape): `dspine fit`
    before a pull planned with the catalog's figures, so say so, key by key."""
    from backends.gguf_header import GgufError, read_local

    notes = []
    for item in planned:
        if item.role == "target":
            figures, size = request.shape, request.size
        elif request.drafter is not None:
            figures, size = request.drafter.shape, request.drafter.size
        else:
            continue
        found = []
        if size is not None and item.remote.size != size:
            found.append(f"size: catalog {size:,} B, file {item.remote.size:,} B")
        if figures is not None and item.local.is_file():
            try:
                found += figures.differences(read_local(item.local))
            except GgufError as exc:
                found.append(f"header: {exc}")
        if found:
            notes.append(
                f"{item.label} is not what the catalog says of {request.name} ({'; '.join(found)}). Plans made before "
                "this pull used the catalog's figures; `dspine fit` now reads the file. If the catalog is wrong, "
                "override the bundle in your own catalog file (setting `catalog`)."
            )
    return notes


def _convert(
    request: Request,
    conversion: Conversion,
    planned: list[PlannedFile],
    record: PullRecord,
    settings: Settings,
    progress: PullProgress,
) -> Converted:
    """Convert the fetched checkpoint, record the GGUF, delete the checkpoint unless kept."""
    from backends.llama_server import candidates

    from .convert_run import ConvertProgress, convert_checkpoint
    from .download import sha256_file

    class Report(ConvertProgress):
        def stage(self, what: str, total: int) -> None:
            progress.convert_stage(what, total)

        def advance(self, n: int) -> None:
            progress.convert_advance(n)

    sources = [p for p in planned if p.role == "source"]
    config = next(p.local for p in sources if p.local.name == "config.json")
    shards = [p.local for p in sources if p.local.name.endswith(".safetensors")]
    target = next(p.local for p in planned if p.role == "target")
    servers = tuple(path for _, path in candidates(settings.llama_server, settings.llama_server_build))
    final = conversion.final
    assert conversion.drafter.convert_to is not None
    _say_memory(shards, conversion.drafter.convert_to, progress)
    with held(final):
        converted = convert_checkpoint(
            config, shards, target, final, conversion.drafter.convert_to, servers, Report(), final.stem
        )
        progress.convert_stage(f"sha256 of {final.name}", converted.size)
        digest = sha256_file(final, on_bytes=progress.convert_advance).hexdigest()
    stored = StoredFile(
        "drafter", conversion.remote.repo, final.name, converted.size, digest, conversion.remote.commit, str(final)
    )
    kept = [f for f in record.files if f.role == "source"] if request.keep_sources else []
    record.files = [f for f in record.files if f.role not in ("drafter", "source")] + [stored] + kept
    Manifest(settings.manifest_path).put(record)  # the GGUF is recorded before the checkpoint goes
    if not request.keep_sources:
        for item in sources:
            if item.action != "hf-cache":  # a file in the user's HF cache is not dspine's to delete
                item.local.unlink(missing_ok=True)
                lock_path(item.local).unlink(missing_ok=True)
    return converted


def _say_memory(shards: list[Path], quant: str, progress: PullProgress) -> None:
    """What converting will hold in memory, and whether the machine has it free now."""
    import psutil

    from .convert_run import memory_needed

    try:
        need = memory_needed(shards, quant)
    except DspineError:
        return  # a broken checkpoint: the conversion itself says what is wrong
    free = psutil.virtual_memory().available
    line = f"converting holds up to {format_bytes(need)} of memory ({format_bytes(free)} available)"
    if need > free:
        line += ": other programs' memory may be swapped out meanwhile; closing some makes it quicker"
    progress.say(line)


def _settle_locked(item: PlannedFile, settings: Settings, progress: PullProgress, result: PullResult) -> None:
    try:
        progress.file_begin(item)
        # One process per file: a second pull of it waits, then finds it done.
        with held(item.local, on_wait=partial(_tell_waiting, progress, item)):
            report = _settle(item, settings, progress)
    except OSError as exc:
        if exc.errno not in UNWRITABLE_ERRNOS:
            raise
        raise unwritable(exc.filename or item.local.parent, exc) from exc
    if report is not None:
        result.fetched_bytes += report.fetched_bytes
        result.reused_bytes += report.reused_bytes
    progress.file_end(item, report)
