"""Choose the files of one model from a repository's file listing.

Pure. Handles case-insensitive globs and quant names, split GGUFs
(`-00001-of-00003.gguf`), quant sub-folders, and projector files that are not
the model. When nothing matches, the error lists what the repository has.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from ..errors import NotFoundError, UsageError

DEFAULT_QUANT_PREFERENCE = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K", "Q8_0")

_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
_QUANT = re.compile(
    r"(?<![A-Za-z0-9])((?:UD-)?(?:I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32|MXFP4(?:_MOE)?|TQ\d_\d))(?![A-Za-z0-9])",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class RemoteFile:
    repo: str
    path: str
    size: int
    sha256: str | None  # the LFS hash; None for small files kept in git
    commit: str


def is_model_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return name.endswith(".gguf") and "mmproj" not in name


def quant_of(path: str) -> str | None:
    """The quant label in a GGUF file name ('Qwen3-8B-Q4_K_M.gguf' -> 'Q4_K_M')."""
    name = _SHARD.sub(".gguf", path.rsplit("/", 1)[-1])
    found = _QUANT.findall(name[: -len(".gguf")] if name.lower().endswith(".gguf") else name)
    return found[-1].upper() if found else None


def _group_key(path: str) -> str:
    return _SHARD.sub(".gguf", path)


def _shard_check(repo: str, key: str, files: list[RemoteFile]) -> list[RemoteFile]:
    files = sorted(files, key=lambda f: f.path)
    shard = _SHARD.search(files[0].path)
    if shard:
        expected = int(shard.group(2))
        if len(files) != expected:
            raise NotFoundError(
                f"{repo}: {key} is split into {expected} files but the listing has {len(files)}",
                "the upload looks incomplete; try another quant or repository",
            )
    return files


def available_quants(listing: list[RemoteFile]) -> list[str]:
    quants = {quant_of(f.path) for f in listing if is_model_file(f.path)}
    return sorted(q for q in quants if q)


def _describe(repo: str, listing: list[RemoteFile]) -> str:
    models = sorted({_group_key(f.path) for f in listing if is_model_file(f.path)})
    if models:
        shown = ", ".join(models[:12]) + (f" and {len(models) - 12} more" if len(models) > 12 else "")
        return f"{repo} has: {shown}"
    others = ", ".join(sorted(f.path for f in listing)[:12]) or "no files at all"
    return f"{repo} has no GGUF files; it has: {others}"


def _pick(repo: str, what: str, listing: list[RemoteFile], matches: list[RemoteFile]) -> list[RemoteFile]:
    if not matches:
        raise NotFoundError(f"no file in {repo} matches {what}", _describe(repo, listing))
    groups: dict[str, list[RemoteFile]] = {}
    for remote in matches:
        groups.setdefault(_group_key(remote.path), []).append(remote)
    # Several matches ('Q4_K_M' and 'UD-Q4_K_M'): the plainest name is the one
    # a user asking for the quant means; the others are variants of it.
    key = min(groups, key=lambda k: (len(k), k))
    return _shard_check(repo, key, groups[key])


def select_by_glob(repo: str, listing: list[RemoteFile], pattern: str) -> list[RemoteFile]:
    wanted = pattern.lower()
    allow_projector = "mmproj" in wanted
    matches = [
        f
        for f in listing
        if fnmatch.fnmatchcase(f.path.lower(), wanted) and (allow_projector or "mmproj" not in f.path.lower())
    ]
    return _pick(repo, f"the pattern {pattern!r}", listing, matches)


def select_by_quant(repo: str, listing: list[RemoteFile], quant: str | None) -> list[RemoteFile]:
    """The files for `quant`, or for the usual default when no quant is given."""
    models = [f for f in listing if is_model_file(f.path)]
    if quant is None:
        present = available_quants(listing)
        for preferred in DEFAULT_QUANT_PREFERENCE:
            if preferred in present:
                quant = preferred
                break
        else:
            groups = {_group_key(f.path) for f in models}
            if len(groups) == 1:
                return _pick(repo, "a GGUF file", listing, models)
            if not groups:
                raise NotFoundError(f"{repo} has no GGUF model files", _describe(repo, listing))
            raise UsageError(
                f"{repo} has several models and no usual default quant",
                f"name one as {repo}:QUANT; quants there: {', '.join(present) or 'none recognised'}",
            )
    token = re.compile(rf"(?<![A-Za-z0-9]){re.escape(quant)}(?![A-Za-z0-9_])", re.IGNORECASE)
    matches = [f for f in models if token.search(_group_key(f.path).rsplit("/", 1)[-1]) or token.search(f.path)]
    if not matches:
        present = available_quants(listing)
        raise NotFoundError(
            f"{repo} has no {quant} file",
            f"quants there: {', '.join(present)}" if present else _describe(repo, listing),
        )
    return _pick(repo, f"quant {quant}", listing, matches)


CHECKPOINT_CONFIG = "config.json"


def select_checkpoint(repo: str, listing: list[RemoteFile], pattern: str) -> list[RemoteFile]:
    """A safetensors checkpoint: its config.json and every file `pattern` matches (all
    the shards, not one of them)."""
    wanted = pattern.lower()
    shards = sorted(
        (f for f in listing if f.path.lower().endswith(".safetensors") and fnmatch.fnmatchcase(f.path.lower(), wanted)),
        key=lambda f: f.path,
    )
    if not shards:
        others = ", ".join(sorted(f.path for f in listing)[:12]) or "no files at all"
        raise NotFoundError(f"no safetensors file in {repo} matches {pattern!r}", f"{repo} has: {others}")
    folder = shards[0].path.rpartition("/")[0]
    config_path = f"{folder}/{CHECKPOINT_CONFIG}" if folder else CHECKPOINT_CONFIG
    config = [f for f in listing if f.path == config_path]
    if not config:
        raise NotFoundError(
            f"{repo} has safetensors but no {config_path} beside them",
            "the converter needs the checkpoint's config.json; is this a model repository?",
        )
    return config + shards
