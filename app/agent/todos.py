"""The todo list the model keeps (as Claude Code's TodoWrite and Gemini CLI's write_todos):
a short list of steps with their state, written whole each time, that keeps a long task
on track. It is session state, not conversation: the chat shows it above the input, saves
it with the chat (so `--continue` and compaction keep it) and headless runs report it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

Status = Literal["pending", "in_progress", "completed"]
STATUSES: tuple[Status, ...] = ("pending", "in_progress", "completed")
MAX_TODOS = 20
MAX_CHARS = 200  # of one item
MARKS = {"pending": "☐", "in_progress": "▶", "completed": "☑"}


class TodoProblem(ValueError):
    """A list the tool refuses; the message tells the model how to write it."""


@dataclass(frozen=True)
class Todo:
    content: str
    status: Status = "pending"


def parse(value: Any) -> list[Todo]:
    """The tool's `todos` argument: a list of {content, status}; at most one in progress."""
    if not isinstance(value, list):
        raise TodoProblem('todos must be a list of {"content": "...", "status": "pending|in_progress|completed"}')
    if len(value) > MAX_TODOS:
        raise TodoProblem(f"at most {MAX_TODOS} todos: merge small steps")
    todos = []
    for i, item in enumerate(value, 1):
        if not isinstance(item, dict) or not isinstance(item.get("content"), str) or not item["content"].strip():
            raise TodoProblem(f"todo {i} needs a non-empty string content")
        status = item.get("status", "pending")
        if status not in STATUSES:
            raise TodoProblem(f"todo {i}: status {status!r} is not one of {', '.join(STATUSES)}")
        todos.append(Todo(" ".join(item["content"].split())[:MAX_CHARS], status))
    if sum(t.status == "in_progress" for t in todos) > 1:
        raise TodoProblem("only one todo can be in_progress at a time: finish it or set it back to pending")
    return todos


def render(todos: list[Todo]) -> str:
    """One line a todo, with its mark: what the model gets back and the chat shows."""
    if not todos:
        return "(the todo list is empty)"
    return "\n".join(f"{MARKS[t.status]} {t.content}" for t in todos)


def to_json(todos: list[Todo]) -> str:
    return json.dumps([asdict(t) for t in todos])


def from_json(text: str) -> list[Todo]:
    """A saved list; an unreadable one is no list (the model can write it again)."""
    try:
        return parse(json.loads(text)) if text else []
    except (ValueError, TodoProblem):
        return []
