""" "Always" covers what the user saw, not a program name (issue 22, item 1).

Each row of HOSTILE is a command that runs another program, writes outside the
project or hides what it does; after the user said "always" to an ordinary
command of the same program, every one of them must still ask.
"""

from __future__ import annotations

import re

import pytest

from app.agent.consent import Consent, command_words
from app.agent.toolbox import NEEDS_CONSENT

# What a user says "always" to.
ORDINARY = ["git status", "git diff", "git log", "git show", "git", "pytest -q", "pytest", "python -m pytest -q", "ls"]

HOSTILE = [
    # the list, point 1
    "git -c alias.x='!touch /tmp/pwned' x",
    "git -c alias.x=!sh x",
    "git -c core.fsmonitor='touch /tmp/pwned' status",
    "git -c core.fsmonitor=/tmp/evil status",
    "git -c diff.external=/tmp/evil diff",
    "GIT_EXTERNAL_DIFF=/tmp/evil git diff",
    "GIT_CONFIG_PARAMETERS=\"'core.pager=/tmp/evil'\" git log",
    "git diff --output=/outside/file",
    "git -C /outside init",
    "pytest --junitxml=/outside/x",
    "pytest --basetemp=/home/user",
    "pytest -q --basetemp=DIR",
    "git rebase --exec /tmp/evil main",
    "git bisect run /tmp/evil",
    "git difftool -x /tmp/evil",
    "git submodule foreach /tmp/evil",
    "git -c core.sshCommand=/tmp/evil fetch",
    "git -c credential.helper='!/tmp/evil' fetch",
    "LD_PRELOAD=/tmp/evil.so git status",
    "PATH=/tmp/evil:/usr/bin git status",
    # more of the same kind
    "git -c core.pager=/tmp/evil log",
    "git -c core.hooksPath=/tmp/hooks status",
    "git --exec-path=/tmp/evil status",
    "git --git-dir=/outside/.git status",
    "git --work-tree=/outside status",
    "git -C /outside status",
    "git -C .. status",
    "git rebase -x /tmp/evil main",
    "git difftool --extcmd=/tmp/evil",
    "git diff --ext-diff",
    "git log -p --textconv",
    "git diff --no-index /etc/passwd README.md",
    "git show --output=/outside/x",
    "git status --porcelain",
    "git log --output=/home/user/.bashrc",
    "pytest -p evil_plugin -q",
    "pytest -q -o addopts=--basetemp=/home/user",
    "pytest -q --rootdir=/outside",
    "pytest -q --confcutdir=/outside",
    "pytest -q /outside/tests",
    "pytest -q tests/../../outside",
    "python -m pytest -q --basetemp=/home/user",
    "python -c 'import shutil; shutil.rmtree(\"/home/user\")' -m pytest -q",
    "ls /",
    # environment prefixes, in every form the shell takes them
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=/tmp/evil git status",
    "PYTEST_ADDOPTS=--basetemp=/home/user pytest -q",
    "PYTHONPATH=/tmp/evil pytest -q",
    "GIT_DIR=/outside/.git git status",
    "GIT_SSH_COMMAND=/tmp/evil git fetch",
    "A=1 git status",
    "A+=1 git status",
    "_x=1 pytest",
    "env LD_PRELOAD=/tmp/evil.so git status",
    "env -i git status",
    "command git status",
    "exec git status",
    "nice git status",
    # several commands, redirections, expansions, globs
    "git status; rm -rf ~",
    "git status && rm -rf ~",
    "git status || rm -rf ~",
    "git status & rm -rf ~",
    "git status | sh",
    "git status > ~/.bashrc",
    "git status >/tmp/x",
    "git status < /etc/passwd",
    "git status $(rm -rf ~)",
    "git status `rm -rf ~`",
    "git status ${HOME}",
    "git status $HOME",
    "git status\nrm -rf ~",
    "git status\rrm -rf ~",
    "git status # harmless",
    "git status (x)",
    "git status {a,b}",
    "pytest -q *",
    "pytest -q tests/test_?.py",
    "pytest -q [ab]",
    "pytest -q ~/tests",
    "pytest -q ~",
    "pytest -q --basetemp=~",
    "pytest -q --basetemp=~/x",
    "git -c core.hooksPath=:~/hooks status",
    "git status '~'",
    "git log HEAD@{1}",
    "git status \\; rm -rf ~",
    "git status 'unclosed",
    "git st\u202eatus",  # a right-to-left override shows other words than run
    "git\u00a0status",  # a no-break space looks like a space and is not one
    "git status\u200b",
    "git status\x1b[2K",
    "git status\t\x00",
    "",
    "   ",
]


@pytest.mark.parametrize("seen", ORDINARY)
@pytest.mark.parametrize("hostile", HOSTILE)
def test_always_on_an_ordinary_command_does_not_cover_a_hostile_one(seen, hostile):
    consent = Consent()
    consent.remember("run_command", "always", seen)
    assert not consent.must_ask("run_command", seen)
    assert consent.must_ask("run_command", hostile)


ENVIRONMENT_OR_SYNTAX = [c for c in HOSTILE if command_words(c) is None]


def test_the_table_holds_both_kinds():
    # Most rows cannot be covered by "always" at all; the rest are plain commands that differ in a word.
    assert 40 < len(ENVIRONMENT_OR_SYNTAX) < len(HOSTILE)


@pytest.mark.parametrize("command", ENVIRONMENT_OR_SYNTAX)
def test_always_is_not_offered_where_the_words_are_not_what_runs(command):
    consent = Consent()
    assert consent.always_label("run_command", command) is None
    consent.remember("run_command", "always", command)  # even if a screen sent it
    assert consent.must_ask("run_command", command)


@pytest.mark.parametrize("command", [c for c in HOSTILE if re.match(r"[A-Za-z_][A-Za-z0-9_]*\+?=", c)])
def test_environment_prefixes_always_ask(command):
    consent = Consent()
    consent.remember("run_command", "always", command)
    assert consent.always_label("run_command", command) is None
    assert consent.must_ask("run_command", command)


@pytest.mark.parametrize(
    ("seen", "again"),
    [
        ("git status", "git status"),
        ("git status", "  git   status  "),
        ("git status", "git\tstatus"),
        ("git status", "'git' \"status\""),
        ("pytest -q", "pytest  -q"),
        ("pytest -q -k 'add and not slow'", 'pytest -q -k "add and not slow"'),
        ("git log --oneline -n 5", "git log --oneline -n 5"),
        ("git show HEAD^", "git show HEAD^"),
        ("git show HEAD~1", "git show HEAD~1"),
    ],
)
def test_the_same_words_again_do_not_ask(seen, again):
    consent = Consent()
    consent.remember("run_command", "always", seen)
    assert not consent.must_ask("run_command", again)


@pytest.mark.parametrize(
    ("seen", "other"),
    [
        ("pytest -q", "pytest -q tests"),
        ("pytest -q", "pytest"),
        ("pytest -q -k add", "pytest -q -k 'add or True'"),
        ("git diff", "git diff HEAD"),
        ("git log --oneline", "git log --oneline --output=x"),
        ("ls", "ls -la"),
        ("git status", "git status ."),
        ("git status", "git 'status '"),  # quoting that changes a word is another command
        ("git status", "Git status"),
    ],
)
def test_any_other_word_asks(seen, other):
    consent = Consent()
    consent.remember("run_command", "always", seen)
    assert consent.must_ask("run_command", other)


def test_the_label_says_what_always_covers():
    consent = Consent()
    assert consent.always_label("run_command", "git status") == (
        "always run exactly this command in this chat (any other asks)"
    )
    assert consent.always_label("edit_file") == "always edit file in this chat"
    assert consent.always_label("run_command", "CI=1 pytest -q") is None


def test_yes_and_no_remember_nothing_and_tools_stay_apart():
    consent = Consent()
    # Reads never wait: their tool records say so (the session asks only for these).
    assert {"edit_file", "write_file", "run_command"} == NEEDS_CONSENT
    consent.remember("run_command", "yes", "git status")
    consent.remember("run_command", "no", "git status")
    assert consent.must_ask("run_command", "git status")
    consent.remember("edit_file", "always")
    assert not consent.must_ask("edit_file") and consent.must_ask("write_file")
    assert consent.must_ask("run_command", "git status")
