"""`dspine bench --depth`: each prompt preceded by that many tokens of real context,
so a drafter's acceptance can be read against how deep into a session it is.

Pure where it can be: depth lists, choosing the context text, which depths fit.
Counting tokens needs the target's tokenizer, passed in as a function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..models.catalog import builtin_catalog_path

SOURCE_SUFFIXES = (".py", ".md", ".toml", ".txt", ".rs", ".go", ".js", ".ts", ".c", ".h", ".cpp")
PREFACE = "Here is code from the project we are working on:\n\n"


def parse_depths(text: str) -> list[int]:
    """ "0,8k,32k" -> [0, 8192, 32768]; plain numbers are tokens."""
    depths = []
    for item in (x.strip().lower() for x in text.split(",") if x.strip()):
        try:
            depths.append(int(float(item[:-1]) * 1024) if item.endswith("k") else int(item))
        except ValueError:
            raise UsageError(f"--depth {text!r}: {item!r} is not a number of tokens", "write e.g. 0,8k,32k") from None
        if depths[-1] < 0:
            raise UsageError(f"--depth {text!r}: a depth cannot be negative", "write e.g. 0,8k,32k")
    return sorted(set(depths))


def label(depth: int) -> str:
    return f"{depth // 1024}k" if depth and depth % 1024 == 0 else str(depth)


def default_context_files() -> list[Path]:
    """dspine's own source, shipped with it: real code a coding session would read."""
    root = builtin_catalog_path().parent.parent
    return sorted(p for folder in ("backends", "app") for p in (root / folder).rglob("*.py"))


def context_corpus(files: Iterable[Path]) -> str:
    parts = []
    for path in files:
        paths = sorted(p for p in path.rglob("*") if p.suffix in SOURCE_SUFFIXES) if path.is_dir() else [path]
        for item in paths:
            try:
                parts.append(f"# file: {item.name}\n{item.read_text(encoding='utf-8', errors='replace')}\n")
            except OSError as exc:
                raise UsageError(f"cannot read context file {item}: {exc.strerror}", "check --context-files") from exc
    if not parts:
        raise UsageError("no context files to read", "give --context-files with source files or folders")
    return "".join(parts)


def context_of(corpus: str, depth: int, tokenize: Callable[[str], list[int]], detokenize: Callable[[list[int]], str]):
    """The first `depth` tokens of the corpus (repeated if it is shorter), as text."""
    if depth == 0:
        return ""
    tokens = tokenize(corpus)
    if not tokens:
        return ""
    while len(tokens) < depth:
        tokens = tokens + tokens
    return detokenize(tokens[:depth])


def with_context(messages: list[dict], context: str) -> list[dict]:
    """The context goes before the first user message's text."""
    if not context:
        return messages
    out = [dict(m) for m in messages]
    first = next((m for m in out if m.get("role") == "user"), None)
    if first is None:
        return [{"role": "user", "content": PREFACE + context}, *out]
    first["content"] = PREFACE + context + "\n\n" + str(first["content"])
    return out


@dataclass(frozen=True)
class Skipped:
    depth: int
    reason: str


def fitting(
    depths: list[int], ctx: int, prompt_tokens: int, max_tokens: int, why_not: Callable[[int], str | None]
) -> tuple[list[int], list[Skipped], int]:
    """Depths whose prompt and reply fit, the others with why, and the context to run
    them all at (at least `ctx`). `why_not(n_ctx)` is the fit plan's verdict on a context
    of n_ctx tokens (None: it fits), asked only past `ctx`."""
    fits, skipped = [], []
    longest = ctx
    for depth in depths:
        need = depth + prompt_tokens + max_tokens
        reason = why_not(need) if need > ctx else None
        if reason is None:
            fits.append(depth)
            longest = max(longest, need)
        else:
            needs = f"needs {need:,} tokens ({label(depth)} of context, prompt, {max_tokens} generated)"
            skipped.append(Skipped(depth, f"{needs}; {reason}"))
    return fits, skipped, longest


def acceptance_chart(rows: list, width: int = 30) -> list[str]:
    """Acceptance rate per depth and drafter as bars, one line each."""
    lines = []
    for row in rows:
        if row.acceptance_rate is None:
            continue
        bar = "█" * round(row.acceptance_rate * width)
        lines.append(f"{label(row.depth):>6}  {row.drafter[:28]:<28} {bar:<{width}} {row.acceptance_rate:.0%}")
    return lines
