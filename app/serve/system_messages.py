"""The message rule of backends/message_order.py applied to each API's request body,
pure, before llama-server turns the body into chat messages for the template:

- chat completions: `messages`, as they are;
- Anthropic Messages: the top-level `system` is the leading system message; a
  `system` (or `developer`) message inside `messages` is a later one;
- Responses: `instructions` is the leading system message; `system` and `developer`
  input items are later ones.

IN_PLACE: developer messages become system messages where they stand. MERGE: every
later system text joins the leading one (`system`, `instructions`), in order, and
its message leaves the list; nothing else moves. A body that is not of the expected
shape goes on unchanged: llama-server answers it with its own error."""

from __future__ import annotations

from typing import Any

from backends.message_order import IN_PLACE, JOIN, SystemRule, as_system, is_system, normalise


class SystemMessageError(ValueError):
    """A system message dspine cannot move without losing part of it (says which)."""


def chat(body: dict[str, Any], rule: SystemRule) -> dict[str, Any]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    return {**body, "messages": normalise(messages, rule)}


def _texts(content: Any, where: str, text_types: tuple[str, ...]) -> list[str]:
    """The texts of a system message's content (a string or text blocks); anything else
    would be lost by a move into a text-only field: refused."""
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        texts = []
        for block in content:
            if not (isinstance(block, dict) and block.get("type") in text_types and isinstance(block.get("text"), str)):
                kind = block.get("type") if isinstance(block, dict) else type(block).__name__
                raise SystemMessageError(f"{where}: a system message may hold only text here, not {kind!r}")
            texts.append(block["text"])
        return texts
    raise SystemMessageError(f"{where}: a system message's content must be text")


def anthropic(body: dict[str, Any], rule: SystemRule) -> dict[str, Any]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(is_system(m) for m in messages):
        return body
    if rule == IN_PLACE:
        return {**body, "messages": [as_system(m) if is_system(m) else m for m in messages]}
    texts: list[str] = []
    for index, message in enumerate(messages):
        if is_system(message):
            texts.append("".join(_texts(message.get("content"), f"messages[{index}]", ("text",))))
    texts = [t for t in texts if t]
    system = body.get("system")
    if isinstance(system, list):
        # llama-server joins text blocks with nothing between them: the blank line is in the block.
        merged: Any = list(system) + [{"type": "text", "text": (JOIN if system else "") + t} for t in texts]
    else:
        merged = JOIN.join(([system] if isinstance(system, str) and system else []) + texts)
    return {**body, "system": merged, "messages": [m for m in messages if not is_system(m)]}


def responses(body: dict[str, Any], rule: SystemRule) -> dict[str, Any]:
    items = body.get("input")
    if not isinstance(items, list) or not any(is_system(i) for i in items):
        return body
    if rule == IN_PLACE:
        return {**body, "input": [as_system(i) if is_system(i) else i for i in items]}
    texts = []
    for index, item in enumerate(items):
        if is_system(item):
            texts.append("".join(_texts(item.get("content"), f"input[{index}]", ("input_text", "text"))))
    instructions = body.get("instructions")
    leading = [instructions] if isinstance(instructions, str) and instructions else []
    merged = JOIN.join(leading + [t for t in texts if t])
    return {**body, "instructions": merged, "input": [i for i in items if not is_system(i)]}


BY_PATH = {
    "/v1/chat/completions": chat,
    "/chat/completions": chat,
    "/v1/messages": anthropic,
    "/v1/messages/count_tokens": anthropic,
    "/v1/responses": responses,
    "/apply-template": chat,
}


def apply(path: str, body: dict[str, Any], rule: SystemRule) -> dict[str, Any]:
    """The body for llama-server; raises SystemMessageError for what cannot be moved whole."""
    shape = BY_PATH.get(path)
    return shape(body, rule) if shape is not None else body
