"""Tool calls written as text (in-process engine): both forms, split anywhere."""

from __future__ import annotations

import json

import pytest

from backends.events import Delta, ToolCall
from backends.tool_call_text import ToolCallParser

XML = (
    "Let me look.\n<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/a.py\n</parameter>\n"
    "<parameter=start_line>\n3\n</parameter>\n</function>\n</tool_call>"
)
JSON_FORM = 'Sure. <tool_call>\n{"name": "search", "arguments": {"pattern": "def \\\\w+"}}\n</tool_call>'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {"properties": {"path": {"type": "string"}, "start_line": {"type": "integer"}}},
        },
    }
]


def run(text: str, step: int) -> list:
    parser = ToolCallParser(TOOLS)
    events = []
    for i in range(0, len(text), step):
        events += parser.feed(text[i : i + step])
    events += parser.flush()
    answer = "".join(e.text for e in events if isinstance(e, Delta))
    return [answer] + [e for e in events if isinstance(e, ToolCall)]


@pytest.mark.parametrize("step", [1, 3, 7, 1000])
def test_qwen3_coder_xml_form(step):
    answer, call = run(XML, step)
    assert answer == "Let me look.\n"
    assert call.name == "read_file" and json.loads(call.arguments) == {"path": "src/a.py", "start_line": 3}


@pytest.mark.parametrize("step", [1, 5, 1000])
def test_json_form(step):
    answer, call = run(JSON_FORM, step)
    assert answer == "Sure. "
    assert call.name == "search" and json.loads(call.arguments) == {"pattern": "def \\w+"}


def test_text_that_only_looks_like_a_tag_is_kept():
    assert run("a < b and <tool_c", 2) == ["a < b and <tool_c"]
    assert run("<tool_call>not a call</tool_call> ok", 4) == ["<tool_call>not a call</tool_call> ok"]


def test_unclosed_call_at_the_end_still_counts_and_two_calls_get_two_ids():
    text = XML + "<tool_call>\n<function=list_files>\n</function>"
    _, first, second = run(text, 4)
    assert (first.id, second.id, second.name, second.arguments) == ("call_1", "call_2", "list_files", "{}")


def test_templates_see_tools_and_tool_call_arguments_as_objects():
    from backends.chat_template import render

    template = (
        "{% for t in tools %}T:{{ t.function.name }}\n{% endfor %}"
        "{% for m in messages %}{{ m.role }}:{{ m.content }}"
        "{% for c in m.tool_calls or [] %}<function={{ c.function.name }}>"
        "{% for k, v in c.function.arguments.items() %}<parameter={{ k }}>{{ v }}</parameter>{% endfor %}"
        "{% endfor %}\n{% endfor %}"
    )
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    text = render(
        template,
        [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "content": "x"}],
        enable_thinking=False,
        add_generation_prompt=False,
        tools=TOOLS,
    )
    # trim_blocks eats the line break after each endfor.
    assert text == "T:read_file\nassistant:<function=read_file><parameter=path>a.py</parameter>tool:x"
