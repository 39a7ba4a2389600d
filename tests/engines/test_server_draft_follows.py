"""On dspine's patched llama-server the drafter draws through a clone of the request's
sampler: the request's penalties (presence, frequency, repeat, over the same window and
history, prompt included), its logit bias, truncation, temperature and random stream. So
the real SmolLM2 Q8_0 target drafting for itself keeps (nearly) every draft under the
think-off preset, greedy and sampled with a seed, and writes exactly what plain decoding
writes. Upstream's drafter sampled with its own top-k and lost 30% of these drafts."""

from __future__ import annotations

import json

import pytest

from backends.events import ToolCall
from backends.inproc import InprocEngine
from backends.llama_server import LlamaServerEngine, ServerConfig
from backends.sampling import Sampling, preset
from tests.support.script_model import write_script_model
from tests.support.self_drafting import complete, launch

REQUEST = "Write a Python function that parses a CSV line into fields, then explain how it handles quotes."
PROMPT = f"<|im_start|>user\n{REQUEST}<|im_end|>\n<|im_start|>assistant\n"
THINK_OFF = preset(False)  # temperature 0.7, top-p 0.8, top-k 20, presence penalty 1.5

# What each case adds to the think-off preset.
CASES = {
    "think-off greedy": {"temperature": 0},
    "think-off sampled": {"seed": 7},
    "repeat+frequency greedy": {"temperature": 0, "repeat_penalty": 1.3, "frequency_penalty": 0.5},
    "repeat+frequency sampled": {"seed": 11, "repeat_penalty": 1.3, "frequency_penalty": 0.5, "repeat_last_n": 32},
}


def body(**changes) -> dict:
    request = {
        "prompt": PROMPT,
        "n_predict": 128,
        "temperature": THINK_OFF.temperature,
        "top_p": THINK_OFF.top_p,
        "top_k": THINK_OFF.top_k,
        "min_p": THINK_OFF.min_p,
        "presence_penalty": THINK_OFF.presence_penalty,
        "cache_prompt": False,
    }
    request.update(changes)
    return request


@pytest.fixture(scope="module")
def plain(patched_server, real, tmp_path_factory):
    engine = launch(patched_server, real, tmp_path_factory.mktemp("plain"), drafter=False)
    yield engine
    engine.close()


# Greedy drafts (llama-server's default: verified by match) and probabilistic ones
# (verified by rejection against the candidates the drafter reports).
@pytest.fixture(scope="module", params=["greedy drafts", "probabilistic drafts"])
def drafting(request, patched_server, real, tmp_path_factory):
    extra = ("--spec-draft-sampling", "probabilistic" if request.param == "probabilistic drafts" else "greedy")
    engine = launch(patched_server, real, tmp_path_factory.mktemp("self"), True, *extra)
    yield engine
    engine.close()


@pytest.mark.parametrize("case", list(CASES))
def test_a_copy_of_the_target_keeps_its_drafts_and_the_text_under_the_requests_penalties(plain, drafting, case):
    request = body(**CASES[case])
    expected, _ = complete(plain, request)
    text, timings = complete(drafting, request)
    assert text == expected
    drafted, kept = timings.get("draft_n", 0), timings.get("draft_n_accepted", 0)
    assert drafted >= 40, timings
    assert kept / drafted >= 0.99, (kept, drafted)


def test_the_drafter_follows_the_requests_logit_bias(plain, drafting):
    """Bias against the tokens plain decoding writes most: a drafter blind to the bias
    proposes them and is rejected."""
    assert plain._running is not None
    first, _ = complete(plain, body(temperature=0))
    tokens = plain._running.client.post("/tokenize", json={"content": first}).json()["tokens"]
    common = sorted(set(tokens), key=tokens.count, reverse=True)[:3]
    request = body(temperature=0, logit_bias=[[token, -4.0] for token in common])
    expected, _ = complete(plain, request)
    assert expected != first  # the bias changes what is written
    text, timings = complete(drafting, request)
    assert text == expected
    assert timings["draft_n_accepted"] / timings["draft_n"] >= 0.99, timings


# -- tool-call turns ------------------------------------------------------------------------

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the project",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
GREEDY_TOOL_TURN = Sampling(temperature=0, max_tokens=48)


def test_a_tool_call_turn_keeps_its_drafts_as_in_process(patched_server, tmp_path):
    """The generated tool-call model (one Qwen3-Coder XML call) drafting for itself: under
    llama-server's tool-call grammar (lazy, from `<tool_call>` on) the drafts go through the
    same grammar, and the server keeps as many as the in-process engine."""
    model = str(write_script_model(tmp_path / "script.gguf"))
    messages = [{"role": "user", "content": "What does README.md say?"}]
    shares = {}
    inproc = InprocEngine(model, draft_path=model, n_ctx=4096, n_max=4).load()
    try:
        events = list(inproc.stream(messages, think=False, sampling=GREEDY_TOOL_TURN, tools=[READ_FILE]))
    finally:
        inproc.close()
    assert any(isinstance(e, ToolCall) for e in events)
    shares["inproc"] = events[-1].stats
    config = ServerConfig(
        model, draft_model=model, drafter_kind="draft", n_ctx=4096, gpu_layers=0, draft_gpu_layers=0, n_max=4
    )
    server = LlamaServerEngine(config, binary=str(patched_server), log_dir=tmp_path).start()
    try:
        events = list(server.stream(messages, think=False, sampling=GREEDY_TOOL_TURN, tools=[READ_FILE]))
    finally:
        server.close()
    assert any(isinstance(e, ToolCall) for e in events)
    shares["server"] = events[-1].stats
    assert shares["inproc"].drafted > 0 and shares["inproc"].accepted == shares["inproc"].drafted
    assert shares["server"].drafted > 0 and shares["server"].accepted == shares["server"].drafted, shares


def test_smollm2_forced_into_a_tool_call_keeps_its_drafts(plain, drafting):
    """A JSON schema for the call: llama-server's grammar holds the reply to it from the
    first token. The drafts follow the grammar, so a copy of the target keeps them all, as
    in process (upstream's drafter, blind to the grammar, kept 20 of 168 here)."""
    call = {
        "type": "object",
        "properties": {
            "tool": {"const": "read_file"},
            "arguments": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
        "required": ["tool", "arguments"],
    }
    prompt = "<|im_start|>user\nRead the file README.md and tell me what it says.<|im_end|>\n<|im_start|>assistant\n"
    request = {"prompt": prompt, "json_schema": call, "temperature": 0, "n_predict": 64, "cache_prompt": False}
    expected, _ = complete(plain, request)
    text, timings = complete(drafting, request)
    assert text == expected and json.loads(text)["tool"] == "read_file"
    assert timings["draft_n"] > 0 and timings["draft_n_accepted"] / timings["draft_n"] >= 0.99, timings
