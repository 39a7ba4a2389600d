"""A remote server's speculation counters, read every few seconds while `dspine serve` runs
in front of it: where its replies carry no figures of their own (vLLM without
--per-request-spec-decode-metrics), the readout shows the server-wide acceptance since
serve started, from /metrics (backends/spec_metrics). Read in a thread of its own so a
slow server never stalls the readout."""

from __future__ import annotations

import threading

from backends.remote_probe import Prober
from backends.spec_metrics import Counters

POLL_S = 2.0


def counters_line(counted: Counters) -> str | None:
    if not counted.drafts:
        return None
    per_step = 1 + counted.accepted / counted.drafts  # the kept drafts and the target's own token
    rate = counted.accepted / counted.draft_tokens if counted.draft_tokens else 0.0
    return (
        f"server-wide since serve started (its /metrics): accept len {per_step:.2f} on drafted steps, "
        f"{rate:.0%} of {counted.draft_tokens:,} drafted"
    )


class ServerCounters:
    def __init__(self, url: str, api_key: str | None, poll_s: float = POLL_S) -> None:
        self.prober = Prober(url, api_key)
        self.poll_s = poll_s
        self._start: Counters | None = None
        self._latest: Counters | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="remote-counters", daemon=True)

    def start(self) -> ServerCounters:
        self._start = self.prober.counters()
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            read = self.prober.counters()
            if read is not None:
                self._latest = read

    def line(self) -> str | None:
        if self._start is None or self._latest is None:
            return None
        return counters_line(self._latest.delta(self._start))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.poll_s + 11)
        self._latest = self.prober.counters() or self._latest
        self.prober.close()
