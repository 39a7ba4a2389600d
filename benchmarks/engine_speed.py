"""Engine speed, as ratios measured side by side in one run, on a generated
pair where compute dominates: a target of about 100M parameters (10 blocks of
width 1024) and a drafter ten times smaller (its first block). The target's
other blocks write nothing back to the residual stream, so the drafter
predicts it; noise on the drafter sets the acceptance rate.

1. client overhead: tokens/s through LlamaServerEngine vs the same request
   sent raw to the same llama-server (goal: under 1% apart);
2. the in-process speculative loop vs llama-server's own (goal: within 10%);
3. in-process speculative vs plain, against what the measured acceptance and
   the measured draft and verify costs predict (goal: at least 90%).

    .venv/bin/python benchmarks/engine_speed.py [--tokens 256] [--noise 0.5]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from backends.stats import Stats  # noqa: E402
from tests.support.gguf_models import chat_model, write_model  # noqa: E402

MESSAGES = [{"role": "user", "content": "Write a function that adds two numbers."}]


def make_pair(folder: Path, noise: float) -> tuple[Path, Path]:
    target_shape = chat_model(n_layer=10, n_embd=1024)
    drafter_shape = chat_model(n_layer=1, n_embd=1024)
    target = write_model(folder / "target.gguf", target_shape, silent_from=1)
    drafter = write_model(folder / "drafter.gguf", drafter_shape, noise=noise)
    return target, drafter


def engine_rate(engine, sampling: Sampling) -> tuple[float, Stats]:
    started = time.perf_counter()
    end = [e for e in engine.stream(MESSAGES, think=False, sampling=sampling) if isinstance(e, End)][-1]
    return end.stats.generated_tokens / (time.perf_counter() - started), end.stats


def raw_rate(engine: LlamaServerEngine, sampling: Sampling) -> float:
    running = engine._running
    body = {
        "messages": MESSAGES,
        "stream": True,
        "temperature": sampling.temperature,
        "max_tokens": sampling.max_tokens,
        "chat_template_kwargs": {"enable_thinking": False},
        "top_k": sampling.top_k,
        "top_p": sampling.top_p,
        "min_p": sampling.min_p,
        "presence_penalty": sampling.presence_penalty,
        "timings_per_token": True,
    }
    connection = http.client.HTTPConnection("127.0.0.1", running.port)
    started = time.perf_counter()
    connection.request(
        "POST",
        "/v1/chat/completions",
        json.dumps(body),
        {"Authorization": f"Bearer {running.api_key}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    tokens = 0
    for line in response:
        if line.startswith(b"data: [DONE]"):
            break
        if b'"timings"' in line:
            tokens = json.loads(line[5:])["timings"]["predicted_n"]
    elapsed = time.perf_counter() - started
    connection.close()
    return tokens / elapsed


def median_of(runs: int, measure) -> float:
    return statistics.median(measure() for _ in range(runs))


def decode_cost(engine: InprocEngine, model_attr: str, batch: int, repeats: int = 20) -> float:
    """Seconds for one decode of `batch` tokens on a warm context."""
    model = getattr(engine, model_attr)
    prompt = engine.prompt_tokens(MESSAGES, think=False)
    times = []
    for _ in range(repeats):
        model.reset()
        model.decode(prompt, all_logits=False)
        started = time.perf_counter()
        model.decode(prompt[:batch], all_logits=batch > 1)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--noise", type=float, default=0.15)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    folder = Path(tempfile.mkdtemp(prefix="dspine-engine-speed-"))
    target, drafter = make_pair(folder, args.noise)
    greedy = Sampling(temperature=0, top_k=20, top_p=1.0, max_tokens=args.tokens)
    print(
        f"target {target.stat().st_size / 2**20:.0f} MiB, drafter {drafter.stat().st_size / 2**20:.0f} MiB (F16), "
        f"{args.tokens} tokens, greedy, k={args.k}, median of {args.runs}"
    )

    plain_server = LlamaServerEngine(ServerConfig(str(target), n_ctx=2048, gpu_layers=0), log_dir=folder).start()
    try:
        engine_rate(plain_server, greedy)  # warm up
        through_runs, raw_runs = [], []
        for _ in range(args.runs):  # interleaved, so drift on a busy machine hits both alike
            through_runs.append(engine_rate(plain_server, greedy)[0])
            raw_runs.append(raw_rate(plain_server, greedy))
        through, raw = statistics.median(through_runs), statistics.median(raw_runs)
    finally:
        plain_server.close()
    print(f"1. client overhead: engine {through:.1f} tok/s, raw {raw:.1f} tok/s, ratio {through / raw:.3f}")

    spec_server = LlamaServerEngine(
        ServerConfig(
            str(target),
            draft_model=str(drafter),
            drafter_kind="draft",
            n_ctx=2048,
            gpu_layers=0,
            draft_gpu_layers=0,
            n_max=args.k,
            draft_p_min=0.0,  # the generated drafter's near-flat logits never pass the draft kind's floor
        ),
        log_dir=folder,
    ).start()
    try:
        engine_rate(spec_server, greedy)
        server_spec, server_stats = engine_rate(spec_server, greedy)
        server_spec = median_of(args.runs, lambda: engine_rate(spec_server, greedy)[0])
    finally:
        spec_server.close()
    spec = InprocEngine(str(target), draft_path=str(drafter), n_ctx=2048, n_max=args.k).load()
    plain = InprocEngine(str(target), n_ctx=2048).load()
    try:
        engine_rate(spec, greedy)
        inproc_spec, stats = engine_rate(spec, greedy)
        inproc_spec = median_of(args.runs, lambda: engine_rate(spec, greedy)[0])
        inproc_plain = median_of(args.runs, lambda: engine_rate(plain, greedy)[0])
        t_draft = decode_cost(spec, "_drafter", 1)
        t_verify = decode_cost(spec, "_target", args.k + 1)
        t_target = decode_cost(spec, "_target", 1)
    finally:
        spec.close()
        plain.close()
    print(
        f"2. speculative loop: in-process {inproc_spec:.1f} tok/s, llama-server {server_spec:.1f} tok/s, "
        f"ratio {inproc_spec / server_spec:.3f} (acceptance in-process {stats.acceptance_rate:.0%}, "
        f"server {server_stats.acceptance_rate or 0:.0%})"
    )
    # Per verify step the loop spends its measured draft time and verify time (both read
    # inside the run, at the context lengths it really had); each step yields
    # acceptance_length tokens. What the loop spends beyond that is its own overhead.
    step_s = (stats.draft_s + stats.verify_s) / stats.verify_steps
    predicted = stats.acceptance_length / step_s
    print(
        f"3. in-process speculative {inproc_spec:.1f} tok/s vs plain {inproc_plain:.1f} tok/s "
        f"(speedup {inproc_spec / inproc_plain:.2f}x); predicted {predicted:.1f} tok/s from acceptance length "
        f"{stats.acceptance_length:.2f}, draft {stats.draft_s / stats.drafted * 1000:.2f} ms/token, verify "
        f"{stats.verify_s / stats.verify_steps * 1000:.2f} ms per {args.k + 1} (single-token target decode "
        f"{t_target * 1000:.2f} ms, {args.k + 1}-token batch {t_verify * 1000:.2f} ms, drafter {t_draft * 1000:.2f} ms "
        f"on a short context): {inproc_spec / predicted:.0%} of the prediction"
    )


if __name__ == "__main__":
    main()
