"""Speculation where the drafter cannot pay, with the break-even switch, against plain
decoding, in one run: the in-process engine on a generated 6-block target (width 512)
with a drafter as big as the target that agrees with it only now and then (noise), so
every drafting reply is slower than plain. The engines take turns reply by reply.

Prints tok/s of plain decoding, of speculation without the switch (`speculation = on`),
and of speculation with it (`auto`), over the replies after it switched off (goal: at
least 0.98 of plain) and over all replies (the switch-off and the tries included), and
the reply at which it switched off.

With `--engine server` the same runs go through dspine's patched llama-server (`--binary
PATH`, by default the one the tests build once per machine): plain is a server without a
drafter, `on` and `auto` servers with the slow drafter. There a switched-off mode sends
`speculative.n_max: 0`, and the patched server then does not feed the draft model either
(it catches up when drafting resumes), so after the switch-off `auto` should run as plain.

With `--drafts-nothing` (server) the drafter's floor is one nothing clears: every step pays
the drafter's pass and drafts nothing (a DSpine drafter below its floor did that), which
break-even must count as drafting and switch off.

    .venv/bin/python benchmarks/break_even.py [--replies 40] [--tokens 64] [--engine inproc|server] [--binary PATH]
        [--drafts-nothing]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.base import Engine  # noqa: E402
from backends.break_even import BreakEven  # noqa: E402
from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from tests.support.gguf_models import chat_model, write_model  # noqa: E402

MESSAGES = [{"role": "user", "content": "Write a function that adds two numbers."}]


def server(
    binary: str, target: Path, drafter: Path | None, policy: BreakEven | None, logs: Path, p_min: float = 0.0
) -> LlamaServerEngine:
    # No busy-waiting between passes: three servers share this machine's cores with others.
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    config = ServerConfig(
        model=str(target),
        draft_model=str(drafter) if drafter else None,
        drafter_kind="draft" if drafter else None,
        n_ctx=1024,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=4 if drafter else None,
        extra_args=("--poll", "0", "--poll-draft", "0") if drafter else ("--poll", "0"),
        # The generated drafter's near-flat logits never pass the draft kind's floor: 0 drafts;
        # 1.0 (--drafts-nothing) drafts nothing, yet every step still pays the drafter's pass.
        draft_p_min=p_min,
    )
    return LlamaServerEngine(config, binary=binary, log_dir=logs, break_even=policy).start()


def reply(engine: Engine, tokens: int) -> End:
    end = list(engine.stream(MESSAGES, think=False, sampling=Sampling(temperature=0, max_tokens=tokens)))[-1]
    assert isinstance(end, End), end
    return end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replies", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--engine", choices=["inproc", "server"], default="inproc")
    parser.add_argument("--binary", help="the patched llama-server (default: the tests' cached build)")
    parser.add_argument(
        "--no-pinned",
        action="store_true",
        help="leave out `speculation = on` (the slowest engine; saves most of the time)",
    )
    parser.add_argument(
        "--drafts-nothing",
        action="store_true",
        help="server: a drafter whose floor nothing clears (asked on every step, drafting nothing)",
    )
    args = parser.parse_args()
    if args.drafts_nothing and args.engine != "server":
        parser.error("--drafts-nothing needs --engine server (the floor is llama-server's)")
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    folder = Path(tempfile.mkdtemp(prefix="dspine-break-even-"))
    target = write_model(folder / "target.gguf", chat_model(n_layer=6, n_embd=512), silent_from=1)
    slow = write_model(folder / "slow.gguf", chat_model(n_layer=6, n_embd=512), noise=0.6)
    plain: Engine
    always: Engine | None
    judged: Engine
    if args.engine == "server":
        if args.binary:
            binary = args.binary
        else:
            from tests.support.patched_server import build_folder

            binary = str(build_folder() / "bin" / "llama-server")
        plain = server(binary, target, None, None, folder)
        floor = 1.0 if args.drafts_nothing else 0.0
        always = None if args.no_pinned else server(binary, target, slow, BreakEven("on"), folder, floor)
        judged = server(binary, target, slow, BreakEven(), folder, floor)
    else:
        plain = InprocEngine(str(target), n_ctx=1024).load()
        always = (
            None
            if args.no_pinned
            else InprocEngine(str(target), draft_path=str(slow), n_ctx=1024, n_max=4, break_even=BreakEven("on")).load()
        )
        judged = InprocEngine(str(target), draft_path=str(slow), n_ctx=1024, n_max=4, break_even=BreakEven()).load()
    rates: dict[str, list[float]] = {"plain": [], "on": [], "auto": []}
    spent: dict[str, list[tuple[int, float]]] = {"plain": [], "on": [], "auto": []}  # (tokens, seconds)
    drafted: list[bool] = []
    try:
        engines = [("plain", plain), ("auto", judged)] + ([("on", always)] if always is not None else [])
        for turn in range(args.replies):
            # who goes first alternates, so neither gains from the other's warm caches or a lull
            for name, engine in engines if turn % 2 == 0 else engines[::-1]:
                end = reply(engine, args.tokens)
                rates[name].append(end.stats.generated_tokens / end.stats.decode_s)
                spent[name].append((end.stats.generated_tokens, end.stats.decode_s))
                if name == "auto":  # a reply the drafter was asked for, whatever it drafted
                    drafted.append(end.stats.draft_asked or end.stats.drafted > 0)
    finally:
        for _, engine in engines:
            engine.close()
    off_at = next(i for i in range(len(drafted)) if not any(drafted[i : i + 4]))
    after = slice(off_at, None)
    plain_after = statistics.median(rates["plain"][after])
    print(f"{args.engine}: {args.replies} replies of {args.tokens} tokens each, greedy, k=4; medians in tok/s")
    pinned = f", speculation pinned on {statistics.median(rates['on']):.1f}" if rates["on"] else ""
    print(f"plain {statistics.median(rates['plain']):.1f}{pinned}")
    print(f"auto switched off after reply {off_at} (drafted at replies {[i + 1 for i, d in enumerate(drafted) if d]})")
    print(
        f"after the switch-off: auto {statistics.median(rates['auto'][after]):.1f} vs plain {plain_after:.1f}: "
        f"{statistics.median(rates['auto'][after]) / plain_after:.3f}"
    )
    # Reply by reply (the two ran seconds apart, under the same load): the steadier ratio.
    paired = [
        rates["auto"][i] / rates["plain"][i] for i in range(off_at, len(drafted)) if not drafted[i]
    ]  # the tries while off are drafting replies: left out here, counted in the totals below
    print(f"after the switch-off, paired reply by reply: median auto/plain {statistics.median(paired):.3f}")
    overall = {name: sum(t for t, _ in pairs) / sum(s for _, s in pairs) for name, pairs in spent.items() if pairs}
    pinned = f", pinned on/plain {overall['on'] / overall['plain']:.3f}" if "on" in overall else ""
    print(f"over all replies (tokens / seconds): auto/plain {overall['auto'] / overall['plain']:.3f}{pinned}")


if __name__ == "__main__":
    main()
