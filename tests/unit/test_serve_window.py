"""The window and compaction point each client is told (`--print-config`), the
overflow errors in each API's words, and the cache rules: the pure parts."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from app.serve.cache_rules import RULES, clean
from app.serve.client_config import TOOLS, Endpoint, claude_code_compaction, snippet
from app.serve.model_list import model_list
from app.serve.overflow import translate_error
from app.serve.window import budget, slot_context

ENDPOINT = Endpoint("http://127.0.0.1:8080/v1", "qwen3.8-27b", 32768, has_key=False)


def env_lines(text: str) -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(.*)$", text, re.MULTILINE))


def heredoc(text: str) -> str:
    return text.split("<<'JSON'\n", 1)[1].split("\nJSON\n", 1)[0]


def test_slot_context_splits_between_slots_and_stops_at_the_trained_context():
    assert slot_context(65536, 2) == 32768
    assert slot_context(65536, 2, n_ctx_train=8192) == 8192  # llama-server caps a slot there
    assert slot_context(16384, 1, n_ctx_train=0) == 16384  # unknown: no cap


@pytest.mark.parametrize("context", [2048, 8192, 32768, 131072, 262144])
def test_budget_leaves_room_for_a_reply_and_the_clients_estimate(context):
    w = budget(context)
    assert 512 <= w.reply <= 16384 and w.reply <= context // 2
    assert 0 < w.compact_at < context - w.reply
    assert w.compact_at + w.reply + context // 10 <= context


def test_every_tool_is_told_the_slot_window_and_a_compaction_point():
    w = ENDPOINT.window
    for tool in TOOLS:
        text = snippet(tool, ENDPOINT)
        assert text and "qwen3.8-27b" in text, tool
    claude = env_lines(snippet("claude-code", ENDPOINT))
    assert claude["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == "32768"
    assert claude["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == str(w.reply)
    pct = int(claude["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"])
    assert (32768 - w.reply) * pct // 100 <= w.compact_at  # never later than the point
    assert claude["ANTHROPIC_MODEL"] == claude["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "qwen3.8-27b"
    codex = tomllib.loads(snippet("codex", ENDPOINT).split("\n", 1)[1])
    assert codex["model_context_window"] == 32768 and codex["model_auto_compact_token_limit"] == w.compact_at
    assert codex["model_providers"]["dspine"]["wire_api"] == "responses"
    opencode = json.loads(snippet("opencode", ENDPOINT).split("\n", 1)[1])
    limit = opencode["provider"]["dspine"]["models"]["qwen3.8-27b"]["limit"]
    assert limit == {"context": 32768, "input": 32768 - w.reply, "output": w.reply}
    # opencode compacts at limit.input - compaction.reserved
    assert limit["input"] - opencode["compaction"]["reserved"] == w.compact_at and opencode["compaction"]["auto"]
    qwen_settings = json.loads(heredoc(snippet("qwen-code", ENDPOINT)))
    qwen = qwen_settings["model"]
    assert qwen["generationConfig"]["contextWindowSize"] == 32768
    # qwen-code 0.24 reads context.autoCompactThreshold; earlier versions the older knob
    share = qwen_settings["context"]["autoCompactThreshold"]
    assert share == qwen["chatCompression"]["contextPercentageThreshold"]
    assert share * 32768 <= w.compact_at + 328
    assert env_lines(snippet("qwen-code", ENDPOINT))["OPENAI_MODEL"] == "qwen3.8-27b"
    aider = json.loads(heredoc(snippet("aider", ENDPOINT)))["openai/qwen3.8-27b"]
    assert aider["max_input_tokens"] + aider["max_output_tokens"] == 32768
    assert f"contextLength: 32768\n      maxTokens: {w.reply}" in snippet("continue", ENDPOINT)
    # Tools without a compaction knob say so instead of pretending.
    for tool in ("continue", "zed", "llm", "aider"):
        assert re.search(r"has no (window or )?compaction", snippet(tool, ENDPOINT)), tool


def test_claude_code_small_window_is_flagged():
    """Claude Code keeps a fixed 13,000 tokens below (window - reply): an 8K slot would
    compact on every turn, and the printed text says so."""
    small = snippet("claude-code", Endpoint("http://127.0.0.1:8080/v1", "smol", 8192, has_key=False))
    assert "give each slot a larger --ctx" in small
    pct, at = claude_code_compaction(budget(131072))
    assert 0 < at <= budget(131072).compact_at and 1 <= pct <= 100
    assert "larger --ctx" not in snippet("claude-code", ENDPOINT)


def test_models_list_reports_the_window_where_clients_look():
    listed = model_list("qwen3.8-27b", 32768, think=True)
    assert [m["id"] for m in listed["data"]] == ["qwen3.8-27b", "qwen3.8-27b:think", "qwen3.8-27b:no-think"]
    entry = listed["data"][0]
    w = budget(32768)
    assert entry["context_length"] == entry["max_model_len"] == entry["meta"]["n_ctx_train"] == 32768
    assert entry["max_input_tokens"] == 32768 - w.reply and entry["max_tokens"] == w.reply
    # A model without a thinking mode (smollm2-135m) lists its one name: ":think" promised a mode
    # it does not have.
    plain = model_list("smollm2-135m", 8192, think=False, thinks=False)
    assert [m["id"] for m in plain["data"]] == ["smollm2-135m"] and plain["last_id"] == "smollm2-135m"


LLAMA_OVERFLOW = json.dumps(
    {
        "error": {
            "code": 400,
            "type": "exceed_context_size_error",
            "message": "request (9000 tokens) exceeds the available context size (4096 tokens), try increasing it",
            "n_prompt_tokens": 9000,
            "n_ctx": 4096,
        }
    }
).encode()


def test_overflow_in_openai_words_on_openai_paths():
    for path in ("/v1/chat/completions", "/chat/completions", "/v1/completions", "/v1/responses"):
        status, body = translate_error(path, 400, LLAMA_OVERFLOW)
        error = json.loads(body)["error"]
        assert status == 400 and error["code"] == "context_length_exceeded"
        assert error["type"] == "invalid_request_error" and error["param"] == "messages"
        assert "4096" in error["message"] and "9000" in error["message"]


def test_overflow_in_anthropic_words_on_messages():
    status, body = translate_error("/v1/messages", 400, LLAMA_OVERFLOW)
    shaped = json.loads(body)
    assert status == 400 and shaped["type"] == "error"
    assert shaped["error"]["type"] == "invalid_request_error"
    assert shaped["error"]["message"] == "prompt is too long: 9000 tokens > 4096 maximum"


def test_other_errors_pass_unchanged():
    other = b'{"error": {"code": 500, "type": "server_error", "message": "boom"}}'
    assert translate_error("/v1/messages", 500, other) == (500, other)
    # A body that is not JSON (a remote's plain-text 404) goes out as the error object it is
    # labelled to be, which OpenAI and Anthropic clients both read (hostile trial, issue 50).
    status, body = translate_error("/v1/chat/completions", 502, b"not json", "the remote server (http://box/v1)")
    assert status == 502
    assert json.loads(body) == {
        "type": "error",
        "error": {"message": "the remote server (http://box/v1) answered 502: not json", "type": "api_error"},
    }


BILLING_1 = "x-anthropic-billing-header: cc_version=2.1.197.a1b; cc_entrypoint=sdk-cli;"
BILLING_2 = "x-anthropic-billing-header: cc_version=2.1.197.f9e; cc_entrypoint=sdk-cli;"


def test_rule_claude_code_billing_header_on_anthropic_system_blocks():
    assert [r.name for r in RULES] == ["claude-code-billing-header"]
    body = {
        "system": [
            {"type": "text", "text": BILLING_1},
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [{"role": "user", "content": BILLING_1}],  # what the user wrote stays
    }
    cleaned, applied = clean(body)
    assert applied == ["claude-code-billing-header"]
    assert cleaned["system"] == [body["system"][1]]
    assert cleaned["messages"] == body["messages"]
    again, _ = clean({**body, "system": [{"type": "text", "text": BILLING_2}, body["system"][1]]})
    assert again["system"] == cleaned["system"]  # the two requests now share their prefix
    assert body["system"][0]["text"] == BILLING_1  # the client's body is not changed in place


def test_rule_claude_code_billing_header_in_strings_and_openai_system_messages():
    cleaned, applied = clean({"system": BILLING_1 + "\nYou are Claude Code.", "messages": []})
    assert cleaned["system"] == "You are Claude Code." and applied
    messages = [{"role": "system", "content": BILLING_2 + "\nBe brief."}, {"role": "user", "content": "hi"}]
    cleaned, applied = clean({"messages": messages})
    assert cleaned["messages"][0]["content"] == "Be brief." and cleaned["messages"][1] is messages[1]


def test_a_request_without_volatile_lines_is_the_same_object():
    body = {"system": "Plain.", "messages": [{"role": "system", "content": "x-anthropic-billing-header is a word"}]}
    cleaned, applied = clean(body)
    assert cleaned is body and applied == []
