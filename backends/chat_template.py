"""Chat templates from GGUF files, rendered in a Jinja sandbox.

A template shipped in a model file is code from the internet: it runs in
jinja2's ImmutableSandboxedEnvironment, with only the helpers chat templates
expect (raise_exception, strftime_now).
"""

from __future__ import annotations

import contextlib
import datetime
import json
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import ChatTemplateError

# ChatML with Qwen3's thinking switch, for models that carry no template.
CHATML = (
    r"{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor %}"
    r"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    r"{% if enable_thinking is defined and not enable_thinking %}{{ '<think>\n\n</think>\n\n' }}{% endif %}"
    r"{% endif %}"
)


def _raise(message: str) -> None:
    raise TemplateError(message)


def for_template(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as chat templates expect them: tool-call arguments as objects (the
    OpenAI API sends JSON text; Qwen's templates iterate over the arguments' items)."""
    shaped = []
    for message in messages:
        message = {**message, "content": message.get("content") or ""}
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = dict(call.get("function") or {})
                if isinstance(function.get("arguments"), str):
                    # The model's own broken JSON goes back as it wrote it.
                    with contextlib.suppress(json.JSONDecodeError):
                        function["arguments"] = json.loads(function["arguments"] or "{}")
                calls.append({**call, "function": function})
            message["tool_calls"] = calls
        shaped.append(message)
    return shaped


def render(
    template: str | None,
    messages: list[dict[str, Any]],
    *,
    enable_thinking: bool,
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    reasoning_effort: str | None = None,
    bos_token: str = "",
    eos_token: str = "",
) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    kwargs: dict[str, Any] = {"enable_thinking": enable_thinking}
    if tools:
        kwargs["tools"] = tools
    if reasoning_effort and template and "reasoning_effort" in template:
        kwargs["reasoning_effort"] = reasoning_effort
    try:
        return env.from_string(template or CHATML).render(
            messages=for_template(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
            **kwargs,
        )
    except TemplateError as exc:
        raise ChatTemplateError(
            f"the model's chat template failed: {exc}", "report it; try another GGUF of the model"
        ) from exc
