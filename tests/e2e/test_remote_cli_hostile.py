"""The CLI in front of a hostile or broken remote (issue 50's hostile trial): a served name
with escapes and markup is text in run's error, bench's table and serve's lines; plain http
to another machine is warned about before the key goes out; serve names its own key option
and wraps a plain-text upstream error; `chat -p --output-format json` prints its result
object even when the first contact fails."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest

from tests.support.remote_servers import shaped_server
from tests.support.serve_harness import ServeProcess

HOSTILE = "\x1b]0;PWNED\x07[bold red]M[/]"
PROMPTS = '{"category": "code", "messages": [{"role": "user", "content": "hi"}]}\n'


def test_a_hostile_served_name_is_text_in_errors_and_tables(dspine, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(PROMPTS)
    with shaped_server(kind="generic", model_id=HOSTILE) as upstream:
        wrong = dspine("run", "hi", "--url", upstream.url, "--model", "other")
        bench = dspine("bench", "--url", upstream.url, "--prompts", str(prompts), "--repeat", "1", "-n", "4",
                       extra_env={"COLUMNS": "250"})  # fmt: skip
    assert wrong.returncode == 2 and "[bold red]M[/]" in wrong.stderr and "\x1b" not in wrong.stderr
    assert bench.returncode == 0, bench.stderr
    assert "[bold red]M[/]" in bench.stdout and "\x1b]0;" not in bench.stdout


def test_serve_keeps_hostile_names_as_text_and_wraps_a_plain_text_error(env):
    with shaped_server(kind="generic", model_id=HOSTILE, chat_404_text=True) as upstream:
        served = ServeProcess(env, "--url", upstream.url)
        try:
            serving = next(line for line in served.lines if line.startswith("serving"))
            assert "[bold red]M[/]" in serving and "\x1b" not in serving
            reply = httpx2.post(served.url + "/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
            assert reply.status_code == 404
            error = reply.json()["error"]
            assert "answered 404: no such route" in error["message"] and error["type"] == "not_found_error"
            assert served.stop() == 0
        finally:
            served.process.kill()


def test_serve_names_its_own_key_option(dspine):
    typed = dspine("serve", "--url", "http://127.0.0.1:9/v1", "--remote-api-key", "sk-typed")
    assert typed.returncode == 2 and "--remote-api-key takes @FILE" in typed.stderr
    with shaped_server(key="sk-v") as upstream:
        missing = dspine("serve", "--url", upstream.url)
    assert missing.returncode == 4 and "--remote-api-key @FILE" in missing.stderr


def _outside_address() -> str | None:
    """This machine's own address on a network (not loopback), if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: it only picks the route
            address = probe.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


def test_plain_http_to_another_machine_is_warned_about_before_the_key_goes_out(dspine):
    address = _outside_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization") or "")
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer((address, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://{address}:{server.server_address[1]}/v1"
        done = dspine("run", "hi", "--url", url, extra_env={"DSPINE_API_KEY": "sk-plain"})
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 14 and seen  # the server was reached, with the key
    assert done.stderr.index("unencrypted") < done.stderr.index("error:")  # said before it went out


def test_headless_json_prints_its_result_when_the_first_contact_fails(dspine, tmp_path):
    with shaped_server(key="sk-v") as upstream:
        done = dspine(
            "chat", "--url", upstream.url, "-p", "hi", "--output-format", "json",
            extra_env={"DSPINE_API_KEY": "sk-wrong"},
        )  # fmt: skip
    assert done.returncode == 4
    result = json.loads(done.stdout)
    assert result["is_error"] and result["exit_code"] == 4 and "refused the API key" in result["error"]["message"]


def test_headless_on_a_remote_names_the_served_model(dspine):
    with shaped_server(kind="generic") as upstream:
        done = dspine("chat", "--url", upstream.url, "-p", "hi", "--output-format", "json", "--no-tools")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model"] == "Qwen/Qwen3-8B"  # not the URL


def test_a_malformed_url_is_a_usage_error_everywhere(dspine):
    for args in (("run", "hi", "--url", "http://[::1/v1"), ("doctor", "--url", "ftp://box/v1")):
        done = dspine(*args)
        assert done.returncode in (1, 2) and "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert dspine("run", "hi", "--url", "http://[::1/v1").returncode == 2


def test_serve_asks_sglang_for_each_replys_figures(env):
    with shaped_server(kind="sglang") as upstream:
        served = ServeProcess(env, "--url", upstream.url)
        try:
            body = {"messages": [{"role": "user", "content": "x"}], "stream": True}
            reply = httpx2.post(served.url + "/chat/completions", json=body)
            assert reply.status_code == 200
            assert upstream.bodies[-1]["return_spec_tokens_details"] is True
            line = next(x for x in _wait_lines(served, "#1 done"))
            assert "accept 56% of 9" in line
            assert served.stop() == 0
        finally:
            served.process.kill()


def _wait_lines(served, prefix: str):
    from tests.conftest import wait_for

    wait_for(lambda: any(x.startswith(prefix) for x in served.lines), what=prefix)
    return [x for x in served.lines if x.startswith(prefix)]
