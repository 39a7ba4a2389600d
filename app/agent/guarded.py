"""What the model may write: the one home for the places that run code later.

Some files are run by programs outside the sandbox after the model is done with them: git runs
a repository's hooks and `core.fsmonitor` (every `.git`: nested, a symlink, or a `gitdir:` file's
target), coding agents (dspine among them) run what their configuration names (`.claude/`,
`.dspine/`, `.agents/`, `.mcp.json`, ...), a hook imports or sources the files beside its script,
and the user's shell, ssh and agents read their own start-up files. So:

- the write tools ask before writing there, in every mode, saying why (accept-edits and "always"
  never cover it; headless, which cannot ask, refuses) (`Guard.why`);
- a sandboxed command sees them read-only (`Guard.read_only`, the sandbox's binds);
- a project root that is the home folder or `/` (or any folder above the home folder) holds all
  of the user's own: it is never a writable root (`unsafe_root`).

Pure but for the file system reads it names; app/agent/paths.py keeps the hard refusals
(`.git` internals, the user's own folders), this module the places that ask.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import users_own_folders
from .paths import is_git_name

# Folders and files other coding agents and editors read as configuration (and run what they
# name): at any depth, since an agent started in a subfolder reads that subfolder's.
AGENT_CONFIG = frozenset(
    {
        ".claude",
        ".dspine",
        ".agents",
        ".codex",
        ".gemini",
        ".opencode",
        ".cursor",
        ".vscode",  # tasks.json's folderOpen tasks run when the folder is opened
        ".mcp.json",
        "opencode.json",
        "opencode.jsonc",
        ".envrc",  # direnv runs it on entering the folder
    }
)
# In the home folder: what the user's shell, ssh, git and agents read and run.
HOME_OWN = (
    ".ssh",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".config/fish",
    ".gitconfig",
    ".config/git",
    ".claude",
    ".claude.json",
    ".agents",
    ".codex",
    ".gemini",
)
MAX_WALK_DIRS = 20_000  # folders looked at for nested repositories and agent configuration
# Folders that are large and hold no one's repository or configuration worth the walk.
_NOT_WALKED = frozenset({"node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".ruff_cache"})


def unsafe_root(root: Path) -> str:
    """Why `root` cannot be a writable project ("" when it can): the home folder or `/`, or a
    folder above the home folder, holds the user's shell start-up files, ssh keys and agents'
    settings, which the next program the user starts would run."""
    real = root.resolve()
    home = Path.home().resolve()
    if real == Path(real.anchor):
        what = f"the file system's root ({real})"
    elif real == home:
        what = f"your home folder ({real})"
    elif home.is_relative_to(real):
        what = f"{real}, which holds your home folder"
    else:
        return ""
    return (
        f"the project would be {what}: the tools do not write there, and commands do not run there, "
        "since what they wrote (a shell start-up file, an agent's settings, an ssh key) would run later "
        "outside any sandbox. Start dspine in the project's own folder"
    )


def home_own() -> list[Path]:
    """The user's own files and folders that run code later, wherever the project is."""
    home = Path.home()
    return [*users_own_folders(), *(home / name for name in HOME_OWN)]


def _gitdir_target(gitfile: Path) -> Path | None:
    """The folder a `gitdir:` file (a worktree's or a submodule's `.git`) names."""
    try:
        with gitfile.open("rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        return None
    line = head.strip().splitlines()[0] if head.strip() else ""
    if not line.startswith("gitdir:"):
        return None
    target = Path(line.removeprefix("gitdir:").strip())
    return (gitfile.parent / target) if not target.is_absolute() else target


def hooks_path(git: Path) -> Path | None:
    """A repository's `core.hooksPath` (husky's `.husky`, lefthook's): hooks in the work tree."""
    try:
        text = (git / "config").read_text(encoding="utf-8", errors="replace")[:65536]
    except OSError:
        return None
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.strip("[]").strip().lower()
            continue
        key, sep, value = line.partition("=")
        if sep and section == "core" and key.strip().lower() == "hookspath":
            value = value.strip().strip('"')
            path = Path(os.path.expanduser(value))
            return path if path.is_absolute() else git.parent / path
    return None


def _walk(root: Path, limit: int) -> Iterator[Path]:
    """Every `.git` and agent configuration entry under root, breadth first, `limit` folders at
    most; links are reported, never followed."""
    queue = [root]
    seen = 0
    while queue and seen < limit:
        folder = queue.pop(0)
        seen += 1
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if is_git_name(name) or name in AGENT_CONFIG:
                yield Path(entry.path)
                continue
            try:
                if entry.is_dir(follow_symlinks=False) and name not in _NOT_WALKED:
                    queue.append(Path(entry.path))
            except OSError:
                continue


@dataclass
class Guard:
    """The guarded places of one project. `named`: the project's files and folders its hooks,
    skills and MCP servers name (app/agent/trust.py finds them), as absolute paths."""

    root: Path
    named: list[Path] = field(default_factory=list)
    _found: list[Path] | None = None  # the last walk's `.git` and configuration entries

    def __post_init__(self) -> None:
        self.root = self.root.resolve()

    def name(self, paths: Iterable[Path]) -> None:
        """Add what hooks, skills or servers name: a named file's folder is guarded (a hook
        imports and sources what lies beside it), unless that folder is the project itself."""
        for path in paths:
            real = path.resolve()
            guarded = real if real.is_dir() or real.parent == self.root else real.parent
            if guarded != self.root and guarded not in self.named:
                self.named.append(guarded)

    def why(self, real: Path) -> str:
        """Why writing `real` (a resolved path in the project) would plant code that runs later
        outside the sandbox; "" when it would not."""
        try:
            parts = real.relative_to(self.root).parts
        except ValueError:
            return ""
        for part in parts:
            if part in AGENT_CONFIG or part.casefold() in AGENT_CONFIG:
                return f"{part} is a coding agent's or editor's configuration, which runs what it names"
        for named in self.named:
            if real == named or real.is_relative_to(named):
                where = named.relative_to(self.root).as_posix() if named.is_relative_to(self.root) else str(named)
                return f"{where} holds what a hook, skill or MCP server of the project runs"
        hooks = hooks_path(self.root / ".git")
        if hooks is not None and (real == hooks.resolve() or real.is_relative_to(hooks.resolve())):
            return "it is in the folder git runs this repository's hooks from (core.hooksPath)"
        for own in home_own():
            if real == own or real.is_relative_to(own):
                return f"{own} is yours: your shell, ssh, git or agents run or read it"
        return ""

    def refresh(self) -> list[Path]:
        """Walk the project again (after a command that may have made a repository); the `.git`
        entries that were not there at the last walk (none at the first)."""
        before = self._found
        self._found = list(_walk(self.root, MAX_WALK_DIRS))
        if before is None:
            return []
        return [p for p in self._found if is_git_name(p.name) and p not in before]

    def read_only(self) -> list[Path]:
        """What a sandboxed command must see read-only: every `.git` in the project (a link's or
        a `gitdir:` file's target too), the agents' configuration, what hooks, skills and
        servers name, the hooks folder git uses, and the user's own where the project holds
        them. Existing paths only (bubblewrap binds what is there), outermost first."""
        if self._found is None:
            self.refresh()
        assert self._found is not None
        paths: list[Path] = []
        for entry in self._found:
            paths.append(entry)
            if entry.is_symlink():
                paths.append(entry.resolve())
            elif is_git_name(entry.name) and entry.is_file():
                target = _gitdir_target(entry)
                if target is not None:
                    paths.append(target.resolve())
        hooks = hooks_path(self.root / ".git")
        paths += [*self.named, *([hooks] if hooks is not None else []), *home_own()]
        kept: list[Path] = []
        for path in paths:
            real = path if path.is_absolute() else self.root / path
            if not os.path.lexists(real):
                continue
            real = real.resolve()
            # Inside the project only: everything else is read-only in the sandbox already.
            if (real == self.root or real.is_relative_to(self.root)) and real != self.root and real not in kept:
                kept.append(real)
        return sorted(kept, key=lambda p: len(p.parts))
