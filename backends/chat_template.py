"""Chat templates from GGUF files, rendered in a Jinja sandbox.

A template shipped in a model file is code from the internet: it runs in
jinja2's ImmutableSandboxedEnvironment, with only the helpers chat templates
expect (raise_exception, strftime_now).
"""

from __future__ import annotations

import datetime
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


def render(
    template: str | None,
    messages: list[dict[str, Any]],
    *,
    enable_thinking: bool,
    add_generation_prompt: bool = True,
    reasoning_effort: str | None = None,
    bos_token: str = "",
    eos_token: str = "",
) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    kwargs: dict[str, Any] = {"enable_thinking": enable_thinking}
    if reasoning_effort and template and "reasoning_effort" in template:
        kwargs["reasoning_effort"] = reasoning_effort
    try:
        return env.from_string(template or CHATML).render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
            **kwargs,
        )
    except TemplateError as exc:
        raise ChatTemplateError(
            f"the model's chat template failed: {exc}", "report it; try another GGUF of the model"
        ) from exc
