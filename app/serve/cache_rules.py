"""Known volatile text in agents' prompts, taken out before the prompt reaches
llama-server, pure. llama-server reuses a slot's cache up to the first token that
differs: a line near the top of the system prompt that changes on every request makes
it process the whole prompt again each turn (tens of seconds on a 27B model at 30K).

Each rule has a name (shown in the README and the tests) and changes only what it names;
a request that has none of it passes unchanged (the same object)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Claude Code 2.x sends `x-anthropic-billing-header: cc_version=2.1.197.<hash>;
# cc_entrypoint=...;` as the first system text block; the hash part follows the
# conversation, so the line changes between requests. It means nothing to a local model.
BILLING_LINE = re.compile(r"^x-anthropic-billing-header:[^\n]*\n?", re.MULTILINE)


@dataclass(frozen=True)
class Rule:
    name: str
    what: str  # one line for people
    apply: Callable[[str], str]  # system text -> system text


def _strip_billing(text: str) -> str:
    return BILLING_LINE.sub("", text) if "x-anthropic-billing-header:" in text else text


RULES: tuple[Rule, ...] = (
    Rule(
        "claude-code-billing-header",
        "Claude Code's `x-anthropic-billing-header: ...` line (changes every request) is removed",
        _strip_billing,
    ),
)


def _clean_text(text: str, applied: list[str]) -> str:
    for rule in RULES:
        cleaned = rule.apply(text)
        if cleaned != text:
            applied.append(rule.name)
            text = cleaned
    return text


def _clean_content(content: Any, applied: list[str]) -> Any:
    """A system prompt as a string or as a list of text blocks (Anthropic's `system`,
    OpenAI's content parts); blocks left empty are dropped."""
    if isinstance(content, str):
        return _clean_text(content, applied)
    if not isinstance(content, list):
        return content
    out = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            text = _clean_text(block["text"], applied)
            if text != block["text"]:
                if not text.strip():
                    continue
                block = {**block, "text": text}
        out.append(block)
    return out


def clean(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The body with every rule applied to its system prompt(s), and the names of the
    rules that changed something. Only system text is touched: what the user and the
    model wrote is theirs."""
    applied: list[str] = []
    out = body
    if "system" in body:  # Anthropic Messages
        system = _clean_content(body["system"], applied)
        if applied:
            out = {**out, "system": system}
    messages = body.get("messages")
    if isinstance(messages, list):
        changed = False
        new_messages = []
        for message in messages:
            if isinstance(message, dict) and message.get("role") in ("system", "developer"):
                before = len(applied)
                content = _clean_content(message.get("content"), applied)
                if len(applied) > before:
                    message = {**message, "content": content}
                    changed = True
            new_messages.append(message)
        if changed:
            out = {**out, "messages": new_messages}
    instructions = body.get("instructions")  # OpenAI Responses
    if isinstance(instructions, str):
        before = len(applied)
        cleaned = _clean_text(instructions, applied)
        if len(applied) > before:
            out = {**out, "instructions": cleaned}
    return out, applied
