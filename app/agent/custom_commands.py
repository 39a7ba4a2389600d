"""Custom slash commands: prompts kept as Markdown files, the way other coding agents keep
them (Claude Code's `.claude/commands/`, opencode's `.opencode/command/`, Codex's
`~/.codex/prompts/`, and dspine's own `.dspine/commands/`). Pure: text in, commands out;
reading the folders is `command_files.py`.

A file is an optional front matter of simple `key: value` lines between `---` lines
(`description:` and `argument-hint:` are used, other keys are read and ignored), then the
prompt. Running `/name args` sends the prompt with `$ARGUMENTS` replaced by all the
arguments and `$1`, `$2`, ... by each one (split as a shell would, quotes kept together);
a prompt that names none of them gets the arguments appended, as Claude Code does.

A command is a prompt and nothing more: Claude Code's `!`command`` lines and `@file`
references are sent as they are written. Nothing here runs a program or reads a file;
the model can only run one through run_command, which asks the user first.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

MAX_COMMAND_BYTES = 64 * 1024  # a command file over this is refused (a prompt, not a document)
MAX_DESCRIPTION = 120  # characters of a description /help shows

_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_-]*)\s*:(?:\s+(.*)|\s*)$")
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9][0-9]*)")
_PART = re.compile(r"[\w][\w.-]*")
_MARKDOWN = re.compile(r"([\\`*_\[\]<>#|~])")


class CommandProblem(ValueError):
    """A command file that cannot be used; the message says what and where (not which file:
    the caller names it)."""


@dataclass(frozen=True)
class CustomCommand:
    name: str  # as typed, with its slash and in lower case: "/review", "/git:commit"
    source: str  # the file, as the user knows it: ".claude/commands/git/commit.md", "~/.codex/prompts/x.md"
    prompt: str  # the body, front matter taken off
    description: str = ""
    argument_hint: str = ""

    def expand(self, arguments: str) -> str:
        return expand(self.prompt, arguments)

    @property
    def help(self) -> str:
        """One line of Markdown for /help: the description (escaped: it is the file's text) and
        where the command comes from."""
        text = _MARKDOWN.sub(r"\\\1", self.description) if self.description else "(no description)"
        return f"{text} (from `{self.source.replace('`', '')}`)"


def command_name(parts: Iterable[str]) -> str:
    """The name a file gives: its path below the commands folder, without `.md`, the folders
    joined by `:` (Claude Code's `git/commit.md` is `/git:commit`), in lower case.
    CommandProblem when a part cannot be typed as one word."""
    parts = list(parts)
    if not parts or not parts[-1].lower().endswith(".md"):
        raise CommandProblem("not a .md file")
    parts[-1] = parts[-1][: -len(".md")]
    for part in parts:
        if not _PART.fullmatch(part):
            raise CommandProblem(
                f"{part!r} cannot be typed as a command name (letters, digits, '_', '-' and '.' only): rename it"
            )
    return "/" + ":".join(parts).lower()


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """The `key: value` lines between a first line `---` and the next `---`, and the text after.
    Indented lines and `- item` lines continue the key above (YAML's folded values and lists:
    their text is joined with spaces). CommandProblem for anything else."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        return {}, text
    fields: dict[str, str] = {}
    key = ""
    for number, line in enumerate(lines[1:], start=2):
        bare = line.rstrip("\r\n")
        if bare.rstrip() == "---":
            return fields, "".join(lines[number:])
        if not bare.strip() or bare.lstrip().startswith("#"):
            continue
        if bare[0] in " \t" or bare.startswith("- "):
            if not key:
                raise CommandProblem(f"front matter line {number}: {bare.strip()!r} continues no key")
            fields[key] = " ".join(filter(None, (fields[key], _unquoted(bare.strip().removeprefix("- ")))))
            continue
        match = _KEY.match(bare)
        if match is None:
            raise CommandProblem(f"front matter line {number}: {bare.strip()[:60]!r} is not a `key: value` line")
        key = match.group(1).lower()
        value = _unquoted((match.group(2) or "").strip())
        fields[key] = "" if value in (">", "|", ">-", "|-") else value
    raise CommandProblem("the front matter opened by `---` on line 1 is never closed by another `---` line")


def _hides_text(ch: str) -> bool:
    if ch in "\n\t\r":
        return False
    category = unicodedata.category(ch)
    return category == "Cc" or (category == "Cf" and ch != "\ufeff") or ch in "\u2028\u2029"


def refuse_hidden(text: str, why: str = "") -> None:
    """CommandProblem for a file with a control character (an escape sequence) or an invisible,
    reordering one: shown without them, it would say less than it does. `why`: what follows."""
    hidden = next((ch for ch in text if _hides_text(ch)), None)
    if hidden is not None:
        raise CommandProblem(
            f"it holds the character U+{ord(hidden):04X} (an escape sequence, or text that hides or reorders "
            f"what is shown){why}: remove it"
        )


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_DESCRIPTION else line[: MAX_DESCRIPTION - 1].rstrip() + "…"


def parse(name: str, source: str, text: str) -> CustomCommand:
    """A command from its file's text. The description is the front matter's, else the
    first line of the prompt (a Markdown heading's `#` taken off). A file with control
    characters (an escape sequence) or invisible, reordering ones is a problem: the chat
    shows the prompt without them while the model would get all of it."""
    refuse_hidden(text, ", so what you see is not what the model would get")
    fields, body = front_matter(text)
    description = fields.get("description", "")
    if not description:
        first = next((line for line in body.splitlines() if line.strip()), "")
        description = first.strip().lstrip("#").strip()
    return CustomCommand(
        name,
        source,
        body.strip("\r\n"),
        one_line(description),
        one_line(fields.get("argument-hint", "")),
    )


def split_arguments(arguments: str) -> list[str]:
    """Arguments as a shell splits them (quotes keep words together); unbalanced quotes:
    at whitespace."""
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


def expand(prompt: str, arguments: str) -> str:
    """`$ARGUMENTS` -> all the arguments as typed; `$N` -> the N-th (empty past the last).
    One pass: an argument's own `$1` stays as it is. With no placeholder in the prompt,
    non-empty arguments are appended after a line `ARGUMENTS:`."""
    arguments = arguments.strip()
    words = split_arguments(arguments)

    def value(match: re.Match[str]) -> str:
        if match.group(1) == "ARGUMENTS":
            return arguments
        index = int(match.group(1))
        return words[index - 1] if index <= len(words) else ""

    if _PLACEHOLDER.search(prompt) is None:
        return f"{prompt}\n\nARGUMENTS: {arguments}" if arguments else prompt
    return _PLACEHOLDER.sub(value, prompt)


def first_wins(found: Iterable[CustomCommand], taken: Iterable[str] = ()) -> tuple[list[CustomCommand], list[str]]:
    """The commands to register, in the order found (the first of a name wins), and a notice
    for each one left out: a built-in's name (`taken`: the built-in wins) or a name an
    earlier file already gave."""
    builtin = set(taken)
    kept: dict[str, CustomCommand] = {}
    notices = []
    for command in found:
        if command.name in builtin:
            notices.append(
                f"custom command {command.source}: {command.name} is a built-in command, which wins; "
                "rename the file to use it"
            )
        elif command.name in kept:
            notices.append(
                f"custom command {command.source}: {command.name} is already defined by "
                f"{kept[command.name].source}, which comes first; this one is not used"
            )
        else:
            kept[command.name] = command
    return list(kept.values()), notices
