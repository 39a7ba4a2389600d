"""Speculation where the drafter cannot pay, with the break-even switch, against plain
decoding, in one run: the in-process engine on a generated 6-block target (width 512)
with a drafter as big as the target that agrees with it only now and then (noise), so
every drafting reply is slower than plain. The engines take turns reply by reply.

Prints tok/s of plain decoding, of speculation without the switch (`speculation = on`),
and of speculation with it (`auto`), over the replies after it switched off (goal: at
least 0.98 of plain) and over all replies (the switch-off and the tries included), and
the reply at which it switched off.

    .venv/bin/python benchmarks/break_even.py [--replies 40] [--tokens 64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.break_even import BreakEven  # noqa: E402
from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from tests.support.gguf_models import chat_model, write_model  # noqa: E402

MESSAGES = [{"role": "user", "content": "Write a function that adds two numbers."}]


def reply(engine: InprocEngine, tokens: int) -> End:
    end = list(engine.stream(MESSAGES, think=False, sampling=Sampling(temperature=0, max_tokens=tokens)))[-1]
    assert isinstance(end, End), end
    return end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replies", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dspine-break-even-"))
    target = write_model(folder / "target.gguf", chat_model(n_layer=6, n_embd=512), silent_from=1)
    slow = write_model(folder / "slow.gguf", chat_model(n_layer=6, n_embd=512), noise=0.6)
    plain = InprocEngine(str(target), n_ctx=1024).load()
    always = InprocEngine(str(target), draft_path=str(slow), n_ctx=1024, n_max=4, break_even=BreakEven("on")).load()
    switch = BreakEven()
    judged = InprocEngine(str(target), draft_path=str(slow), n_ctx=1024, n_max=4, break_even=switch).load()
    rates: dict[str, list[float]] = {"plain": [], "on": [], "auto": []}
    spent: dict[str, list[tuple[int, float]]] = {"plain": [], "on": [], "auto": []}  # (tokens, seconds)
    drafted: list[bool] = []
    try:
        for _ in range(args.replies):
            for name, engine in (("plain", plain), ("on", always), ("auto", judged)):
                end = reply(engine, args.tokens)
                rates[name].append(end.stats.generated_tokens / end.stats.decode_s)
                spent[name].append((end.stats.generated_tokens, end.stats.decode_s))
                if name == "auto":
                    drafted.append(end.stats.drafted > 0)
    finally:
        for engine in (plain, always, judged):
            engine.close()
    off_at = next(i for i in range(len(drafted)) if not any(drafted[i : i + 4]))
    after = slice(off_at, None)
    plain_after = statistics.median(rates["plain"][after])
    print(f"{args.replies} replies of {args.tokens} tokens each, greedy, k=4; medians in tok/s")
    print(f"plain {statistics.median(rates['plain']):.1f}, speculation pinned on {statistics.median(rates['on']):.1f}")
    print(f"auto switched off after reply {off_at} (drafted at replies {[i + 1 for i, d in enumerate(drafted) if d]})")
    print(
        f"after the switch-off: auto {statistics.median(rates['auto'][after]):.1f} vs plain {plain_after:.1f}: "
        f"{statistics.median(rates['auto'][after]) / plain_after:.3f}"
    )
    overall = {name: sum(t for t, _ in pairs) / sum(s for _, s in pairs) for name, pairs in spent.items()}
    print(
        f"over all replies (tokens / seconds): auto/plain {overall['auto'] / overall['plain']:.3f}, "
        f"pinned on/plain {overall['on'] / overall['plain']:.3f}"
    )


if __name__ == "__main__":
    main()
