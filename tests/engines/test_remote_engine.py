"""The remote engine asks the server what it is, and reads acceptance where the server
gives it: a real llama-server with a key, /metrics and a drafter on 127.0.0.1; vLLM's
shapes served by a stand-in (tests/support/remote_servers.py); each way the first
contact fails, with its exit code."""

from __future__ import annotations

import pytest

from backends.errors import RemoteModelUnknown, RemoteNotOpenAI, RemoteRefused, RemoteUnreachable
from backends.events import End
from backends.remote import RemoteEngine
from backends.remote_probe import Prober
from backends.sampling import Sampling
from tests.support.remote_servers import not_openai_server, shaped_server

GREEDY = Sampling(temperature=0.0, max_tokens=40)
CODE = [{"role": "user", "content": "Write a Python function that adds two numbers, with a docstring."}]


def _end(engine: RemoteEngine) -> End:
    events = list(engine.stream(CODE, think=False, sampling=GREEDY))
    end = events[-1]
    assert isinstance(end, End), end
    return end


def test_a_llama_server_says_its_window_and_its_replies_count_the_drafts(keyed_llama):
    url, key = keyed_llama
    engine = RemoteEngine.connect(url, key)
    try:
        server = engine.server
        assert server is not None and server.kind == "llama-server"
        assert engine.context_size == 2048 and server.context_from == "/props"  # the slot's, not --ctx
        assert server.per_reply_counts and server.counters and server.per_request_draft
        with Prober(url, key) as prober:
            before = prober.counters()
            end = _end(engine)
            after = prober.counters()
        assert before is not None and after is not None
        stats = end.stats
        assert stats.drafted > 0 and 0 < stats.accepted <= stats.drafted
        # The reply's timings and the server's counters say the same of this reply.
        counted = after.delta(before)
        assert (counted.draft_tokens, counted.accepted) == (stats.drafted, stats.accepted)
        assert stats.position_kept and stats.position_kept[0] == counted.per_position[0]
    finally:
        engine.close()


def test_a_llama_server_refuses_a_wrong_key_and_no_key(keyed_llama):
    url, _ = keyed_llama
    with pytest.raises(RemoteRefused, match="refused the API key") as wrong:
        RemoteEngine.connect(url, "sk-wrong")
    assert wrong.value.exit_code == 4 and "sk-wrong" not in wrong.value.cause
    with pytest.raises(RemoteRefused, match="needs an API key") as none:
        RemoteEngine.connect(url, None)
    assert "DSPINE_API_KEY" in none.value.fix


def test_vllm_without_per_request_figures_reads_acceptance_from_its_counters():
    with shaped_server(key="sk-v") as served:
        engine = RemoteEngine.connect(served.url, "sk-v")
        try:
            assert engine.server is not None and engine.server.kind == "vLLM"
            assert engine.context_size == 32768 and engine.model == "Qwen/Qwen3-8B"
            assert engine.drafter_name and "/metrics" in engine.drafter_name
            stats = _end(engine).stats
        finally:
            engine.close()
    assert served.bodies[-1]["model"] == "Qwen/Qwen3-8B"  # the served name, asked of the server
    # one reply: 4 steps of 3 drafts keeping 0, 1, 2, 3
    assert (stats.drafted, stats.accepted) == (12, 6)
    assert stats.position_tested == [4, 3, 2] and stats.position_kept == [3, 2, 1]
    assert stats.verify_steps == stats.generated_tokens - 6


def test_vllm_with_per_request_figures_reads_them_from_the_reply():
    with shaped_server(per_request=True, counters=False) as served:
        engine = RemoteEngine.connect(served.url)
        try:
            assert not engine.server.counters
            stats = _end(engine).stats
        finally:
            engine.close()
    assert (stats.drafted, stats.accepted) == (12, 6) and stats.draft_note is None


def test_a_server_that_reports_nothing_says_so():
    with shaped_server(kind="generic", counters=False) as served:
        engine = RemoteEngine.connect(served.url)
        try:
            stats = _end(engine).stats
        finally:
            engine.close()
    assert stats.drafted == 0 and stats.draft_note == "acceptance not reported by this server"


def test_each_failed_first_contact_says_what_and_exits_with_its_code():
    with shaped_server(key="sk-v") as served:
        with pytest.raises(RemoteRefused):
            RemoteEngine.connect(served.url, "sk-nope")
        with pytest.raises(RemoteModelUnknown, match="does not serve 'gpt-4o'; it serves: Qwen/Qwen3-8B") as model:
            RemoteEngine.connect(served.url, "sk-v", model="gpt-4o")
        assert model.value.exit_code == 2
    with not_openai_server() as url, pytest.raises(RemoteNotOpenAI, match="answered 404") as other:
        RemoteEngine.connect(url)
    assert other.value.exit_code == 14 and "/v1" in other.value.fix
    with pytest.raises(RemoteUnreachable, match="connection refused") as nobody:
        RemoteEngine.connect("http://127.0.0.1:9/v1")
    assert nobody.value.exit_code == 5


def test_sglang_says_its_drafter_and_returns_each_replys_figures_when_asked():
    with shaped_server(kind="sglang", key="sk-s") as served:
        engine = RemoteEngine.connect(served.url, "sk-s")
        try:
            assert engine.server.kind == "SGLang" and engine.context_size == 40960
            assert engine.drafter_name == "EAGLE3 (qwen3_8b_eagle3), 4 draft tokens"
            stats = _end(engine).stats
        finally:
            engine.close()
    assert served.bodies[-1]["return_spec_tokens_details"] is True
    # 9 drafted over 3 steps of 3, steps keeping 1, 2 and 2 (the recorded histogram [0, 1, 2, 0])
    assert (stats.drafted, stats.accepted) == (9, 5)
    assert stats.position_tested == [3, 3, 2] and stats.position_kept == [3, 2, 0]


def test_an_older_sglang_is_not_asked_for_figures_it_cannot_give_and_its_average_is_said():
    with shaped_server(kind="sglang", version="0.5.10") as served:
        engine = RemoteEngine.connect(served.url)
        try:
            stats = _end(engine).stats
        finally:
            engine.close()
    assert "return_spec_tokens_details" not in served.bodies[-1]
    assert stats.drafted == 0 and stats.draft_note == "server average accept len 2.71 (no per-reply figures)"


def test_a_reply_that_arrives_at_once_has_no_speed_rather_than_a_wrong_one():
    """From a trial: a remote reply whose chunks all came in one read showed about 80,000 tok/s
    (its tokens over the fraction of a millisecond between its first and last chunk). This
    client's clock cannot time such a reply: no speed, and the readout shows "- tok/s"."""
    from app.tui.figures import readout_line

    with shaped_server(per_request=True, counters=False) as served:
        engine = RemoteEngine.connect(served.url)
        try:
            stats = _end(engine).stats
        finally:
            engine.close()
    assert stats.generated_tokens > 0 and stats.decode_s == 0.0 and stats.tokens_per_s is None
    assert readout_line(stats).startswith("- tok/s")
