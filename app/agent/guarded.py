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
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import project_scratch, users_own_folders
from .child_env import child_environ
from .paths import is_git_name
from .shell_words import shell_words

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
        ".continue",
        ".roo",
        ".kiro",
        ".windsurf",
        ".zed",  # its tasks
        ".devcontainer",  # postCreateCommand runs when the folder opens in a container
        ".aider.conf.yml",  # aider runs its lint and test commands
        ".pre-commit-config.yaml",  # pre-commit's hooks run at git commit
        "lefthook.yml",
        "lefthook.yaml",
        ".lefthook.yml",
        ".lefthook.yaml",
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
_VENVS = frozenset({".venv", "venv"})


def unsafe_root(root: Path) -> str:
    """Why `root` cannot be a writable project ("" when it can): the home folder or `/`, or a
    folder above the home folder, holds the user's shell start-up files, ssh keys and agents'
    settings, which the next program the user starts would run; a hidden folder of the home
    folder itself (`~/.claude`), anything in `~/.config` (`~/.config/git`) or one of the user's
    own is what they run itself (`~/.julia/dev/Pkg` is a project as any other)."""
    real = root.resolve()
    home = Path.home().resolve()
    if real == Path(real.anchor):
        what = f"the file system's root ({real})"
    elif real == home:
        what = f"your home folder ({real})"
    elif home.is_relative_to(real):
        what = f"{real}, which holds your home folder"
    elif real.parent == home and real.name.startswith("."):
        what = f"{real}, a folder of your home folder's own that your programs read"
    elif real.is_relative_to(home / ".config"):
        what = f"{real}, in {home / '.config'}, where your programs read their settings"
    elif any(real == own.resolve() or real.is_relative_to(own.resolve()) for own in home_own()):
        what = f"{real}, one of your own folders that your shell, git or agents read"
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
    """A repository's `core.hooksPath` (husky's `.husky`, lefthook's): hooks in the work tree.
    From its config file alone, for where git cannot answer about the repository itself
    (`git_places` asks that first)."""
    said = [value for key, value in config_entries(git / "config") or [] if key == "core.hookspath"]
    if not said:
        return None
    path = Path(os.path.expanduser(said[-1]))  # git: the last setting wins
    return path if path.is_absolute() else git.parent / path


GIT_ASKED_REPOS = 64  # nested repositories git is asked about (each costs two quick git runs)


def _git(worktree: Path, *args: str) -> str | None:
    """What git prints for a question about `worktree` (None where it cannot answer). Only
    questions that read configuration: nothing here runs a hook, a filter or fsmonitor."""
    env = {**child_environ(), "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        # A short bound: an include that names a fifo holds git until it times out.
        done = subprocess.run(["git", "-C", str(worktree), *args], capture_output=True, env=env, timeout=3)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode("utf-8", "surrogateescape") if done.returncode == 0 else None


def git_places(worktree: Path) -> tuple[Path | None, list[Path]]:
    """What git runs for the repository at `worktree`, as git itself reads it (includes, one-line
    sections, a linked worktree's `gitdir:`, comments): the folder it runs hooks from, and every
    configuration file it reads or would read (an `include.path` may name a tracked file that
    sets `core.fsmonitor`; an `includeIf` on another branch, or a file not made yet, counts too).
    The hand reading of core.hooksPath where git cannot answer."""
    said = (_git(worktree, "rev-parse", "--git-path", "hooks") or "").strip()
    hooks = worktree / said if said else hooks_path(worktree / ".git")
    files: list[Path] = []
    listing = _git(worktree, "config", "--list", "--show-origin", "--includes", "-z")
    pieces = listing.split("\0") if listing else []
    for origin, entry in zip(pieces[0::2], pieces[1::2], strict=False):
        if not origin.startswith("file:"):
            continue
        file = Path(origin.removeprefix("file:"))
        file = file if file.is_absolute() else worktree / file
        files.append(file)
        key, _, value = entry.partition("\n")
        if key.startswith("include") and key.endswith(".path") and value:
            named = Path(os.path.expanduser(value))
            files.append(named if named.is_absolute() else file.parent / named)
    return hooks, list(dict.fromkeys(files))


def hook_reach(hooks: Path, worktree: Path) -> list[Path]:
    """Beside the hooks folder itself, what its hooks run in the work tree: the folder around a
    hooks folder inside it (husky's `.husky/_` runs `.husky/pre-commit`), and the folder of each
    project file a hook names (`exec ./scripts/check.sh`) or links to."""
    reach: list[Path] = []
    tree = worktree.resolve()
    real = hooks.resolve()
    if real.is_relative_to(tree) and real.parent != tree and real != tree:
        reach.append(real.parent)
    try:
        entries = [e for e in os.scandir(hooks) if not e.name.endswith(".sample")][:256]
    except OSError:
        entries = []
    for entry in entries:
        if entry.is_symlink():
            named = [Path(entry.path).resolve()]
        elif entry.is_file():
            named = _named_in_script(Path(entry.path), tree)
        else:
            continue
        reach += [path.parent if path.parent != tree else path for path in named]
    return reach


def _named_in_script(script: Path, tree: Path) -> list[Path]:
    """The work tree's files a hook script's words name (bounded: its first 64 KiB)."""
    try:
        text = script.read_bytes()[:65536].decode("utf-8", "replace")
    except OSError:
        return []
    named = []
    for word in shell_words(text):
        piece = word.split("=")[-1]
        if not piece or piece.startswith("-") or "\0" in piece:
            continue
        candidate = Path(piece) if Path(piece).is_absolute() else tree / piece
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            continue
        if real.is_relative_to(tree) and real != tree and real.is_file():
            named.append(real)
    return named


# What a new repository's configuration may hold and still be kept where a command made it
# (`Guard.planted`): what `git init`, `git clone`, `git submodule` and a user name write. Git
# has many settings that run a program (fsmonitor, pagers, editors, credential helpers of any
# URL, gpg's programs, filters, diff drivers, aliases, upload-pack, ext:: protocols...): any
# setting not on this list sets the repository aside, so a new one cannot slip past a list of them.
KEPT_SETTINGS = {
    "core": {"repositoryformatversion", "filemode", "bare", "logallrefupdates", "ignorecase",
             "precomposeunicode", "symlinks", "autocrlf", "eol", "sparsecheckout", "sparsecheckoutcone"},
    "extensions": {"objectformat"},
    "init": {"defaultbranch"},
    "user": {"name", "email"},
    "pull": {"rebase", "ff"},
    "push": {"default"},
    "fetch": {"prune"},
}  # fmt: skip
# Settings of a named subsection (`[remote "origin"]`) kept the same way.
KEPT_NAMED_SETTINGS = {
    "remote": {"url", "fetch", "pushurl", "tagopt", "prune", "mirror"},
    "branch": {"remote", "merge", "rebase"},
    "submodule": {"url", "active", "branch"},
}
# Files beside `config` that git reads settings from: a repository with one is set aside.
OTHER_CONFIG_FILES = ("config.worktree", "commondir")


def config_entries(config: Path) -> list[tuple[str, str]] | None:
    """A git configuration file's settings as git itself reads them (sections, subsections,
    quoting, continuation lines, comments), keys lowercased: [] for no file, None where git
    cannot read it or it is not a plain file (a link may point elsewhere later, a fifo holds
    git). Asked from `/` with `--file`: no repository's own settings come in."""
    if not os.path.lexists(config):
        return []
    if config.is_symlink() or not config.is_file():
        return None
    listing = _git(Path("/"), "config", "--file", str(config), "--list", "-z")
    if listing is None:
        return None
    entries = (piece.partition("\n") for piece in listing.split("\0") if piece)
    return [(key.lower(), value) for key, _, value in entries]


def _kept_setting(key: str) -> bool:
    section, _, rest = key.partition(".")
    named, _, name = rest.rpartition(".")
    if named:
        return name in KEPT_NAMED_SETTINGS.get(section, set())
    return name in KEPT_SETTINGS.get(section, set())


def runs_programs(git: Path) -> str:
    """Why git might run a program for the repository at `git` (its `.git`, a folder or a
    `gitdir:` file): a setting not known to be plain, another file git reads settings from, a
    hook that is not a sample, a `.git` that is a link or names no repository here. "" when
    nothing."""
    if git.is_symlink():
        return "its .git is a link"
    if git.is_file():
        target = _gitdir_target(git)
        if target is None or not target.is_dir() or not target.resolve().is_relative_to(git.parent.resolve()):
            return "its .git names a repository elsewhere"
        git = target
    entries = config_entries(git / "config")
    if entries is None:
        return "git cannot read its configuration"
    other = [name for name in OTHER_CONFIG_FILES if os.path.lexists(git / name)]
    if other:
        return f"git reads settings from its {other[0]}"
    for key, _ in entries:
        if not _kept_setting(key):
            return f"its configuration sets {key}"
    try:
        hooks = [e.name for e in os.scandir(git / "hooks") if not e.name.endswith(".sample")]
    except OSError:
        hooks = []
    return f"it has the hook {hooks[0]}" if hooks else ""


def _walk(root: Path, limit: int) -> Iterator[Path]:
    """Every `.git` and agent configuration entry under root, breadth first, `limit` folders at
    most; links are reported, never followed. A virtual environment's `src` (pip's editable
    checkouts, each a repository) is walked though the environment is not."""
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
                if entry.is_dir(follow_symlinks=False):
                    if name not in _NOT_WALKED:
                        queue.append(Path(entry.path))
                    elif name in _VENVS and os.path.isdir(src := os.path.join(entry.path, "src")):
                        queue.append(Path(src))
            except OSError:
                continue


@dataclass
class Guard:
    """The guarded places of one project. `named`: the project's files and folders its hooks,
    skills and MCP servers name (app/agent/trust.py finds them), as absolute paths."""

    root: Path
    named: list[Path] = field(default_factory=list)
    _found: list[Path] | None = None  # the last walk's `.git` and configuration entries
    _before: set[Path] | None = None  # what ran later just before a command (`watch`)

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
        outside the sandbox; "" when it would not. Asks what the sandbox keeps read-only too, so
        a link (`.vscode` -> `editor/`, a dotfile linked into the project) guards its target."""
        try:
            parts = real.relative_to(self.root).parts
        except ValueError:
            return ""
        for part in parts:
            if part in AGENT_CONFIG or part.casefold() in AGENT_CONFIG:
                return f"{part} is a coding agent's, editor's or hook manager's configuration, which runs what it names"
        for named in self.named:
            if real == named or real.is_relative_to(named):
                where = named.relative_to(self.root).as_posix() if named.is_relative_to(self.root) else str(named)
                return f"{where} holds what a hook, skill or MCP server runs"
        git = self._git_guarded()
        for place in git:
            if _within(real, place):
                return f"git runs what {_shown(place, self.root)} holds (its hooks, or its configuration)"
        for own in home_own():
            if real == own or real.is_relative_to(own):
                return f"{own} is yours: your shell, ssh, git or agents run or read it"
        for place in self.read_only(git):
            if _within(real, place):
                return f"{_shown(place, self.root)} is what git, an agent or your shell runs or reads (through a link)"
        return ""

    def refresh(self) -> list[Path]:
        """Walk the project again (after a command that may have made a repository); the `.git`
        entries that were not there at the last walk (none at the first). What an earlier walk
        found stays, first: a command that makes 20,000 folders or 64 repositories cuts the next
        walk short, not the list."""
        before = self._found
        found = list(_walk(self.root, MAX_WALK_DIRS))
        kept = [p for p in before or [] if os.path.lexists(p)]
        self._found = kept + [p for p in found if p not in kept]
        if before is None:
            return []
        return [p for p in self._found if is_git_name(p.name) and p not in before]

    def watch(self) -> list[Path]:
        """Just before a sandboxed command: what runs later is there now (a fresh walk, which the
        sandbox's binds then follow). The sandbox keeps what exists read-only; what does not
        exist yet (`.envrc`, `.vscode/`, a `core.hooksPath` folder not made yet, a file a hook
        names) it cannot, so `planted` looks for it after the command."""
        self.refresh()
        git = self._git_guarded()
        self._before = self._runs_later_now(git)
        return git  # for `read_only`, asked next: git is asked once

    def planted(self, made: list[Path]) -> list[Path]:
        """What a command made since `watch` that an agent, an editor, direnv or git would run
        later outside the sandbox. `made`: the repositories it made (`refresh`), whose own
        files are a new checkout's, as any download's (their tools ask before trusting a new
        folder), and are said; but a repository whose configuration or hooks git runs is not."""
        if self._before is None:
            return []  # no command was watched
        new = self._runs_later_now() - self._before
        self._before = None
        scratch = project_scratch(self.root)  # dspine saves a cut output there as the command runs
        trees = [git.parent for git in made]
        kept = [
            p
            for p in new
            if not (p == scratch and _only_saved_output(p)) and not any(p.is_relative_to(t) for t in trees)
        ]
        kept += [git for git in made if runs_programs(git)]
        return sorted(kept, key=lambda p: (len(p.parts), p))

    def _runs_later_now(self, git: list[Path] | None = None) -> set[Path]:
        """What runs later that exists now, from the last walk (`refresh`, just made)."""
        entries = [p for p in self._found or [] if not is_git_name(p.name)]
        for place in [*(self._git_guarded() if git is None else git), *self.named]:
            real = place.resolve()
            if real.is_relative_to(self.root) and real != self.root and not _in_git(real, self.root):
                entries.append(real)
        return {p for p in entries if os.path.lexists(p)}

    def _git_guarded(self) -> list[Path]:
        """What git runs for the project's repository and each nested one: their hooks folders,
        what those hooks reach, and the configuration files git reads (`git_places`)."""
        if self._found is None:
            self.refresh()
        worktrees = [self.root] + [p.parent for p in self._found or [] if is_git_name(p.name)]
        places: list[Path] = []
        for worktree in list(dict.fromkeys(worktrees))[:GIT_ASKED_REPOS]:
            hooks, files = git_places(worktree)
            places += [*([hooks, *hook_reach(hooks, worktree)] if hooks is not None else []), *files]
        return places

    def read_only(self, git: list[Path] | None = None) -> list[Path]:
        """What a sandboxed command must see read-only: every `.git` in the project (a link's or
        a `gitdir:` file's target too), the agents' configuration, what hooks, skills and
        servers name, what git runs (hooks folders, what their hooks run, included config
        files), and the user's own where the project holds them. Existing paths only
        (bubblewrap binds what is there), outermost first. `git`: `_git_guarded`'s, if asked."""
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
        paths += [*self.named, *(self._git_guarded() if git is None else git), *home_own()]
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


def _only_saved_output(folder: Path) -> bool:
    """The scratch folder as dspine leaves it: saved outputs (`.txt`) and its `.gitignore`."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    saved = (".gitignore", ".txt")
    return all(e.is_file(follow_symlinks=False) and e.name.endswith(saved) for e in entries)


def _in_git(real: Path, root: Path) -> bool:
    """Inside a `.git` (read-only in the sandbox, refused to the write tools)."""
    return any(is_git_name(part) for part in real.relative_to(root).parts)


def _within(real: Path, place: Path) -> bool:
    try:
        resolved = place.resolve()
    except (OSError, RuntimeError):
        return False
    return real == resolved or real.is_relative_to(resolved)


def _shown(place: Path, root: Path) -> str:
    real = place.resolve()
    return real.relative_to(root).as_posix() if real.is_relative_to(root) else str(real)
