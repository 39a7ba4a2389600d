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


# A follow-up that asks for a change to code already in the conversation ("now rename the
# function to rev", "change x to y", "keep everything else"): its reply copies that code.
_CHANGE_ASKED = re.compile(
    r"\b(rename|change|replace|swap|refactor|fix|update|modify|edit|rewrite|remove|delete|add|"
    r"keep (?:everything|all|the rest)|instead of)\b",
    re.I,
)


def _holds_code(message: dict[str, Any]) -> bool:
    """A block of code of EDIT_LINES lines or more: a fenced block, or a tool's output."""
    text = _text(message.get("content"))
    if message.get("role") == "tool":
        return text.count("\n") + 1 >= EDIT_LINES
    return any(block.count("\n") + 1 >= EDIT_LINES for block in _FENCE.findall(text))


def is_edit_turn(messages: Sequence[dict[str, Any]]) -> bool:
    """The newest user message, or a tool result after it, holds a block of code; or the
    newest user message asks for a change and code is earlier in the conversation."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:
        return False
    if any(_holds_code(m) for m in messages[last_user:] if m.get("role") in ("user", "tool")):
        return True
    asked = _text(messages[last_user].get("content"))
    return bool(_CHANGE_ASKED.search(asked)) and any(_holds_code(m) for m in messages[:last_user])


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
