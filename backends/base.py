"""The engine interface: every backend streams the same events.

engine = open_engine(...)            # a running engine
for event in engine.stream(messages, think=False, sampling=...):
    ...                               # Delta, StatsUpdate, End or Error
engine.cancel()                       # from another thread: stop mid-reply
engine.close()
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .errors import EngineError
from .events import Event
from .gguf_header import read_local
from .sampling import Sampling

__all__ = ["Engine", "EngineError", "check_model_file", "check_same_vocabulary"]


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
    ) -> Iterator[Event]: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...


def check_model_file(path: str | Path, role: str = "model") -> Path:
    path = Path(path)
    if not path.is_file():
        raise EngineError(f"the {role} file {path} does not exist", "check the path, or pull it with `dspine pull`")
    return path


def _vocabulary(path: Path) -> tuple[int, str, str]:
    header = read_local(path)
    tokens = header.get("tokenizer.ggml.tokens")
    return (
        len(tokens) if tokens is not None else 0,
        str(header.get("tokenizer.ggml.model", "")),
        str(header.get("tokenizer.ggml.pre", "")),
    )


def check_same_vocabulary(target: Path, drafter: Path) -> None:
    """A drafter proposes token ids: they must mean the same to the target."""
    t, d = _vocabulary(target), _vocabulary(drafter)
    if t != d:
        raise EngineError(
            f"the drafter {drafter.name} has another vocabulary ({d[0]} tokens, {d[1]}/{d[2]}) "
            f"than the target {target.name} ({t[0]} tokens, {t[1]}/{t[2]})",
            "use a drafter made for this target (see `dspine list --catalog`), or --draft none",
        )
