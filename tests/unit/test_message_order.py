"""The rule for later system and developer messages, on plain message lists and on each
API's request body: in place where the template takes them, else merged into the
leading system message in order; nothing the client sent is lost either way."""

from __future__ import annotations

import json

import pytest

from app.serve.system_messages import SystemMessageError, anthropic, apply, chat, responses
from backends.message_order import IN_PLACE, MERGE, later_system_count, merge_contents, normalise

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "developer", "content": "Reminder: answer in French."},
    {"role": "user", "content": "how are you?"},
    {"role": "system", "content": "Hook: the tests pass."},
]


def texts_of(value) -> str:
    return json.dumps(value)


def test_in_place_keeps_every_message_where_it_stands_and_names_developer_system():
    out = normalise(CONVERSATION, IN_PLACE)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "system", "user", "system"]
    assert [m["content"] for m in out] == [m["content"] for m in CONVERSATION]
    assert CONVERSATION[3]["role"] == "developer"  # the caller's list is not changed


def test_merge_folds_later_system_texts_into_the_leading_one_in_order():
    out = normalise(CONVERSATION, MERGE)
    assert out[0] == {
        "role": "system",
        "content": "You are terse.\n\nReminder: answer in French.\n\nHook: the tests pass.",
    }
    assert out[1:] == [m for m in CONVERSATION if m["role"] not in ("system", "developer")]
    assert later_system_count(out) == 0 and later_system_count(CONVERSATION) == 2


def test_merge_without_a_leading_system_message_makes_one_and_keeps_the_rest_in_order():
    messages = [{"role": "user", "content": "a"}, {"role": "developer", "content": "d"}]
    assert normalise(messages, MERGE) == [{"role": "system", "content": "d"}, {"role": "user", "content": "a"}]


def test_nothing_to_move_returns_the_same_messages():
    plain = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert normalise(plain, MERGE) == plain
    assert normalise([{"role": "user", "content": "u"}], MERGE) == [{"role": "user", "content": "u"}]


def test_merging_content_parts_keeps_every_part():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    merged = merge_contents(["first", [{"type": "text", "text": "second"}, image], None, ""])
    assert merged == [
        {"type": "text", "text": "first"},
        {"type": "text", "text": "\n\n"},
        {"type": "text", "text": "second"},
        image,
    ]


def test_chat_body_is_normalised_and_other_fields_kept():
    body = {"model": "m", "messages": CONVERSATION, "tools": [{"type": "function"}], "stream": True}
    out = chat(body, MERGE)
    assert out["tools"] == body["tools"] and out["stream"] is True and out["model"] == "m"
    assert later_system_count(out["messages"]) == 0
    assert apply("/v1/chat/completions", body, MERGE) == out
    assert apply("/v1/completions", body, MERGE) is body  # a raw prompt has no messages


def test_anthropic_merge_moves_system_messages_into_the_top_level_system():
    body = {
        "system": "You are Claude Code.",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
            {"role": "system", "content": [{"type": "text", "text": "<system-reminder>todo</system-reminder>"}]},
            {"role": "user", "content": "go on"},
        ],
    }
    out = anthropic(body, MERGE)
    assert out["system"] == "You are Claude Code.\n\n<system-reminder>todo</system-reminder>"
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]


def test_anthropic_merge_with_system_blocks_appends_a_block_with_its_separator():
    body = {
        "system": [{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "B"}],
    }
    out = anthropic(body, MERGE)
    # llama-server joins system blocks with nothing between them.
    assert "".join(block["text"] for block in out["system"]) == "A\n\nB"
    assert out["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_anthropic_in_place_leaves_system_messages_in_messages():
    body = {"system": "S", "messages": [{"role": "user", "content": "hi"}, {"role": "developer", "content": "D"}]}
    out = anthropic(body, IN_PLACE)
    assert out["system"] == "S" and out["messages"][1] == {"role": "system", "content": "D"}
    untouched = {"system": "S", "messages": [{"role": "user", "content": "hi"}]}
    assert anthropic(untouched, MERGE) is untouched


def test_responses_merge_folds_developer_items_into_instructions():
    body = {
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox: read-only"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "message", "role": "developer", "content": "approval: never"},
        ],
    }
    out = responses(body, MERGE)
    assert out["instructions"] == "You are Codex.\n\nsandbox: read-only\n\napproval: never"
    assert [item["role"] for item in out["input"]] == ["user"]
    in_place = responses(body, IN_PLACE)
    assert [item["role"] for item in in_place["input"]] == ["system", "user", "system"]
    assert "instructions" not in responses({"input": body["input"][1:2]}, MERGE)
    assert responses({"input": body["input"][2:]}, MERGE)["instructions"] == "approval: never"


@pytest.mark.parametrize(
    ("shape", "body"),
    [
        (
            anthropic,
            {"messages": [{"role": "user", "content": "u"}, {"role": "system", "content": [{"type": "image"}]}]},
        ),
        (responses, {"input": [{"role": "developer", "content": [{"type": "input_image", "image_url": "x"}]}]}),
    ],
)
def test_a_system_message_that_cannot_be_merged_whole_is_refused_not_cut(shape, body):
    with pytest.raises(SystemMessageError, match="only text"):
        shape(body, MERGE)
    assert shape(body, IN_PLACE) is not None  # in place nothing needs moving


def test_count_tokens_and_apply_template_follow_the_same_rule():
    body = {"messages": [{"role": "user", "content": "u"}, {"role": "system", "content": "s"}]}
    assert apply("/v1/messages/count_tokens", {**body, "system": "S"}, MERGE)["system"] == "S\n\ns"
    assert apply("/apply-template", body, MERGE)["messages"][0] == {"role": "system", "content": "s"}
