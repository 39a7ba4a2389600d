"""Reading tools: read_file, list_files, search. They run at once (no consent)
and cap what they return, so one call cannot flood a small model's context."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from pathlib import Path

from .capture import head_tail
from .paths import ToolRefused, resolve, shown

MAX_FILE_BYTES = 256 * 1024
MAX_LIST = 400
MAX_MATCHES = 200
MAX_OUTPUT_CHARS = 20_000


def read_text(path: Path, name: str) -> str:
    """A project file as text, or a refusal the model can act on."""
    if path.is_dir():
        raise ToolRefused(f"{name!r} is a directory: use list_files to see what it holds")
    if not path.is_file():
        raise ToolRefused(f"{name!r} does not exist: use list_files or search to find the file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ToolRefused(
            f"{name!r} is {size:,} bytes, over the {MAX_FILE_BYTES:,}-byte cap: "
            "use search to find the lines you need, then read_file with start_line and end_line"
        )
    data = path.read_bytes()
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


def project_files(root: Path, under: Path) -> list[Path]:
    """Files below `under`, without what .gitignore ignores (git itself decides, when the
    project is a repository) and never the .git folder."""
    root = root.resolve()
    if (root / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", str(under)],
            cwd=root,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if listed.returncode == 0:
            found = [root / p for p in listed.stdout.decode(errors="replace").split("\0") if p]
            return sorted(p for p in found if p.is_file())
    files = []
    for folder, dirs, names in os.walk(under):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        files += [Path(folder) / n for n in sorted(names)]
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


def search(root: Path, pattern: str, path: str = ".", glob: str | None = None) -> str:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolRefused(f"the pattern {pattern!r} is not a valid Python regular expression: {exc}") from None
    under = resolve(root, path or ".")
    files = [under] if under.is_file() else project_files(root, under)
    hits: list[str] = []
    for file in files:
        name = shown(root, file)
        if not _matches_glob(name, glob) or file.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            text = read_text(file, name)
        except ToolRefused:
            continue  # binary files are skipped, not reported one by one
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                hits.append(f"{name}:{number}: {line[:300]}")
                if len(hits) >= MAX_MATCHES:
                    hits.append(f"… stopped at {MAX_MATCHES} matches (narrow the pattern, path or glob)")
                    return "\n".join(hits)
    return "\n".join(hits) if hits else "no matches"
