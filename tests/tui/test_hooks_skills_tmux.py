"""Hooks and skills as a new user meets them (issue 49, "as a new user in tmux, on a scratch
repository"): a project that carries a PostToolUse formatter hook and a skill. `dspine chat` asks
first, naming the hook's command and the skill; after yes the model (a stand-in server through
`--engine remote`) reads the skill, whose body it had not seen, edits with consent, and the hook
formats the file after the edit."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import wait_for
from tests.support.repos import scratch_repo
from tests.support.stand_in import StandIn, choice, stand_in
from tests.support.tmux import dspine_in_tmux, keys, screen

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

EDIT = {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}
BODY = "Name the bug you fixed in the past tense. PLUGH-SKILL-BODY"
DESCRIPTION = "How to write a fix's summary line"
FORMATTER = (
    "import pathlib\np = pathlib.Path('calc.py')\np.write_text(p.read_text() + '# formatted\\n')\n"
    "print('1 file reformatted')\n"
)


def call(name: str, arguments: dict, index: int) -> list[dict]:
    head = {"index": 0, "id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": ""}}
    return [
        choice({"tool_calls": [head]}),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(arguments)}}]}),
        choice({}, "tool_calls"),
    ]


def chunks(messages: list[dict]) -> list[dict]:
    """Turn 1: read the skill. Turn 2 (its text in the context): the edit. Turn 3: a last word."""
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return [choice({"content": "Reading the skill first."}), *call("read_skill", {"name": "fix-notes"}, 1)]
    if len(results) == 1:
        return [choice({"content": "Now the fix."}), *call("edit_file", EDIT, 2)]
    return [choice({"content": "Fixed the subtraction in add."}), choice({}, "stop")]


@pytest.fixture
def model() -> Iterator[StandIn]:
    with stand_in(chunks) as served:
        yield served


def test_a_projects_hook_and_skill_asked_first_then_used(env, model, tmp_path):
    hook = {"matcher": "Edit", "hooks": [{"type": "command", "command": f"{sys.executable} fmt.py"}]}
    repo = scratch_repo(
        tmp_path,
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "fmt.py": FORMATTER,
            ".claude/settings.json": json.dumps({"hooks": {"PostToolUse": [hook]}}),
            ".claude/skills/fix-notes/SKILL.md": f"---\nname: fix-notes\ndescription: {DESCRIPTION}\n---\n{BODY}\n",
        },
    )
    calc = repo / "calc.py"
    args = ("chat", "--engine", "remote", "--url", model.url, "--think", "off")
    with dspine_in_tmux(env, tmp_path, *args, cwd=repo, name="hooks", size=(120, 45)) as session:
        try:
            wait_for(lambda: "fmt.py" in screen(session) and "fix-notes" in screen(session), timeout=60,
                     what="the trust question naming the hook and the skill")  # fmt: skip
            print("\n--- the trust question ---\n" + screen(session))
            keys(session, "End")  # a question is answered only once read to its end
            wait_for(lambda: "y yes · n no" in screen(session), timeout=30, what="the question read to its end")
            keys(session, "y")
            wait_for(lambda: "Trust them?" not in screen(session), timeout=30, what="the chat after yes")
            keys(session, "Fix the bug in calc.py", "Enter")
            wait_for(lambda: "y yes · n no · a always" in screen(session), timeout=60, what="the edit's consent")
            keys(session, "y")
            wait_for(lambda: "reformatted" in screen(session), timeout=60, what="what the hook printed")
            wait_for(lambda: "Fixed the subtraction" in screen(session), timeout=60, what="the last turn")
        finally:
            print("\n--- dspine chat with a hook and a skill ---\n" + screen(session))
        keys(session, "C-q")
    assert calc.read_text() == "def add(a, b):\n    return a + b\n# formatted\n"  # edited, then the hook ran
    first_system = model.requests[0]["messages"][0]["content"]
    assert DESCRIPTION in first_system and BODY not in first_system  # listed by description only
    skill_result = next(m for m in model.requests[1]["messages"] if m["role"] == "tool")
    assert BODY in skill_result["content"]  # its body read when picked
