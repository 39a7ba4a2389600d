"""The engine interface: every backend streams the same events.

engine = open_engine(...)            # a running engine
for event in engine.stream(messages, think=False, sampling=..., tools=[...]):
    ...                               # Delta, ToolCall, StatsUpdate, End or Error
engine.cancel()                       # from another thread: stop mid-reply
engine.count_tokens(messages, tools)  # prompt tokens these would take (the model's own tokenizer)
engine.context_size                   # tokens one conversation may hold (None: unknown)
engine.close()
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .errors import ContextFull, EngineError
from .events import Event
from .gguf_header import ArrayInfo, items_sha256, read_local
from .sampling import Sampling

__all__ = ["ContextFull", "Engine", "EngineError", "check_model_file", "check_same_vocabulary", "estimate_tokens"]

# Where no tokenizer is at hand (a remote server): about 3 characters a token for code and
# English in BPE vocabularies, rounded down so the estimate errs on the full side.
CHARS_PER_TOKEN = 3.0
TOKENS_PER_MESSAGE = 6  # role markers and separators a chat template adds per message


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """A tokenizer-free guess at a prompt's size, on the full side."""
    import json

    chars = sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)
    if tools:
        chars += len(json.dumps(tools, ensure_ascii=False))
    return int(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)


class Engine(Protocol):
    @property
    def name(self) -> str: ...  # "server", "inproc", "remote"

    @property
    def drafter(self) -> str | None: ...  # the drafter kind it runs, if any

    @property
    def drafter_name(self) -> str | None: ...  # which drafter: its file (or the kind, when it has none)

    def stream(
        self,
        messages: list[dict[str, Any]],
        think: bool = True,
        sampling: Sampling | None = None,
        n_max: int | None = None,
        tools: list[dict[str, Any]] | None = None,  # OpenAI function tools the model may call
    ) -> Iterator[Event]: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...

    def count_tokens(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, think: bool = True
    ) -> int: ...  # the prompt these would make, in the model's tokens (an estimate where none can be had)

    @property
    def context_size(self) -> int | None: ...  # tokens one conversation may hold (per slot); None: unknown


def check_model_file(path: str | Path, role: str = "model") -> Path:
    path = Path(path)
    if path.is_dir():
        raise EngineError(f"the {role} {path} is a folder, not a GGUF file", "give the path of a .gguf file")
    if not path.is_file():
        raise EngineError(f"the {role} file {path} does not exist", "check the path, or pull it with `dspine pull`")
    return path


@dataclass(frozen=True)
class Vocabulary:
    """What makes token ids mean the same in two files: their texts and which ones are special."""

    size: int
    model: str
    pre: str
    tokens_sha256: str  # of every token text, in id order
    types_sha256: str  # of every token type (normal, control, user-defined...), in id order

    def describe(self) -> str:
        return f"{self.size} tokens, {self.model}/{self.pre}, token list {self.tokens_sha256[:12]}"


def _digest(values: Any) -> str:
    if isinstance(values, ArrayInfo):  # a long array: the reader digested it as it went
        return values.sha256
    return items_sha256(values or ())


def vocabulary(path: Path) -> Vocabulary:
    header = read_local(path)
    tokens = header.get("tokenizer.ggml.tokens")
    return Vocabulary(
        len(tokens) if tokens is not None else 0,
        str(header.get("tokenizer.ggml.model", "")),
        str(header.get("tokenizer.ggml.pre", "")),
        _digest(tokens),
        _digest(header.get("tokenizer.ggml.token_type")),
    )


def check_same_vocabulary(target: Path, drafter: Path) -> None:
    """A drafter proposes token ids: they must mean the same to the target, spelling included."""
    t, d = vocabulary(target), vocabulary(drafter)
    if t == d:
        return
    if (t.size, t.model, t.pre, t.tokens_sha256) == (d.size, d.model, d.pre, d.tokens_sha256):
        what = "marks other tokens as special"
    elif (t.size, t.model, t.pre) == (d.size, d.model, d.pre):
        what = "spells its tokens differently"
    else:
        what = "has another vocabulary"
    raise EngineError(
        f"the drafter {drafter.name} {what} than the target {target.name} "
        f"(drafter: {d.describe()}; target: {t.describe()})",
        "use a drafter made for this target (see `dspine list --catalog`), or --draft none",
    )
