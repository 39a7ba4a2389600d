"""Which think mode a command starts in when the user does not say: on, unless the
model's own chat template has no thinking mode (SmolLM2's ChatML, say), where "on"
would only cost the think preset's sampling and penalties for nothing. chat, run and
serve all ask this; bench measures "off" unless told."""

from __future__ import annotations

from pathlib import Path


def model_has_thinking(target: Path) -> bool:
    """Whether the GGUF's chat template knows a thinking mode; True when the file cannot be
    read (the engine that opens it says what is wrong with it, and the default stays)."""
    from backends.chat_template import model_thinks
    from backends.errors import GgufError

    try:
        return model_thinks(str(target))
    except (GgufError, OSError):
        return True


def starting_think(given: str | None, target: Path | None) -> tuple[bool, bool]:
    """(think, chosen for the model): what the user gave ("on"/"off"), else off for a target
    without a thinking mode, else on. The second value says the model decided it, so the
    caller can tell the user why thinking is off."""
    if given is not None:
        return given == "on", False
    if target is not None and not model_has_thinking(target):
        return False, True
    return True, False


def no_thinking_note(label: str, where: str = "") -> str:
    """What to tell the user when the model chose "off"; `where` narrows it (serve: requests
    that do not say)."""
    scope = f" {where}" if where else ""
    return f"{label} has no thinking mode: thinking is off{scope}"
