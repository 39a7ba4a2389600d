"""Which model a saved chat was made with, kept with the chat so that going on with it
(`--continue`, `--resume`) comes back on the same model, a local file included, without
naming it again. Pure: JSON in and out; the CLI resolves what it says."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..models.catalog import NO_DRAFTER
from .engines import ModelFiles


def is_local(model: str | None) -> bool:
    """As `resolve_files` reads --model: a GGUF file rather than a catalog name."""
    return model is not None and (model.lower().endswith(".gguf") or Path(model).is_file())


def remembered(model: str | None, draft: str | None, files: ModelFiles) -> str:
    """What to save with a new chat: a local file by its absolute path, a pulled model by its
    name; the drafter as a file, "none", or null (the pulled bundle's own)."""
    if files.target is None:
        return ""  # a remote engine: its URL is the user's to give again
    name = str(files.target.resolve()) if is_local(model) else files.label
    kept: str | None
    if files.drafter is None:
        kept = NO_DRAFTER
    elif is_local(model) or (draft is not None and draft.lower().endswith(".gguf")):
        kept = str(files.drafter.resolve())
    else:
        kept = None
    return json.dumps({"model": name, "draft": kept})


@dataclass(frozen=True)
class SavedModel:
    model: str | None
    draft: str | None
    missing: str = ""  # a file the chat was made with that is gone ("" when all are there)


def saved(model_files: str) -> SavedModel | None:
    """The --model and --draft to go on with; None for a chat saved before this was kept."""
    try:
        data = json.loads(model_files) if model_files else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("model"), str) or not data["model"]:
        return None
    model = data["model"]
    draft = data.get("draft") if isinstance(data.get("draft"), str) else None
    for path in (model, draft):
        if path and path.lower().endswith(".gguf") and not Path(path).is_file():
            return SavedModel(model, draft, missing=path)
    return SavedModel(model, draft)
