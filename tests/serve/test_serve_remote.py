"""`dspine serve --engine remote` as a user runs it: the agents' endpoint in front of a real
llama-server started as a remote (its key from DSPINE_API_KEY, never on a command line),
and in front of a stand-in in vLLM's shapes; each failed first contact exits with its code."""

from __future__ import annotations

import httpx2
import psutil

from tests.conftest import wait_for
from tests.support.remote_servers import shaped_server
from tests.support.serve_harness import ServeProcess

CODE = [{"role": "user", "content": "Write a Python function that adds two numbers."}]


def test_serve_in_front_of_a_remote_llama_server(env, keyed_llama, tmp_path):
    url, key = keyed_llama
    served = ServeProcess({**env, "DSPINE_API_KEY": key}, "--url", url, "--think", "off")
    try:
        for process in [psutil.Process(served.process.pid), *psutil.Process(served.process.pid).children(True)]:
            assert key not in " ".join(process.cmdline())
        listing = httpx2.get(served.url + "/models").json()
        assert listing["data"][0]["max_model_len"] == 2048  # the remote slot's window, not --ctx
        reply = httpx2.post(
            served.url + "/chat/completions",
            json={"model": "anything", "messages": CODE, "max_tokens": 24, "temperature": 0},
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["timings"]["draft_n"] > 0
        line = wait_for(lambda: next((x for x in served.lines if x.startswith("#1 done")), None), what="#1 done")
        assert "accept len -" not in line and "accept len" in line
        assert served.stop() == 0
    finally:
        served.process.kill()


def test_serve_in_front_of_vllm_names_its_model_and_shows_its_acceptance(env):
    with shaped_server(key="sk-v", per_request=True) as upstream:
        served = ServeProcess({**env, "DSPINE_API_KEY": "sk-v"}, "--url", upstream.url)
        try:
            listing = httpx2.get(served.url + "/models").json()
            assert listing["data"][0]["id"] == "Qwen/Qwen3-8B" and listing["data"][0]["max_model_len"] == 32768
            reply = httpx2.post(
                served.url + "/chat/completions", json={"model": "my-agent-model", "messages": CODE, "stream": True}
            )
            assert reply.status_code == 200 and "data: [DONE]" in reply.text
            assert upstream.bodies[-1]["model"] == "Qwen/Qwen3-8B"  # vLLM answers 404 to any other name
            line = wait_for(lambda: next((x for x in served.lines if x.startswith("#1 done")), None), what="#1")
            assert "accept 50% of 12" in line
            assert served.stop() == 0
        finally:
            served.process.kill()


def test_serve_remote_failures_say_what_and_exit_with_their_codes(dspine, tmp_path):
    nobody = dspine("serve", "--url", "http://127.0.0.1:9/v1")
    assert nobody.returncode == 5 and "nothing answers at http://127.0.0.1:9/v1" in nobody.stderr
    typed = dspine("serve", "--url", "http://127.0.0.1:9/v1", "--remote-api-key", "sk-typed")
    assert typed.returncode == 2 and "ps" in typed.stderr and "sk-typed" not in typed.stderr
    with shaped_server(key="sk-v") as upstream:
        refused = dspine("serve", "--url", upstream.url)
        assert refused.returncode == 4 and "needs an API key" in refused.stderr
        unknown = dspine("serve", "qwen3.8-27b", "--url", upstream.url, extra_env={"DSPINE_API_KEY": "sk-v"})
        assert unknown.returncode == 2 and "it serves: Qwen/Qwen3-8B" in unknown.stderr
        config = dspine(
            "serve", "--url", upstream.url, "--print-config", "opencode", extra_env={"DSPINE_API_KEY": "sk-v"}
        )
        assert config.returncode == 0 and "32768" in config.stdout
    for failed in (nobody, typed, refused, unknown):
        assert "Traceback" not in failed.stderr


def test_serve_in_front_of_vllm_without_per_request_figures_says_the_server_wide_ones(env):
    with shaped_server() as upstream:
        served = ServeProcess(env, "--url", upstream.url)
        try:
            for _ in range(2):
                reply = httpx2.post(served.url + "/chat/completions", json={"messages": CODE, "stream": True})
                assert reply.status_code == 200
            wait_for(lambda: any(x.startswith("#2 done") for x in served.lines), what="#2 done")
            assert served.stop() == 0
        finally:
            served.process.kill()
    # two replies of 4 steps of 3 drafts, 6 kept each
    assert any("server-wide since serve started" in x and "50% of 24 drafted" in x for x in served.errors)
