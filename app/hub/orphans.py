"""Files in the models folder that no pull owns.

Pulling a bundle again with another quant or drafter replaces its record, and
the files of the earlier pull stay on disk (deleting gigabytes unasked would be
worse). They are found here by walking the models folder, so that `dspine list`
can show them with their sizes and `dspine rm --orphans` (or `rm FILE`) can
delete them. A file and its `.part`, `.part.json`, `.corrupt` and `.lock`
companions count as one orphan (the lock is not counted in its size). Only files
in the manifest's ledger of what dspine's pulls wrote can be orphans (a
manifest from before the ledger starts it from its records).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from .locks import is_held, lock_path
from .store import Manifest, PullRecord, corrupt_path, part_meta_path, part_path, quant_part_path

# The manifest, its lock, its write-then-rename temporaries and damaged copies are not models.
_MANIFEST_PREFIXES = ("manifest.json", ".manifest-")
_COMPANION_SUFFIXES = (".part.json", ".quant.part", ".part", ".corrupt", ".lock")


@dataclass
class Orphan:
    final: Path  # the model file's name, whether or not it finished
    paths: list[Path] = field(default_factory=list)  # what exists of it and its companions
    size: int = 0

    @property
    def name(self) -> str:
        return self.final.name


def _final_of(path: Path) -> Path:
    for suffix in _COMPANION_SUFFIXES:
        if path.name.endswith(suffix):
            return path.with_name(path.name[: -len(suffix)])
    return path


def _owned(manifest: Manifest) -> set[Path]:
    return {Path(f.local).resolve() for record in manifest.records.values() for f in record.files}


def find_orphans(manifest: Manifest, models_dir: Path) -> list[Orphan]:
    """Every model file under `models_dir` (with its companions) that no record names."""
    if not models_dir.is_dir():
        return []
    root = models_dir.resolve()
    owned = _owned(manifest)
    written = {Path(p).resolve() for p in manifest.written}
    found: dict[Path, Orphan] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        if path.parent == root and path.name.startswith(_MANIFEST_PREFIXES):
            continue
        if path.name.endswith(".lock"):  # what any ended pull leaves; deleted with its file
            continue
        final = _final_of(path)
        # Only what one of dspine's pulls wrote (the manifest's ledger): a models_dir shared
        # with another tool (LM Studio's ORG/REPO/FILE layout is the same) holds its files too.
        if final in owned or final not in written:
            continue
        orphan = found.setdefault(final, Orphan(final))
        orphan.paths.append(path)
        orphan.size += path.stat().st_size
    return list(found.values())


def left_behind(before: PullRecord | None, manifest: Manifest) -> list[Path]:
    """Files of an earlier record of a name that no record owns any more (after a re-pull)."""
    if before is None:
        return []
    owned = _owned(manifest)
    return [Path(f.local) for f in before.files if Path(f.local).resolve() not in owned and Path(f.local).exists()]


def match_orphans(orphans: list[Orphan], name: str, models_dir: Path) -> list[Orphan]:
    """The orphan a name given to `rm` means: its path as `dspine list` shows it, its path
    in the models folder (ORG/REPO/FILE), or its file name when only one orphan has it."""
    wanted = Path(name).expanduser()
    path = wanted.resolve() if wanted.is_absolute() else (models_dir / wanted).resolve()
    by_path = [o for o in orphans if o.final == path or str(o.final) == name]
    if by_path:
        return by_path
    by_name = [o for o in orphans if o.name == name]
    if len(by_name) > 1:
        paths = ", ".join(str(o.final.relative_to(models_dir.resolve())) for o in by_name)
        raise UsageError(
            f"{len(by_name)} files no pull owns are called {name}: {paths}",
            "give the one to delete as ORG/REPO/FILE (its path in the models folder)",
        )
    return by_name


def why_orphans_cannot_be_told(manifest: Manifest) -> str | None:
    """Why the files no pull owns cannot be told apart from pulled ones right now, if so:
    deleting "orphans" then could delete every pulled model."""
    # No manifest at all needs no refusal: its ledger is empty, so nothing counts as an orphan.
    if manifest.set_aside is not None:
        return f"the manifest was damaged and has been set aside as {manifest.set_aside}"
    missing = [
        Path(f.local)
        for record in manifest.records.values()
        for f in record.files
        if not Path(f.local).exists() and not part_path(Path(f.local)).exists()
    ]
    if missing:
        return (
            f"the manifest names {len(missing)} file(s) that are not where it says, such as {missing[0]} "
            "(was the models folder moved?)"
        )
    return None


@dataclass
class OrphanRemoval:
    deleted: list[Path] = field(default_factory=list)
    freed: int = 0
    busy: list[Path] = field(default_factory=list)  # a pull holds its lock right now
    owned: list[Path] = field(default_factory=list)  # a pull recorded it since it was listed


def remove_orphans(orphans: list[Orphan], models_dir: Path, manifest_path: Path | None = None) -> OrphanRemoval:
    from .store import prune_empty_dirs

    # Read the manifest again: a pull that finished while the user read the question may
    # own one of these files now.
    owned_now = _owned(Manifest(manifest_path)) if manifest_path is not None else set()
    removal = OrphanRemoval()
    for orphan in orphans:
        if orphan.final.resolve() in owned_now:
            removal.owned.append(orphan.final)
            continue
        if is_held(orphan.final):
            removal.busy.append(orphan.final)
            continue
        companions = (part_path(orphan.final), quant_part_path(orphan.final), part_meta_path(orphan.final))
        for path in (orphan.final, *companions, corrupt_path(orphan.final)):
            try:
                size = path.stat().st_size
                path.unlink()
            except FileNotFoundError:
                continue
            removal.deleted.append(path)
            removal.freed += size
        lock_path(orphan.final).unlink(missing_ok=True)
        prune_empty_dirs(orphan.final.parent, models_dir)
    return removal
