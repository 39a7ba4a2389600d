"""What kind of turn a request is, for drafting: an edit, whose reply will copy text the context
holds (a file given in the prompt, a file a tool just read), or new text. Pure.

Copies from the context (n-gram drafts) pay on an edit and cost on new text where a machine
verifies a rejected guess at a price (a CPU: 7-9% on SmolLM2's code and math prompts, while
edits ran 1.16-1.42x), so a measured choice can draft on one kind and not the other; the
engines ask `TurnDrafting` per request."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

EDIT_LINES = 6  # lines of code in the newest turn that its reply is likely to copy from
_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def is_edit_turn(messages: Sequence[dict[str, Any]]) -> bool:
    """The newest user message, or a tool result after it, holds a block of code (a fenced
    block, or a tool's output) of EDIT_LINES lines or more."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:
        return False
    for message in messages[last_user:]:
        text = _text(message.get("content"))
        if message.get("role") == "tool" and text.count("\n") + 1 >= EDIT_LINES:
            return True
        if message.get("role") == "user" and any(block.count("\n") + 1 >= EDIT_LINES for block in _FENCE.findall(text)):
            return True
    return False


@dataclass(frozen=True)
class TurnDrafting:
    """Whether to draft on each kind of turn (False: plain decoding for that kind)."""

    new_text: bool = True
    edit: bool = True

    def drafts(self, messages: Sequence[dict[str, Any]]) -> bool:
        return self.edit if is_edit_turn(messages) else self.new_text

    def plain_on(self, messages: Sequence[dict[str, Any]]) -> str | None:
        """The kind of turn these messages are, where it decodes plainly ("new text", "an edit");
        None where it drafts."""
        if self.drafts(messages):
            return None
        return "an edit" if is_edit_turn(messages) else "new text"
