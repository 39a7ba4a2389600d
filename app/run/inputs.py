"""The numbers `run`, `chat` and `bench` take, checked before any engine starts.

Both engines would otherwise read the edge cases their own way (llama.cpp takes
`--ctx 0` for "the model's own length", `-n 0` for "unbounded", a seed of -1
for "random"; llama-cpp-python takes none of these): one rule for all here.
"""

from __future__ import annotations

import math
import sys

from ..errors import UsageError

MIN_CTX = 128  # room for a chat template and a short prompt


def _finite(flag: str, value: float | None, low: float, high: float = math.inf) -> None:
    if value is None:
        return
    if not math.isfinite(value) or not low <= value <= high:
        span = f"at least {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
        raise UsageError(f"{flag} {value!r} is not a usable value", f"give {flag} a number {span}")


def _at_least(flag: str, value: int | None, low: int, fix: str = "") -> None:
    if value is not None and value < low:
        raise UsageError(f"{flag} {value} is too small", fix or f"give {flag} {low} or more")


def check_sampling(
    *,
    temp: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    min_p: float | None = None,
    presence_penalty: float | None = None,
    seed: int | None = None,
) -> None:
    _finite("--temp", temp, 0.0)
    _finite("--top-p", top_p, 0.0, 1.0)
    _finite("--min-p", min_p, 0.0, 1.0)
    _finite("--presence-penalty", presence_penalty, -2.0, 2.0)
    _at_least("--top-k", top_k, 0, "give --top-k 0 (no limit) or more")
    _at_least("--seed", seed, 0, "give a seed of 0 or more, or leave --seed out for a random one")


def check_lengths(*, max_tokens: int | None = None, n_max: int | None = None, ctx: int | None = None) -> None:
    _at_least("--max-tokens", max_tokens, 1)
    _at_least("--n-max", n_max, 1, "give --n-max 1 or more; to run without drafting use --draft none")
    _at_least("--ctx", ctx, MIN_CTX)


def check_prompt(prompt: str, flag: str, fix: str) -> None:
    """A prompt worth sending: not empty, and text (a command line or a pipe of bytes that are
    not UTF-8 arrives as lone surrogates, which no engine can encode)."""
    if not prompt.strip():
        raise UsageError(f"{flag} got an empty prompt", fix)
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"the prompt is not UTF-8 text (a byte that is not, at character {exc.start + 1})",
            "give the prompt as UTF-8 (e.g. convert the file with iconv -t utf-8)",
        ) from None


def read_stdin() -> str:
    """The prompt piped in (`-`): bytes that are not UTF-8 kept as lone surrogates, so that
    `check_prompt` says where, rather than the read failing."""
    return sys.stdin.buffer.read().decode("utf-8", "surrogateescape")


def piped_stdin() -> str | None:
    """What was piped or redirected into a command that got its prompt as an argument
    (`git diff | dspine run M "review this"`): read, to go after the prompt, as `claude -p`
    and `llm` take it, rather than dropped without a word. None where standard input is a
    terminal, is empty, or has nothing to read yet (a script's inherited pipe is not waited on)."""
    import select

    stream = sys.stdin
    try:
        if stream is None or stream.isatty():
            return None
        ready, _, _ = select.select([stream.fileno()], [], [], 0)
    except (OSError, ValueError):
        return None  # no file descriptor (a test's stand-in), or one select cannot watch (Windows)
    if not ready:
        return None
    text = read_stdin()
    return text if text.strip() else None


def with_piped(prompt: str) -> str:
    """The prompt and, after it, what was piped in (see piped_stdin)."""
    if prompt == "-":
        return prompt
    piped = piped_stdin()
    return f"{prompt}\n\n{piped}" if piped is not None else prompt
