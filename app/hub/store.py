"""What is on disk: dspine's models folder, its manifest, and the HF cache.

Layout: MODELS_DIR/ORG/REPO/PATH for each pulled file (`.part` and `.part.json`
while it downloads, `.corrupt` when its checksum failed), and
MODELS_DIR/manifest.json naming what each pull consists of.
A file that already sits in the user's Hugging Face cache is used from there
and never copied or deleted by dspine.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path

from backends.private import private_dir

from ..errors import ConfigError, UsageError
from ..models.selection import RemoteFile
from ..paths import hf_cache_dir
from .locks import held, lock_path

MANIFEST_VERSION = 1

# C0, DEL and C1: a name holding one would carry an escape sequence or a line break to the
# disk, to every listing of the folder, and to the terminal of whoever prints it.
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _known(cls: type, raw: dict) -> dict:
    """A record's fields this version knows: a field a newer dspine added is ignored, not
    taken for damage (setting the manifest aside would disown every pulled file)."""
    names = {f.name for f in fields(cls)}
    return {key: value for key, value in raw.items() if key in names}


@dataclass
class StoredFile:
    role: str  # "target" or "drafter"
    repo: str
    path: str
    size: int
    sha256: str | None
    commit: str
    local: str  # absolute path of the finished file

    @property
    def remote(self) -> RemoteFile:
        return RemoteFile(self.repo, self.path, self.size, self.sha256, self.commit)


@dataclass
class PullRecord:
    name: str  # what the user typed, normalised: a bundle name or ORG/REPO:QUANT
    source: str  # "catalog" or "repo"
    quant: str | None
    drafter: str | None  # drafter variant, or None
    drafter_kind: str | None
    files: list[StoredFile] = field(default_factory=list)


@dataclass
class FileState:
    status: str  # "complete", "partial" or "missing"
    on_disk: int


def file_state(stored: StoredFile) -> FileState:
    local = Path(stored.local)
    try:
        size = local.stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        have = partial_bytes(local)
        return FileState("partial" if have else "missing", have)
    return FileState("complete" if size == stored.size else "partial", size)


def waits_for_its_models(record: PullRecord) -> bool:
    """A pull from the package index that stopped after its wheel (role `package`) and before
    the model files were made from it: the wheel alone runs nothing, so the pull is partial."""
    return any(f.role == "package" for f in record.files)


def record_status(record: PullRecord) -> str:
    states = {file_state(f).status for f in record.files}
    if states == {"complete"} and not waits_for_its_models(record):
        return "complete"
    return "partial" if states & {"complete", "partial"} else "missing"


def local_path(models_dir: Path, remote: RemoteFile) -> Path:
    """Where a hub file lives under the models folder. Repository ids and file paths
    come from catalogs and hub listings, so one that would lead out of the folder
    (`..`, an absolute path) or that holds a control character is refused before
    anything is written."""
    if _CONTROL_CHARACTERS.search(remote.repo + remote.path):
        raise UsageError(
            f"{remote.repo + '/' + remote.path!r} holds a control character "
            "(an escape or a line break), which no file name of a model should",
            "pull another repository or file; nothing was written",
        )
    final = models_dir / remote.repo / remote.path
    folder = (models_dir / remote.repo).resolve()
    inside = folder.is_relative_to(models_dir.resolve()) and final.resolve().is_relative_to(folder)
    if Path(remote.path).is_absolute() or not inside:
        raise UsageError(
            f"{remote.repo}/{remote.path} would be written outside the models folder {models_dir}",
            "check the repository id and the file name (in your catalog, or the hub's listing); nothing was written",
        )
    return final


def converted_path(models_dir: Path, repo: str, quant: str) -> Path:
    """Where the GGUF converted from a safetensors repository goes: beside its checkpoint,
    named after the repository and the quant (RadixArk/Qwen3.8-27B-DSpark ->
    .../Qwen3.8-27B-DSpark-Q8_0.gguf)."""
    return local_path(models_dir, RemoteFile(repo, f"{repo.rsplit('/', 1)[-1]}-{quant.upper()}.gguf", 0, None, ""))


def quant_part_path(final: Path) -> Path:
    """llama-quantize's output while a converted drafter is quantized."""
    return final.with_name(final.name + ".quant.part")


def part_path(final: Path) -> Path:
    return final.with_name(final.name + ".part")


def part_meta_path(final: Path) -> Path:
    return final.with_name(final.name + ".part.json")


def corrupt_path(final: Path) -> Path:
    return final.with_name(final.name + ".corrupt")


def aside_path(path: Path) -> Path:
    """Where a damaged file is moved: its name with the time, never over an older one."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return candidate


# What an OS says when a folder cannot be written: permission, read-only disk, a file in the way.
UNWRITABLE_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST)


def unwritable(path: Path | str, exc: OSError) -> ConfigError:
    return ConfigError(
        f"cannot write to {path} in the models folder ({exc.strerror})",
        "give your user write access to it, or set models_dir (DSPINE_MODELS_DIR) to a folder you can write",
    )


def check_writable(models_dir: Path) -> None:
    """Make the models folder (0700 where dspine creates it) and prove a file can be made
    in it, before the hub is asked for anything."""
    try:
        private_dir(models_dir)
        fd, probe = tempfile.mkstemp(dir=models_dir, prefix=".write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise unwritable(models_dir, exc) from exc


def partial_bytes(final: Path) -> int:
    try:
        return part_path(final).stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        return 0


def _is_sha256(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def find_in_hf_cache(remote: RemoteFile) -> Path | None:
    """The file in the user's HF cache (at the listing's commit, else at `main`), checked
    against its LFS hash and size. The snapshot's name is what is returned: llama.cpp finds
    the other shards of a split GGUF by file name, which a bare blob does not have."""
    if remote.sha256 is None:
        return None
    from huggingface_hub import try_to_load_from_cache

    for revision in dict.fromkeys((remote.commit, "main")):
        found = try_to_load_from_cache(remote.repo, remote.path, cache_dir=hf_cache_dir(), revision=revision)
        if not isinstance(found, str):
            continue
        try:
            blob = Path(found).resolve(strict=True)
            size = blob.stat().st_size
        except OSError:
            continue
        # A blob is named by its hash; a copied file (no symlinks here) counts at the exact commit.
        same = blob.name == remote.sha256 if _is_sha256(blob.name) else revision == remote.commit
        if same and size == remote.size:
            return Path(found)
    return None


def listing_from_hf_cache(repo: str) -> list[RemoteFile]:
    """What the HF cache holds of `repo` at its cached `main`, shaped like a hub
    listing (LFS blobs are named by their sha256), for pulls in offline mode."""
    from huggingface_hub import CacheNotFound, scan_cache_dir

    try:
        cache = scan_cache_dir(hf_cache_dir())
    except CacheNotFound:
        return []
    for cached in cache.repos:
        if cached.repo_id != repo or cached.repo_type != "model":
            continue
        for revision in cached.revisions:
            if "main" not in revision.refs:
                continue
            listing = []
            for file in sorted(revision.files, key=lambda f: f.file_path):
                sha = file.blob_path.name if _is_sha256(file.blob_path.name) else None
                path = file.file_path.relative_to(revision.snapshot_path).as_posix()
                listing.append(RemoteFile(repo, path, file.size_on_disk, sha, revision.commit_hash))
            return listing
    return []


class Manifest:
    """What each pull consists of. Several dspine processes may pull at once, so every
    change re-reads the file under a lock and writes it back merged (`update`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, PullRecord] = {}
        self.set_aside: Path | None = None  # where a damaged manifest was moved, if it was
        # Every model file a pull of dspine's has recorded and that is still on disk: only
        # these can be orphans, so another tool's GGUFs in a shared folder never are.
        self.written: set[str] = set()
        self._load()

    def _load(self) -> None:
        self.records = {}
        self.written = set()
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.written = {p for p in data.get("written", []) if isinstance(p, str)}
            for name, raw in data.get("pulls", {}).items():
                files = [StoredFile(**_known(StoredFile, f)) for f in raw.pop("files", [])]
                self.records[name] = PullRecord(**_known(PullRecord, raw), files=files)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ConfigError(
                f"the manifest {self.path} cannot be read ({exc.strerror})",
                f"give your user read and write access to {self.path}, "
                "or set models_dir (DSPINE_MODELS_DIR) to a folder you can write",
            ) from exc
        except (ValueError, TypeError, AttributeError):
            # Damaged (junk, truncated, hand-edited): set it aside and start over; the
            # model files are untouched and the next pull of each name records it again.
            self.records = {}
            self.written = set()
            self.set_aside = aside_path(self.path)
            os.replace(self.path, self.set_aside)

    def save(self) -> None:
        private_dir(self.path.parent)
        recorded = {f.local for record in self.records.values() for f in record.files}
        still_here = {p for p in self.written if Path(p).exists() or part_path(Path(p)).exists()}
        self.written = recorded | still_here
        payload = {
            "version": MANIFEST_VERSION,
            "pulls": {name: asdict(record) for name, record in sorted(self.records.items())},
            "written": sorted(self.written),
        }
        # Write then rename, so a crash never leaves half a manifest (mkstemp makes it 0600).
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".manifest-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)
        os.replace(tmp, self.path)

    def update(self, change: Callable[[dict[str, PullRecord]], None]) -> None:
        """Re-read the manifest under its lock, apply `change` to the records, save."""
        private_dir(self.path.parent)
        with held(self.path):
            self._load()
            change(self.records)
            self.save()

    def put(self, record: PullRecord) -> None:
        def change(records: dict[str, PullRecord]) -> None:
            records[record.name] = record

        self.update(change)

    def remove(self, name: str) -> None:
        def change(records: dict[str, PullRecord]) -> None:
            records.pop(name, None)

        self.update(change)

    def has(self, name: str) -> bool:
        return any(key.lower() == name.lower() for key in self.records)

    def find(self, name: str) -> PullRecord:
        for key, record in self.records.items():
            if key.lower() == name.lower():
                return record
        known = ", ".join(self.records) or "nothing yet"
        raise UsageError(f"{name!r} has not been pulled", f"pulled: {known}; see `dspine list`")


@dataclass
class Removal:
    deleted: list[Path]
    freed: int
    kept_shared: list[Path]  # still used by another pull
    kept_foreign: list[Path]  # in the HF cache, shared with other tools


def plan_removal(manifest: Manifest, name: str, models_dir: Path) -> tuple[PullRecord, Removal]:
    record = manifest.find(name)
    used_elsewhere = {f.local for other in manifest.records.values() if other is not record for f in other.files}
    removal = Removal([], 0, [], [])
    root = models_dir.resolve()
    for stored in record.files:
        local = Path(stored.local)
        if stored.local in used_elsewhere:
            removal.kept_shared.append(local)
            continue
        if not local.resolve().is_relative_to(root):
            removal.kept_foreign.append(local)
            continue
        companions = (part_path(local), quant_part_path(local), part_meta_path(local), corrupt_path(local))
        for path in (local, *companions, lock_path(local)):
            if path.exists():
                removal.deleted.append(path)
                removal.freed += path.stat().st_size
    return record, removal


def apply_removal(manifest: Manifest, record: PullRecord, removal: Removal, models_dir: Path) -> None:
    for path in removal.deleted:
        path.unlink(missing_ok=True)
        prune_empty_dirs(path.parent, models_dir)
    manifest.remove(record.name)


def prune_empty_dirs(folder: Path, stop: Path) -> None:
    stop = stop.resolve()
    folder = folder.resolve()
    while folder != stop and folder.is_relative_to(stop):
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
