"""`@path` in a prompt attaches a text file for coding context. Pure but for reading the file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MAX_ATTACHMENT = 256 * 1024  # bytes: more would crowd the context out
_MENTION = re.compile(r"(?<!\S)@(\S+)")


@dataclass(frozen=True)
class Attachment:
    path: Path
    text: str

    @property
    def size(self) -> int:
        return len(self.text.encode())


class AttachmentError(ValueError):
    pass


def read_attachment(raw: str, cwd: Path) -> Attachment:
    path = (cwd / raw).expanduser() if not Path(raw).is_absolute() else Path(raw)
    if not path.is_file():
        raise AttachmentError(f"@{raw}: no such file")
    size = path.stat().st_size
    if size > MAX_ATTACHMENT:
        raise AttachmentError(f"@{raw}: {size:,} bytes is too big to attach (limit {MAX_ATTACHMENT:,})")
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise AttachmentError(f"@{raw}: a binary file, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AttachmentError(f"@{raw}: not UTF-8 text") from exc
    return Attachment(path, text)


def expand_mentions(prompt: str, cwd: Path) -> tuple[str, list[Attachment]]:
    """The prompt with each attached file's text appended in a fenced block."""
    attachments = [read_attachment(m, cwd) for m in _MENTION.findall(prompt)]
    if not attachments:
        return prompt, []
    blocks = [f"\n\nFile `{a.path.name}`:\n```\n{a.text.rstrip()}\n```" for a in attachments]
    return prompt + "".join(blocks), attachments
