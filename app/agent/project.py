"""The chat's project: the git root above the working directory (else the
directory itself) and its instructions file, which goes into the system prompt."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import safe_files
from .paths import ToolRefused, resolve

# The first that exists is used; the names other assistants read, so one file serves all.
INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
MAX_INSTRUCTIONS = 64 * 1024  # more than this would crowd the context; the rest is cut


@dataclass(frozen=True)
class Project:
    root: Path
    instructions_file: Path | None = None
    instructions: str = ""
    refused: str = ""  # why an instructions file that is there was not read (a link out, a hard link)

    @property
    def instructions_size(self) -> int:
        return len(self.instructions.encode())


def find_root(cwd: Path) -> Path:
    """The git root above `cwd`, but never the home folder or a folder above it: a dotfiles
    repository in `~` is not the project of every folder beneath it (app/agent/guarded.py)."""
    cwd = cwd.resolve()
    home = Path.home().resolve()
    for folder in (cwd, *cwd.parents):
        if folder == home or home.is_relative_to(folder):
            break
        if (folder / ".git").exists():
            return folder
    return cwd


def open_project(cwd: Path) -> Project:
    root = find_root(cwd)
    refused = ""
    for name in INSTRUCTION_FILES:
        # Like every tool's read: an instructions file that links out of the project (it would
        # go to the model, a remote one too), is a hard link (it may be a file outside), or is
        # a FIFO (which would hang the start) is skipped, and the chat says why.
        try:
            path = resolve(root, name)
            data = safe_files.read_bytes(root, path, name, MAX_INSTRUCTIONS, cut=True)
        except FileNotFoundError:
            continue
        except ToolRefused as exc:
            refused = refused or str(exc)
            continue
        return Project(root, root / name, data.decode("utf-8", errors="replace"), refused)
    return Project(root, refused=refused)


def system_prompt(project: Project, tools: bool, today: str | None = None, skills: str = "") -> str:
    """`today`: a date (never a time of day): the prompt stays the same bytes all day, so the
    engine's prefix cache holds across the whole session. `skills`: the skills' catalog
    (app/agent/skills.py), names and descriptions only."""
    lines = [f"You are a coding assistant working in the project at {project.root}."]
    if today:
        lines.append(f"Today is {today}.")
    if tools:
        lines.append(
            "Use the tools to read, search, edit and run things in the project instead of asking the user "
            "to paste files. Paths are relative to the project root. Read a file before editing it; "
            "edit_file replaces one exact, unique piece of text. Edits and commands wait for the user's consent."
        )
    if tools and skills:
        lines += ["", skills]
    if project.instructions:
        name = project.instructions_file.name if project.instructions_file else "instructions"
        lines += ["", f"The project's instructions ({name}):", "", project.instructions]
    return "\n".join(lines)
