"""The line of a llama-server log that says why it stopped.

Its last line is rarely the cause: a failed load ends in "exiting due to model
loading error", an assert in the backtrace gdb prints after it. The cause is the
first assert, or else the first error-level line that is not one of those
summaries.
"""

from __future__ import annotations

import re

# llama.cpp's log prefix: "0.00.015.513 E " (time, level letter), then an optional module tag.
_PREFIX = re.compile(r"^\s*\d+\.\d+\.\d+\.\d+\s+([DIWE])\s+")
_ASSERT = re.compile(r"GGML_ASSERT|GGML_ABORT|Assertion .* failed|terminate called|what\(\):")
_ERROR = re.compile(r"\berror\b|\bfailed\b|\bcannot\b|\binvalid\b", re.IGNORECASE)
# Summaries and debugger noise that follow the cause and say nothing about it.
_NOISE = re.compile(
    r"exiting due to|cleaning up before exit|^\$ |^#\d+\s|\(gdb\)|ptrace|No stack\.|\[New LWP|"
    r"Could not attach|\[Inferior|Using host libthread_db|warning: ",
    re.IGNORECASE,
)


def _text(line: str) -> str:
    return _PREFIX.sub("", line).strip()


def cause_line(lines: list[str]) -> str:
    """The first assert, else the first error line, else the last line ("" for no lines)."""
    useful = [line for line in lines if line.strip() and not _NOISE.search(line)]
    for line in useful:
        if _ASSERT.search(line):
            return _text(line)
    for line in useful:
        level = _PREFIX.match(line)
        if (level and level.group(1) == "E") or (not level and _ERROR.search(line)):
            return _text(line)
    return _text(lines[-1]) if lines else ""
