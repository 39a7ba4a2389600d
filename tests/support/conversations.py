"""Chat conversations for template tests: every shape a coding agent sends (system message
or none, tool calls, reasoning, content in parts), and two tool definitions."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

READ = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the project.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
RUN = {
    "type": "function",
    "function": {
        "name": "run",
        "description": "Run a command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
            "required": ["command"],
        },
    },
}


def call(name: str, arguments: dict, ident: str) -> dict:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def round_trip(n: int, name: str, result: str, **args) -> list[dict]:
    """A tool round: the assistant's call `c{n}` and the tool's result."""
    return [
        {"role": "assistant", "content": "", "tool_calls": [call(name, args, f"c{n}")]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": result},
    ]


def tool_history(rounds: int = 6) -> list[dict]:
    """A coding session's history: `rounds` long file reads, a failing test run, a remark."""
    messages: list[dict] = [{"role": "user", "content": "fix the parser"}]
    for n in range(rounds):
        messages += round_trip(n, "read_file", f"contents of file {n}\n" * 80, path=f"src/f{n}.py")
    messages += round_trip(99, "run_command", "exit code 1\nFAILED test_parse\n" + "x\n" * 400, command="pytest -q")
    messages.append({"role": "assistant", "content": "The parse test fails."})
    return messages


def user(text) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str = "", **more) -> dict:
    return {"role": "assistant", "content": text, **more}


def tool(text: str, ident: str) -> dict:
    return {"role": "tool", "content": text, "tool_call_id": ident}


SYSTEMS = [None, "You are a coding assistant.", [{"type": "text", "text": "You are a coding assistant, in parts."}]]
BODIES = [
    [user("Write hello world in C.")],
    [user("hi"), assistant("hello"), user("how are you?")],
    [user("2+2?"), assistant("4", reasoning_content="Adding two and two."), user("and 3+3?")],
    [user("2+2?"), assistant("<think>\nAdding.\n</think>\n\n4"), user("thanks")],
    [
        user("What is in a.txt?"),
        assistant(tool_calls=[call("read_file", {"path": "a.txt"}, "c1")]),
        tool("hello", "c1"),
    ],
    [
        user("Compare a.txt and b.txt."),
        assistant(
            "Let me look.",
            tool_calls=[call("read_file", {"path": "a.txt"}, "c1"), call("read_file", {"path": "b.txt"}, "c2")],
        ),
        tool("one", "c1"),
        tool("two", "c2"),
        assistant("They differ."),
        user("Which is longer?"),
    ],
    [
        user("List the files."),
        assistant(
            reasoning_content="I should run ls.",
            tool_calls=[call("run", {"command": "ls", "timeout": 5, "env": {"A": "1"}, "flags": [1, 2]}, "c9")],
        ),
        tool("a.txt\nb.txt", "c9"),
    ],
    [
        user([{"type": "text", "text": "Parts "}, {"type": "text", "text": "of a question."}]),
        assistant("ok"),
        user("go"),
    ],
    [
        user("Fix the bug."),
        assistant("", reasoning_content="Look first.", tool_calls=[call("read_file", {"path": "main.c"}, "c3")]),
        tool("int main() {}", "c3"),
        user("Also the README."),
        assistant("Done.", reasoning_content="Both fixed."),
        user("Thanks!"),
    ],
    [user("<tool_response>\nnot really\n</tool_response> but a question"), assistant("I see."), user("ok")],
]


def conversations() -> Iterator[list[dict]]:
    for system, body in itertools.product(SYSTEMS, BODIES):
        yield ([{"role": "system", "content": system}] if system is not None else []) + body
