"""dspine's patched llama-server with a block drafter, its drafts logged (DSPINE_LOG_DRAFTS=1:
one `dspine-draft:` line per draft step with the drafted ids, one `dspine-accept:` per verify),
so tests can hold each draft against a reference, position by position."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

DRAFT_LINE = re.compile(
    r"dspine-draft: type=(\S+) seq=(\d+) pos0=(\d+) id_last=(-?\d+) n=(\d+) ids=\[([\d,]*)\] block_us=(\d+)"
)
ACCEPT_LINE = re.compile(r"dspine-accept: seq=(\d+) n_accepted=(\d+)")


@dataclass
class Step:
    spec_type: str
    seq: int
    pos0: int
    id_last: int
    drafted: list[int]
    accepted: int | None  # what the verify step kept of it (None: no verify logged after it)
    block_us: int  # the drafter's pass over the block (every sequence's, batched), microseconds


def by_request(steps: list[Step]) -> list[list[Step]]:
    """One request's steps after another's (one slot): a request starts where pos0 falls back."""
    runs: list[list[Step]] = []
    for step in steps:
        if not runs or step.pos0 <= runs[-1][-1].pos0:
            runs.append([])
        runs[-1].append(step)
    return runs


# SmolLM2's end-of-generation tokens as llama.cpp reads them: <|endoftext|> and <|im_end|>.
SMOLLM2_ENDS = frozenset({0, 2})


def through_end(draft: list[int], ends: frozenset[int] = SMOLLM2_ENDS) -> int:
    """How many of a reference's draft tokens the patched server drafts: up to the first end of
    the reply and with it (its drafting stops there: nothing after an end could be kept)."""
    return next((i + 1 for i, token in enumerate(draft) if token in ends), len(draft))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DraftLogServer:
    def __init__(
        self,
        binary: Path,
        target: Path,
        drafter: Path | None,
        log: Path,
        n_max: int = 15,
        spec_type: str | None = "draft-dspine",
        parallel: int = 1,
        n_ctx: int = 1024,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.port = _free_port()
        self.log = log
        args = [str(binary), "-m", str(target), "--host", "127.0.0.1", "--port", str(self.port)]
        # DSPINE_TEST_GPU_LAYERS: on a GPU build, the same tests with both models' layers there
        # (the code table stays in host memory, as dspine launches it by default).
        layers = os.environ.get("DSPINE_TEST_GPU_LAYERS", "0")
        args += ["-c", str(n_ctx * parallel), "-np", str(parallel), "-ngl", layers, "--no-warmup", "-t", "1"]
        if drafter is not None:
            args += ["-md", str(drafter), "-ngld", layers, "--spec-draft-n-max", str(n_max), "--spec-draft-p-min", "0"]
            if spec_type:
                args += ["--spec-type", spec_type]
        args += list(extra)
        env = {**os.environ, "DSPINE_LOG_DRAFTS": "1"}
        self._log_file = log.open("w")
        self.process = subprocess.Popen(args, stdout=self._log_file, stderr=subprocess.STDOUT, env=env)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while True:
            if self.process.poll() is not None:
                self._log_file.close()
                raise RuntimeError(f"llama-server exited ({self.process.returncode}): {log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"llama-server did not come up: {log.read_text()[-3000:]}")
            time.sleep(0.1)

    def complete(self, prompt: list[int], n_predict: int, **extra) -> list[int]:
        """Greedy: the generated token ids."""
        body = {"prompt": prompt, "n_predict": n_predict, "temperature": 0, "return_tokens": True}
        body |= {"cache_prompt": False} | extra
        request = urllib.request.Request(
            self.url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=300) as reply:
            return list(json.load(reply)["tokens"])

    def steps(self) -> list[Step]:
        """Every logged draft step so far, each with the verify outcome that followed it."""
        self._log_file.flush()
        steps: list[Step] = []
        pending: dict[int, Step] = {}
        for line in self.log.read_text(errors="replace").splitlines():
            if m := DRAFT_LINE.search(line):
                ids = [int(i) for i in m[6].split(",") if i]
                step = Step(m[1], int(m[2]), int(m[3]), int(m[4]), ids, None, int(m[7]))
                steps.append(step)
                pending[step.seq] = step
            elif (m := ACCEPT_LINE.search(line)) and int(m[1]) in pending:
                pending.pop(int(m[1])).accepted = int(m[2])
        return steps

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log_file.close()

    def __enter__(self) -> DraftLogServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
