"""Where system and developer messages may stand, pure: the one rule every endpoint
and engine applies before a chat template sees the messages.

Coding agents send instructions after the conversation has begun: Claude Code a
system message mid-conversation, Codex a developer message per turn (the
Responses API's `developer` role). Many templates accept only one system message,
first (the Qwen3.5 family raises `System message must be at the beginning.`), and
none knows `developer`. So:

- `developer` is `system` (what OpenAI means by it; llama.cpp maps it the same way);
- IN_PLACE (the template renders a later system message where it stands, or dspine
  runs a corrected copy that does): every system message stays where it is, so the
  prompt before it is unchanged and the server's prefix cache still holds;
- MERGE (any other template): every system message is folded, in order, into one
  leading system message (texts joined by a blank line), the others keep their order.

Nothing the client sent is dropped: every text of every system message is in the
result, in the order it was sent."""

from __future__ import annotations

from typing import Any, Literal

SystemRule = Literal["in_place", "merge"]
IN_PLACE: SystemRule = "in_place"
MERGE: SystemRule = "merge"
SYSTEM_ROLES = ("system", "developer")
JOIN = "\n\n"  # between merged system texts: a paragraph break, as a person would write it


def is_system(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") in SYSTEM_ROLES


def as_system(message: dict[str, Any]) -> dict[str, Any]:
    return {**message, "role": "system"} if message.get("role") == "developer" else message


def merge_contents(contents: list[Any]) -> Any:
    """Several messages' contents as one: a string when all are strings, else a list of
    content parts (OpenAI's `{"type": "text", ...}` parts, images included) with a text
    part between messages. Empty ones add nothing (not even a separator)."""
    present = [c for c in contents if c not in (None, "", [])]
    if all(isinstance(c, str) for c in present):
        return JOIN.join(present)
    parts: list[Any] = []
    for content in present:
        if parts:
            parts.append({"type": "text", "text": JOIN})
        parts.extend([{"type": "text", "text": content}] if isinstance(content, str) else list(content))
    return parts


def normalise(messages: list[Any], rule: SystemRule) -> list[Any]:
    """The messages in the order the template takes them (see the module's rule)."""
    shaped = [as_system(m) if is_system(m) else m for m in messages]
    if rule == IN_PLACE:
        return shaped
    systems = [m for m in shaped if is_system(m)]
    if not systems or (len(systems) == 1 and shaped[0] is systems[0]):
        return shaped
    leading = {**systems[0], "content": merge_contents([m.get("content") for m in systems])}
    return [leading, *(m for m in shaped if not is_system(m))]


def later_system_count(messages: list[Any]) -> int:
    """How many system or developer messages stand after the first message."""
    return sum(1 for m in messages[1:] if is_system(m))
