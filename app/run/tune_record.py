"""What `dspine tune` picked, remembered per model pair and engine, with what the measurement
depended on (the llama.cpp build, the device, the model files): a tune made under other
conditions is stale and said so, never silently used."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from backends.sampling import QWEN_CARD, presets_identity
from backends.turn_kind import TurnDrafting


@dataclass(frozen=True)
class Pick:
    """A drafting setup: the pair's drafter or not, n-gram drafts or not, the draft length
    (None: the engine's own, adaptive where it learns one)."""

    drafter: bool
    ngram: bool
    n_max: int | None = None
    # Which kinds of turn draft (backends/turn_kind.py): the others decode plainly.
    new_text: bool = True
    edit: bool = True

    @property
    def drafts(self) -> bool:
        return (self.drafter or self.ngram) and (self.new_text or self.edit)

    @property
    def setup(self) -> str:
        if self.drafter and self.ngram:
            return "drafter + n-gram"
        if self.drafter:
            return "drafter"
        return "n-gram" if self.ngram else "plain"

    @property
    def label(self) -> str:
        if not self.drafts:
            return "plain"
        if self.new_text and self.edit:
            return self.setup
        return f"{self.setup} on {'edits' if self.edit else 'new text'}"

    def turn_drafting(self) -> TurnDrafting | None:
        return None if self.new_text and self.edit else TurnDrafting(new_text=self.new_text, edit=self.edit)


@dataclass(frozen=True)
class Conditions:
    """What a tune's figures depend on; any change makes it stale."""

    build: str
    device: str
    files: str
    # The sampling the tune's runs used (a tune saved before this was recorded ran Qwen3.8's).
    sampling: str = presets_identity(QWEN_CARD)

    def changed(self, other: Conditions) -> str | None:
        """What differs from `other`, in the user's words, or None."""
        if self.build != other.build:
            return "another llama.cpp build"
        if self.device != other.device:
            return "another device"
        if self.files != other.files:
            return "other model files"
        if self.sampling != other.sampling:
            return "other sampling presets"
        return None


@dataclass
class Tune:
    pick: Pick
    conditions: Conditions
    summary: str  # the verdict line the tune printed
    table: list[dict] = field(default_factory=list)  # the rows it measured (bench's Row.to_json)
    when: str = ""


OFFERED = "offered"  # the tunes file's list of keys the chat offered to tune (no tune key lacks a colon)


def tune_key(engine: str, target: Path, drafter: Path | None) -> str:
    return f"{engine}:{target.name}+{drafter.name if drafter else 'none'}"


class TuneRecords:
    """The tunes file (settings.tune_file): one entry per key."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _all(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> Tune | None:
        entry = self._all().get(key)
        if not isinstance(entry, dict):
            return None
        try:
            return Tune(
                pick=Pick(**entry["pick"]),
                conditions=Conditions(**entry["conditions"]),
                summary=str(entry.get("summary", "")),
                table=list(entry.get("table", [])),
                when=str(entry.get("when", "")),
            )
        except (TypeError, KeyError):
            return None  # absent, or written by another version: as if never tuned

    def put(self, key: str, tune: Tune) -> None:
        data = self._all()
        data[key] = asdict(tune)
        self._write(data)

    def mark_offered(self, key: str) -> bool:
        """Remember that the chat offered to tune `key`: True the first time, False after (the
        offer is made once, never pressed again)."""
        data = self._all()
        offered = data.get(OFFERED)
        offered = [k for k in offered if isinstance(k, str)] if isinstance(offered, list) else []
        if key in offered:
            return False
        data[OFFERED] = [*offered, key]
        self._write(data)
        return True

    def reset(self, key: str | None = None) -> int:
        """Forget one key's tune (or all): how many were forgotten."""
        data = self._all()
        gone = len([k for k in data if k != OFFERED]) if key is None else int(key in data)
        # The offers made stay remembered: a reset tune is not offered again.
        self._write({k: v for k, v in data.items() if (k == OFFERED if key is None else k != key)})
        return gone

    def _write(self, data: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)
