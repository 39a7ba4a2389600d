"""A shell command's words, as the shell would part them: one home for reading what a hook, a
server's `sh -c` string or a git hook script names (app/agent/trust.py, app/agent/guarded.py)."""

from __future__ import annotations

import shlex

OPERATORS = ("<", ">", "|", ";", "&", "&&", "||", "(", ")")


def shell_words(command: str) -> list[str]:
    """A shell command's words, its operators parting them (`sh<x.sh`, `cat x.sh|sh`, `a && b`)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return [w for w in lexer if w not in OPERATORS]
    except ValueError:
        return command.split()
