"""Agent Skills: folders with a `SKILL.md` (front matter `name` and `description`, then the
instructions) that Claude Code, Codex, Gemini CLI, opencode and Cursor read, so the skills
people keep work here too.

- Where: the user's `~/.claude/skills/NAME/` and `~/.agents/skills/NAME/`; the project's
  `.claude/skills/NAME/` and `.agents/skills/NAME/`, used only once the project is trusted
  (the trust question lists them: their words steer the model).
- Only names and descriptions go into the system prompt, within a budget; the model reads a
  skill's instructions with the `read_skill` tool when it picks one, and the files the skill
  names through the same tool (inside the skill's folder only). A skill's script runs only
  through run_command, with the user's consent, as any command does.
- A file that cannot be used (no name, too large, hidden characters, a link out of the
  project) is a notice; the others still load. The first skill of a name wins, the user's
  before the project's."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import safe_files
from .command_files import read_own_file, shown_home
from .custom_commands import CommandProblem, front_matter, one_line, refuse_hidden
from .paths import ToolRefused, resolve
from .toolbox import Done, Step, Toolbox, ToolSpec

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 64 * 1024
MAX_SKILLS = 100  # skill folders read from one place
CATALOG_BUDGET = 2000  # characters of names and descriptions in the system prompt (~500 tokens)
MAX_DESCRIPTION = 200
MAX_LISTED_FILES = 50
USER_FOLDERS = (".claude/skills", ".agents/skills")
PROJECT_FOLDERS = (".claude/skills", ".agents/skills")


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path  # the skill's own folder (real path)
    shown: str  # its SKILL.md as the user knows it: ".claude/skills/x/SKILL.md", "~/.claude/skills/x/SKILL.md"
    instructions: str  # the body, front matter taken off
    project: bool  # the project's own: used only once the project is trusted
    root: Path | None = None  # the project it must stay inside (project skills)


@dataclass
class SkillSet:
    skills: list[Skill] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seen: dict[str, bytes] = field(default_factory=dict)  # the project's SKILL.md files as read (trust)
    project_trusted: bool = False

    @property
    def project_skills(self) -> list[Skill]:
        return [s for s in self.skills if s.project]

    def usable(self) -> list[Skill]:
        return [s for s in self.skills if self.project_trusted or not s.project]

    def find(self, name: str) -> Skill | None:
        return next((s for s in self.usable() if s.name == name), None)

    def catalog(self) -> str:
        """The lines for the system prompt: each usable skill's name and description, within the
        budget (the rest counted, never cut mid-line)."""
        skills = self.usable()
        if not skills:
            return ""
        lines = [
            "Skills (instructions for particular tasks): when one fits the task, read it with "
            "read_skill before you start, then follow it."
        ]
        used = len(lines[0])
        for count, skill in enumerate(skills):
            line = f"- {skill.name}: {skill.description}"
            if used + len(line) > CATALOG_BUDGET:
                lines.append(f"- ... and {len(skills) - count} more (read_skill with a name lists them all)")
                break
            lines.append(line)
            used += len(line) + 1
        return "\n".join(lines)


def parse(text: str, folder_name: str) -> tuple[str, str, str]:
    """(name, description, instructions) of a SKILL.md; CommandProblem when it cannot be used."""
    refuse_hidden(text)
    fields, body = front_matter(text)
    name = one_line(fields.get("name", "")) or folder_name
    description = one_line(fields.get("description", ""))
    if not description:
        raise CommandProblem("its front matter has no description: the model could not tell when to use it")
    if not all(ch.isalnum() or ch in "-_." for ch in name) or len(name) > 64:
        raise CommandProblem(f"its name {name[:70]!r} is not letters, digits, '-', '_' or '.' (64 at most)")
    return name, description[:MAX_DESCRIPTION], body.strip("\r\n")


def _read(path: Path, root: Path | None, relative: str) -> str:
    try:
        if root is not None:
            data = safe_files.read_bytes(root, resolve(root, relative), relative, MAX_SKILL_BYTES)
        else:
            data = read_own_file(path) if os.path.getsize(path) <= MAX_SKILL_BYTES else b""
            if not data and os.path.getsize(path) > 0:
                raise CommandProblem(f"over the {MAX_SKILL_BYTES:,}-byte cap")
    except ToolRefused as exc:
        raise CommandProblem(f"not read: {exc}") from None
    except OSError as exc:
        raise CommandProblem(f"not read ({exc.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandProblem("not UTF-8 text") from None


def _skills_in(top: Path, shown: str, root: Path | None, set_: SkillSet, taken: set[str]) -> None:
    if root is not None:
        try:
            real_top = resolve(root, shown)
        except ToolRefused:
            set_.problems.append(f"skills in {shown} skipped: the folder leads out of the project")
            return
    else:
        real_top = top
    if not real_top.is_dir():
        return
    try:
        entries = sorted(os.scandir(real_top), key=lambda e: e.name)
    except OSError as exc:
        set_.problems.append(f"skills in {shown} skipped: the folder cannot be listed ({exc.strerror})")
        return
    folders = [e for e in entries if e.is_dir(follow_symlinks=root is None)]
    for count, entry in enumerate(folders):
        where = f"{shown}/{entry.name}/{SKILL_FILE}"
        if count >= MAX_SKILLS:
            set_.problems.append(f"more than {MAX_SKILLS} skills in {shown}: the rest are skipped")
            return
        path = Path(entry.path) / SKILL_FILE
        if not path.exists():
            continue
        try:
            relative = f"{shown}/{entry.name}/{SKILL_FILE}"
            text = _read(path, root, relative)
            if root is not None:
                set_.seen[relative] = text.encode("utf-8")
            name, description, body = parse(text, entry.name)
        except CommandProblem as exc:
            set_.problems.append(f"skill {where} skipped: {exc}")
            continue
        if name in taken:
            set_.problems.append(f"skill {where} skipped: a skill named {name!r} came first")
            continue
        taken.add(name)
        set_.skills.append(Skill(name, description, Path(entry.path), where, body, root is not None, root))


def discover(root: Path | None, user_folders: Iterable[Path] | None = None) -> SkillSet:
    """The user's skills first (a project never shadows one), then the project's."""
    found = SkillSet()
    taken: set[str] = set()
    home = Path.home()
    for folder in [home / f for f in USER_FOLDERS] if user_folders is None else list(user_folders):
        _skills_in(folder.expanduser(), shown_home(folder.expanduser()), None, found, taken)
    if root is not None:
        root = root.resolve()
        for name in PROJECT_FOLDERS:
            _skills_in(root / name, name, root, found, taken)
    return found


def read_skill(skills: SkillSet, name: str, file: str = "") -> str:
    """What the read_skill tool returns: a skill's instructions and its folder's files, or one
    of those files (inside the skill's folder only)."""
    skill = skills.find(name)
    if skill is None:
        names = ", ".join(s.name for s in skills.usable()) or "none"
        raise ToolRefused(f"there is no skill {name!r}: the skills are {names}")
    if not file:
        files = _files_of(skill)
        listed = "\n".join(f"- {f}" for f in files[:MAX_LISTED_FILES])
        more = f"\n- ... {len(files) - MAX_LISTED_FILES} more" if len(files) > MAX_LISTED_FILES else ""
        extra = f"\n\nFiles in the skill (read one with read_skill and file):\n{listed}{more}" if files else ""
        return f"# skill {skill.name} ({skill.shown})\n\n{skill.instructions}{extra}"
    if "\0" in file:
        raise ToolRefused(f"{file!r} contains a NUL character: give a plain path")
    try:
        target = (skill.folder / file).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise ToolRefused(f"{file!r} cannot be read: {exc}") from None
    if not target.is_relative_to(skill.folder.resolve()):
        raise ToolRefused(f"{file!r} is not inside the skill's folder")
    relative = target.relative_to(skill.folder.resolve()).as_posix()
    shown = skill.shown.rsplit("/", 1)[0] + "/" + relative
    if skill.root is not None:
        text = _read(target, skill.root, target.relative_to(skill.root).as_posix())
    else:
        try:
            text = _read(target, None, shown)
        except CommandProblem as exc:
            raise ToolRefused(f"{shown}: {exc}") from None
    return f"# {shown}\n\n{text}"


def _files_of(skill: Skill) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(skill.folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            relative = (Path(dirpath) / filename).relative_to(skill.folder).as_posix()
            if relative != SKILL_FILE:
                found.append(relative)
        if len(found) > MAX_LISTED_FILES * 2:
            break
    return found


def skill_tool(skills: SkillSet) -> ToolSpec:
    """The read_skill tool over these skills (no consent: it reads text, runs nothing)."""

    def handler(box: Toolbox, args: dict[str, Any]) -> Step:
        try:
            return Done(read_skill(skills, str(args.get("name") or ""), str(args.get("file") or "")))
        except (ToolRefused, CommandProblem, OSError, ValueError) as exc:
            return Done(f"error: {exc}")

    return ToolSpec(
        "read_skill",
        "Read a skill's instructions (by its name in the system prompt's list), or one of its files (file).",
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "file": {"type": "string"}},
            "required": ["name"],
        },
        handler,
    )
