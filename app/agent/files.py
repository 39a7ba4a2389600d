"""Reading tools: read_file, list_files, search. They run at once (no consent)
and cap what they return, so one call cannot flood a small model's context."""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from pathlib import Path

import regex

from . import safe_files
from .capture import head_tail
from .paths import ToolRefused, resolve, shown
from .safe_git import run_git

MAX_FILE_BYTES = 256 * 1024
MAX_LIST = 400
MAX_MATCHES = 200
MAX_OUTPUT_CHARS = 20_000
# A line range of a file over MAX_FILE_BYTES is read as a stream: this far into the file at
# most, and each line cut to this many characters.
MAX_RANGE_SCAN_BYTES = 256 * 1024 * 1024
MAX_LINE_CHARS = 2000
# A pattern such as (a+)+$ backtracks for ever on a long line; the whole search gets this long.
SEARCH_BUDGET_S = 5.0


def read_text(root: Path, path: Path, name: str) -> str:
    """A project file (a real path from resolve()) as text, or a refusal the model can act on."""
    try:
        data = safe_files.read_bytes(root, path, name, MAX_FILE_BYTES)
    except FileNotFoundError:
        raise ToolRefused(f"{name!r} does not exist: use list_files or search to find the file") from None
    except OSError as exc:  # permission denied, an I/O error
        raise ToolRefused(f"{name!r} cannot be read ({exc.strerror}): choose another file") from None
    if b"\0" in data[:8192]:
        raise ToolRefused(f"{name!r} is a binary file: only text files can be read or edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolRefused(f"{name!r} is not UTF-8 text: only text files can be read or edited") from None


def numbered(text: str, start_line: int = 1, end_line: int | None = None) -> str:
    lines = text.splitlines()
    if start_line < 1:
        start_line = 1
    end = len(lines) if end_line is None else min(end_line, len(lines))
    if start_line > max(len(lines), 1):
        raise ToolRefused(f"start_line {start_line} is past the end of the file ({len(lines)} lines)")
    body = "\n".join(f"{n:>5}\t{lines[n - 1]}" for n in range(start_line, end + 1))
    # Head and tail: the end of a file (a log's last lines) matters as much as its start.
    return head_tail(body, MAX_OUTPUT_CHARS, "read the lines you need with start_line and end_line")


def read_range(
    root: Path,
    path: Path,
    name: str,
    start_line: int = 1,
    end_line: int | None = None,
    *,
    max_chars: int = MAX_OUTPUT_CHARS,
) -> str:
    """Numbered lines of a file too large to read whole, read as a stream: only the lines
    asked come back, at most `max_chars` of them, and no more than MAX_RANGE_SCAN_BYTES of
    the file is read to reach them."""
    start_line = max(1, start_line)
    lines: list[str] = []
    size = number = scanned = 0
    try:
        with safe_files.opened(root, path, name) as (handle, _):
            if b"\0" in handle.read(8192):
                raise ToolRefused(f"{name!r} is a binary file: only text files can be read or edited")
            handle.seek(0)
            while end_line is None or number < end_line:
                if scanned >= MAX_RANGE_SCAN_BYTES:
                    return _past_the_scan(name, number, lines)
                raw = handle.readline(MAX_LINE_CHARS * 4)
                if not raw:
                    break
                scanned += len(raw)
                rest = raw
                while not rest.endswith(b"\n") and scanned < MAX_RANGE_SCAN_BYTES:  # a long line's rest
                    rest = handle.readline(64 * 1024)
                    if not rest:
                        break
                    scanned += len(rest)
                number += 1
                if number < start_line:
                    continue
                text = raw.decode("utf-8", errors="replace").rstrip("\r\n")[:MAX_LINE_CHARS]
                line = f"{number:>5}\t{text}"
                if lines and size + len(line) + 1 > max_chars:
                    lines.append(f"… (cut at line {number}: read on with start_line={number})")
                    break
                size += len(line) + 1
                lines.append(line)
    except FileNotFoundError:
        raise ToolRefused(f"{name!r} does not exist: use list_files or search to find the file") from None
    except OSError as exc:
        raise ToolRefused(f"{name!r} cannot be read ({exc.strerror}): choose another file") from None
    if not lines:
        raise ToolRefused(f"start_line {start_line} is past the end of the file ({number} lines)")
    return "\n".join(lines)


def _past_the_scan(name: str, number: int, lines: list[str]) -> str:
    limit = f"{MAX_RANGE_SCAN_BYTES // 2**20} MiB"
    if not lines:
        raise ToolRefused(
            f"{name!r}: the lines asked lie past its first {limit} ({number:,} lines), further than read_file "
            "reads into a file"
        )
    return "\n".join([*lines, f"… (stopped at line {number:,}: read_file reads no further than {limit} into a file)"])


def _stays_inside(root: Path, path: Path) -> bool:
    """A regular file whose real path is inside the project: a committed `leak.txt ->
    ~/.ssh/id_ed25519` is neither listed nor searched, and a FIFO is never opened."""
    try:
        real = path.resolve(strict=True)
        return real.is_relative_to(root) and stat.S_ISREG(os.stat(real).st_mode)
    except (OSError, RuntimeError):  # a dangling link, a loop
        return False


def project_files(root: Path, under: Path) -> list[Path]:
    """Files below `under`, without what .gitignore ignores (git itself decides, when the
    project is a repository), never the .git folder, and never what leads out of the project."""
    root = root.resolve()
    if (root / ".git").exists():
        # Never the project's own fsmonitor, hooks or pager: this tool asks no consent.
        listed = run_git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", str(under))
        if listed.returncode == 0:
            found = [root / p for p in listed.stdout.decode(errors="replace").split("\0") if p]
            return sorted(p for p in found if _stays_inside(root, p))
    files = []
    # os.walk does not descend into linked folders (followlinks=False); linked files are checked.
    for folder, dirs, names in os.walk(under):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        files += [Path(folder) / n for n in sorted(names) if _stays_inside(root, Path(folder) / n)]
    return files


def _matches_glob(relative: str, glob: str | None) -> bool:
    return glob is None or fnmatch.fnmatch(relative, glob) or fnmatch.fnmatch(relative.rsplit("/", 1)[-1], glob)


def list_files(root: Path, path: str = ".", glob: str | None = None) -> str:
    under = resolve(root, path or ".")
    if not under.is_dir():
        raise ToolRefused(f"{path!r} is not a directory: give a folder of the project, or leave path out")
    names = [shown(root, p) for p in project_files(root, under)]
    names = [n for n in names if _matches_glob(n, glob)]
    if not names:
        return "no files match"
    more = len(names) - MAX_LIST
    listing = "\n".join(names[:MAX_LIST])
    return listing + (f"\n… and {more} more (narrow it with path or glob)" if more > 0 else "")


def search(root: Path, pattern: str, path: str = ".", glob: str | None = None, budget_s: float | None = None) -> str:
    # `regex`, not `re`: the same syntax, and its matching can be given a timeout.
    try:
        compiled = regex.compile(pattern)
    except regex.error as exc:
        raise ToolRefused(f"the pattern {pattern!r} is not a valid Python regular expression: {exc}") from None
    under = resolve(root, path or ".")
    files = [under] if under.is_file() else project_files(root, under)
    budget_s = SEARCH_BUDGET_S if budget_s is None else budget_s
    deadline = time.monotonic() + budget_s
    hits: list[str] = []
    for file in files:
        name = shown(root, file)
        if not _matches_glob(name, glob):
            continue
        try:
            real = resolve(root, name)
            text = read_text(root, real, name)
        except ToolRefused:
            continue  # binary, too big or leading out: skipped, not reported one by one
        for number, line in enumerate(text.splitlines(), start=1):
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                found = compiled.search(line, timeout=left)
            except TimeoutError:
                return _out_of_time(hits, budget_s, f"{name}:{number}")
            if found:
                hits.append(f"{name}:{number}: {line[:300]}")
                if len(hits) >= MAX_MATCHES:
                    hits.append(f"… stopped at {MAX_MATCHES} matches (narrow the pattern, path or glob)")
                    return "\n".join(hits)
    return "\n".join(hits) if hits else "no matches"


def _out_of_time(hits: list[str], budget_s: float, where: str) -> str:
    note = (
        f"error: the search ran out of its {budget_s:g} s budget at {where} and was stopped. "
        "The pattern may backtrack without end (nested repeats such as (a+)+ or (a|aa)+): "
        "write it without nested repeats, or narrow path or glob."
    )
    return "\n".join([note, "matches found before it stopped:", *hits]) if hits else note
