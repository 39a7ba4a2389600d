"""Chat templates from GGUF files, rendered in a Jinja sandbox, bounded.

A template shipped in a model file is code from the internet: it runs in
jinja2's ImmutableSandboxedEnvironment, with only the helpers chat templates
expect (raise_exception, strftime_now). The sandbox stops attribute tricks but
not a template that loops for hours or builds a 22 GB string, so rendering is
also bounded: in time (a trace function checks a deadline on every line the
compiled template runs), in the size of strings and lists its operators and
calls may make, and in the size of the output.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from jinja2 import Template, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import ChatTemplateError

MAX_SECONDS = 5.0  # a real template renders a long chat in milliseconds
MAX_CHARS = 16 * 1024 * 1024  # output, and any one string or list it builds
MAX_EXPONENT = 64


class _Bounded(Exception):
    """Raised inside a render that went past a bound."""


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "+", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(right, int) and abs(right) > MAX_EXPONENT:
            raise _Bounded(f"an exponent of {right}")
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(count, int) and len(seq) * count > MAX_CHARS:
                    raise _Bounded(f"a sequence of {len(seq) * count:,} items")
        sequences = isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple))
        if operator == "+" and sequences and len(left) + len(right) > MAX_CHARS:
            raise _Bounded(f"a sequence of {len(left) + len(right):,} items")
        return super().call_binop(context, operator, left, right)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Filters are called directly, not through `call`: bound their arguments too.
        self.filters = {name: _bounded_filter(f) for name, f in self.filters.items()}

    def call(self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _check_arguments(args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)


def _check_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    # str.ljust(10**9), |center(10**9), |indent(10**9)...: refuse sizes no template needs.
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_CHARS:
            raise _Bounded(f"an argument of {value:,}")


def _bounded_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)  # keeps jinja's pass_context / pass_environment marks
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _check_arguments(args, kwargs)
        return fn(*args, **kwargs)

    return bounded


def _deadline_tracer(deadline: float) -> Callable[..., Any]:
    def trace(frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        if time.monotonic() > deadline:
            raise _Bounded(f"more than {MAX_SECONDS:g} s")
        return trace

    return trace


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


@functools.lru_cache(maxsize=8)
def _compiled(template: str) -> Template:
    """Compiling a long template (Qwen3.5's) takes a few hundred times longer than
    rendering it: once per template text. Called inside render's time bound."""
    env = _BoundedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env.from_string(template)


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
    source: str = "",
) -> str:
    """The prompt text; `source` (the model file) names the culprit in errors."""
    kwargs: dict[str, Any] = {"enable_thinking": enable_thinking}
    if tools:
        kwargs["tools"] = tools
    if reasoning_effort and template and "reasoning_effort" in template:
        kwargs["reasoning_effort"] = reasoning_effort
    where = f" of {source}" if source else ""
    previous = sys.gettrace()
    sys.settrace(_deadline_tracer(time.monotonic() + MAX_SECONDS))
    try:
        pieces: list[str] = []
        size = 0
        stream = _compiled(template or CHATML).generate(
            messages=for_template(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
            **kwargs,
        )
        for piece in stream:
            size += len(piece)
            if size > MAX_CHARS:
                raise _Bounded(f"more than {MAX_CHARS:,} characters of output")
            pieces.append(piece)
        return "".join(pieces)
    except _Bounded as exc:
        raise ChatTemplateError(
            f"the chat template{where} went past dspine's bounds ({exc}); it is refused",
            "use another GGUF of the model, or one whose template is sane",
        ) from None
    except (TemplateError, OverflowError, RecursionError, MemoryError, TypeError, ValueError) as exc:
        raise ChatTemplateError(
            f"the chat template{where} failed: {type(exc).__name__}: {exc}",
            "use another GGUF of the model; report it to whoever made the file",
        ) from None
    finally:
        sys.settrace(previous)


PROBE_MESSAGES = [
    {"role": "system", "content": "You are a coding assistant."},
    {"role": "user", "content": "Write hello world in C."},
    {"role": "assistant", "content": 'int main(void) { puts("hello"); }'},
    {"role": "user", "content": "Thanks."},
]


def probe(template: str | None, source: str) -> None:
    """Render a short chat in both thinking modes under the same bounds, before an engine
    starts: a template that hangs or explodes is refused with the model file's name, not
    met mid-chat (llama-server would hang on it in its own template engine)."""
    for thinking in (True, False):
        render(template, PROBE_MESSAGES, enable_thinking=thinking, source=source)


def has_thinking_mode(template: str | None) -> bool:
    """Whether a chat template knows a thinking mode (Qwen's `enable_thinking` switch or a
    `<think>` block). None: the model has no template of its own (llama.cpp's ChatML), no."""
    return template is not None and ("enable_thinking" in template or "<think>" in template)


def model_thinks(path: str) -> bool:
    """Whether the GGUF at `path` has a thinking mode, read from its chat template."""
    from .gguf_header import read_local

    template = read_local(Path(path)).get("tokenizer.chat_template")
    return has_thinking_mode(template if isinstance(template, str) else None)
