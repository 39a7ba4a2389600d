"""The types of a request body's fields, checked before anything reads them or
llama-server sees them, pure: a wrong type is a 400 that names the field, never
a 500 with a traceback (`"model": 5`, `"chat_template_kwargs": "abc"`,
`"messages": {}`). Only types are checked; values (ranges, roles, lengths) stay
llama-server's to judge, and fields dspine does not know pass untouched."""

from __future__ import annotations

import json
from typing import Any

from ..nesting import nested_deeper

# Deeper than any chat, tool list or JSON schema a client sends; deeper nesting would
# exhaust Python's recursion (json.loads, then every walk of the body) and answer 500.
MAX_JSON_DEPTH = 128


class NotJson(ValueError):
    """A request body that is not JSON dspine reads, with the reason for the 400."""


def parse_body(path: str, raw: bytes) -> Any:
    """The request body as JSON, or NotJson with a message naming the endpoint."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise NotJson(_too_deep(path)) from None
    except ValueError:
        raise NotJson(f"{path}: the request body is not JSON") from None
    if nested_deeper(body, MAX_JSON_DEPTH):
        raise NotJson(_too_deep(path))
    return body


def _too_deep(path: str) -> str:
    return f"{path}: the request body nests lists and objects more than {MAX_JSON_DEPTH} deep: send flatter JSON"


# JSON type names as the message says them.
_STRING, _OBJECT, _LIST, _NUMBER, _BOOL = "a string", "an object", "a list", "a number", "true or false"

# Top-level fields, every endpoint: name -> the kinds it may be (None is always allowed).
COMMON: dict[str, tuple[str, ...]] = {
    "model": (_STRING,),
    "stream": (_BOOL,),
    "chat_template_kwargs": (_OBJECT,),
    "reasoning_effort": (_STRING,),
    "thinking": (_OBJECT,),
    "temperature": (_NUMBER,),
    "top_p": (_NUMBER,),
    "top_k": (_NUMBER,),
    "min_p": (_NUMBER,),
    "presence_penalty": (_NUMBER,),
    "frequency_penalty": (_NUMBER,),
    "repeat_penalty": (_NUMBER,),
    "seed": (_NUMBER,),
    "max_tokens": (_NUMBER,),
    "max_completion_tokens": (_NUMBER,),
    "max_output_tokens": (_NUMBER,),
    "n_predict": (_NUMBER,),
    "speculative.n_max": (_NUMBER,),
    "stop": (_STRING, _LIST),
    "stop_sequences": (_LIST,),
    "tools": (_LIST,),
    "tool_choice": (_STRING, _OBJECT),
    "response_format": (_OBJECT,),
    "stream_options": (_OBJECT,),
    "metadata": (_OBJECT,),
}
# Per endpoint: the fields that carry the conversation, and whether they must be there.
CONVERSATION: dict[str, dict[str, tuple[tuple[str, ...], bool]]] = {
    "/v1/chat/completions": {"messages": ((_LIST,), True)},
    "/chat/completions": {"messages": ((_LIST,), True)},
    "/v1/completions": {"prompt": ((_STRING, _LIST), True)},
    "/completions": {"prompt": ((_STRING, _LIST), True)},
    "/v1/messages": {"messages": ((_LIST,), True), "system": ((_STRING, _LIST), False)},
    "/v1/messages/count_tokens": {"messages": ((_LIST,), True), "system": ((_STRING, _LIST), False)},
    "/v1/responses": {"input": ((_STRING, _LIST), True), "instructions": ((_STRING,), False)},
    "/apply-template": {"messages": ((_LIST,), True)},
    "/tokenize": {"content": ((_STRING, _LIST), True)},
    "/detokenize": {"tokens": ((_LIST,), True)},
}
# Inside each message (OpenAI chat and Anthropic Messages).
MESSAGE: dict[str, tuple[str, ...]] = {
    "role": (_STRING,),
    "content": (_STRING, _LIST),
    "name": (_STRING,),
    "tool_calls": (_LIST,),
    "tool_call_id": (_STRING,),
    "reasoning_content": (_STRING,),
}


def _kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return _BOOL
    if isinstance(value, (int, float)):
        return _NUMBER
    if isinstance(value, str):
        return _STRING
    if isinstance(value, list):
        return _LIST
    if isinstance(value, dict):
        return _OBJECT
    return None  # null


def _wrong(where: str, value: Any, kinds: tuple[str, ...]) -> str | None:
    kind = _kind(value)
    if kind is None or kind in kinds:
        return None
    return f"{where} must be {' or '.join(kinds)}, not {kind} ({_short(value)})"


def _short(value: Any) -> str:
    if isinstance(value, (list, dict)):  # never the repr of a large body
        return f"{len(value)} items"
    text = repr(value[:40] if isinstance(value, str) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _message_problem(where: str, message: Any) -> str | None:
    if not isinstance(message, dict):
        return f"{where} must be an object, not {_kind(message) or 'null'}"
    if "role" not in message and "type" not in message:  # Responses input items carry a type instead
        return f"{where} has no role"
    for field, kinds in MESSAGE.items():
        problem = _wrong(f"{where}.{field}", message.get(field), kinds)
        if problem:
            return problem
    content = message.get("content")
    if isinstance(content, list):
        for index, part in enumerate(content):
            if not isinstance(part, dict):
                return f"{where}.content[{index}] must be an object (a content part), not {_kind(part) or 'null'}"
            problem = _wrong(f"{where}.content[{index}].type", part.get("type"), (_STRING,))
            if problem:
                return problem
    for index, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, dict):
            return f"{where}.tool_calls[{index}] must be an object, not {_kind(call) or 'null'}"
    return None


def body_problem(path: str, body: Any) -> str | None:
    """What is wrong with the body's types for `path` (naming the field), or None."""
    if not isinstance(body, dict):
        return f"{path}: the request body must be a JSON object, not {_kind(body) or 'null'}"
    for field, kinds in COMMON.items():
        problem = _wrong(field, body.get(field), kinds)
        if problem:
            return f"{path}: {problem}"
    for field, (kinds, required) in CONVERSATION.get(path, {}).items():
        if required and body.get(field) is None:
            return f"{path}: {field} is missing"
        problem = _wrong(field, body.get(field), kinds)
        if problem:
            return f"{path}: {problem}"
    for field in ("messages", "input"):
        items = body.get(field)
        if field in CONVERSATION.get(path, {}) and isinstance(items, list):
            for index, message in enumerate(items):
                problem = _message_problem(f"{field}[{index}]", message)
                if problem:
                    return f"{path}: {problem}"
    for index, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict):
            return f"{path}: tools[{index}] must be an object, not {_kind(tool) or 'null'}"
    return None
