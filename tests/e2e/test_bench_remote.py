"""`dspine bench --engine remote`: plain rows where the server turns drafting off per request
(dspine's patched llama-server as the remote), the server's figures as they are elsewhere
(vLLM's shapes), said so."""

from __future__ import annotations

import json

PROMPTS = [
    {"category": "code", "messages": [{"role": "user", "content": "Write a Python function that adds two numbers."}]},
    {"category": "prose", "messages": [{"role": "user", "content": "Say something about the sea."}]},
]


def _prompts(tmp_path) -> str:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return str(path)


def test_bench_against_a_remote_llama_server_has_plain_rows_and_its_drafter(dspine, keyed_llama, tmp_path):
    url, key = keyed_llama
    done = dspine(
        "bench", "--engine", "remote", "--url", url, "--prompts", _prompts(tmp_path), "-n", "16", "--repeat", "2",
        "--json", extra_env={"DSPINE_API_KEY": key}, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    plain = [r for r in rows if r["drafter"] == "plain"]
    drafted = [r for r in rows if r["drafter"] != "plain"]
    assert len(plain) == 2 and len(drafted) == 2
    assert all(r["counts"]["drafted"] == 0 for r in plain)  # speculative.n_max 0: nothing drafted
    assert all(r["counts"]["drafted"] > 0 and r["speedup"] is not None for r in drafted)


def test_bench_against_vllm_says_it_has_no_plain_row(dspine, tmp_path):
    from tests.support.remote_servers import shaped_server

    with shaped_server() as upstream:
        done = dspine("bench", "--url", upstream.url, "--prompts", _prompts(tmp_path), "--repeat", "1", "-n", "8")
    assert done.returncode == 0, done.stderr
    assert "cannot turn speculation off per request" in done.stderr
    assert "speculative decoding" in done.stdout and "50%" in done.stdout
    assert "nothing to compare with plain decoding" in done.stdout
