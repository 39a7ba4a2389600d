"""A model's shape as the catalog states it: what `dspine fit` plans from before
anything is pulled (offline too), and what pull checks the fetched file against.

The figures are GGUF metadata keys without the architecture prefix (block_count,
embedding_length, attention.head_count, ssm.state_size, ...), so the catalog
says exactly what the file's header should, and a difference is named key by
key. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backends.gguf_header import GgufHeader

from ..errors import ConfigError

# Keys a plan cannot be made without; the rest (ssm.*, full_attention_interval, ...) as the architecture needs.
REQUIRED = ("block_count", "embedding_length", "attention.head_count", "context_length", "vocab_size")


@dataclass(frozen=True)
class Figures:
    architecture: str
    keys: dict[str, int]

    def get(self, key: str, default: int = 0) -> int:
        return self.keys.get(key, default)

    def differences(self, header: GgufHeader) -> list[str]:
        """Where the file's header says otherwise, as `key: catalog X, file Y`."""
        found = []
        if header.architecture != self.architecture:
            found.append(f"architecture: catalog {self.architecture}, file {header.architecture}")
            return found
        for key, value in self.keys.items():
            theirs = header.arch_key(key)
            if key == "vocab_size" and theirs is None:
                tokens = header.get("tokenizer.ggml.tokens")
                theirs = len(tokens) if tokens is not None else None
            if isinstance(theirs, list):  # per block: the catalog gives the largest (attention blocks')
                theirs = max(theirs)
            if theirs is not None and int(theirs) != value:
                found.append(f"{key}: catalog {value:,}, file {int(theirs):,}")
        return found


def parse_figures(table: Any, where: str) -> Figures | None:
    """The `shape` table of a bundle or drafter; None where the catalog gives none."""
    if table is None:
        return None
    if not isinstance(table, dict) or not isinstance(table.get("architecture"), str):
        raise ConfigError(f"{where}.shape lacks 'architecture'", "add the GGUF architecture, e.g. qwen35")
    keys = {}
    for key, value in table.items():
        if key in ("architecture", "note"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{where}.shape.{key} = {value!r} is not a count", "give a whole number")
        keys[key] = value
    missing = [k for k in REQUIRED if k not in keys]
    if missing:
        raise ConfigError(f"{where}.shape lacks {', '.join(missing)}", "add them as the GGUF header states them")
    return Figures(table["architecture"], keys)


def parse_size(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where} = {value!r} is not a size in bytes", "give the file's size as a whole number")
    return value
