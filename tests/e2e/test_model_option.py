"""Issue 37: the model is named the same way on every command (`--model`, as chat and
bench take it, on run, serve and fit too) and the drafter too (`--draft`, the older
`--drafter` and `--drafters` kept as aliases)."""

from __future__ import annotations

import json

import httpx2

from tests.support.serve_harness import ServeProcess


def test_run_takes_the_model_as_an_option(dspine, models):
    files = models["dense"]
    done = dspine(
        "run",
        "--model",
        str(files["target"]),
        "def add(a, b):",
        "-n",
        "4",
        "--engine",
        "inproc",
        "--json",
        "--temp",
        "0",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stats"]["generated_tokens"] == 4
    twice = dspine("run", str(files["target"]), "--model", str(files["same"]), "hi")
    assert twice.returncode == 2 and "two models given" in twice.stderr
    alone = dspine("run", "--model", str(files["target"]))
    assert alone.returncode == 2 and "run needs a prompt" in alone.stderr


def test_bench_takes_the_drafter_as_draft(dspine, models, tmp_path):
    files = models["dense"]
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"messages": [{"role": "user", "content": "def add(a, b):"}], "category": "code"}))
    done = dspine(
        "bench",
        "--repeat",
        "1",
        "--model",
        str(files["target"]),
        "--draft",
        str(files["same"]),
        "--engine",
        "inproc",
        "--prompts",
        str(chats),
        "--max-tokens",
        "8",
        "--n-max",
        "2",
        "--no-adaptive",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    drafters = {row["drafter"] for row in json.loads(done.stdout)}
    assert files["same"].name in drafters and "plain" in drafters


def test_serve_takes_the_model_as_an_option(env, models):
    files = models["dense"]
    served = ServeProcess(env, "--model", str(files["target"]), "--ctx", "1024")
    try:
        listed = httpx2.get(served.url + "/models", timeout=30).json()
        assert listed["data"][0]["id"] == "dense-target"
        assert served.stop() == 0
    finally:
        served.process.kill()


def test_fit_and_pull_take_model_and_draft_like_the_rest(dspine, hub, models):
    planned = dspine("fit", "--model", str(models["dense"]["target"]), "--draft", "none", "--json", "--no-measure")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["settings"]["target_file"] == str(models["dense"]["target"])
    pulled = dspine("pull", "qwen3.8-27b", "--draft", "mtp")
    assert pulled.returncode == 0, pulled.stderr
    assert "drafter mtp" in pulled.stdout
