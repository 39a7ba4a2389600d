"""How long a copy to draft, replayed: the real SmolLM2-135M Q8_0 samples plain replies (its
card's sampling, other seeds), then each rule for copies from the context (prompt lookup
alone) is replayed over the same texts and priced with the verify-pass costs timed here. A
modelled figure, not a timed one: it takes the run-to-run noise of sampled texts out (the
same texts for every rule), which a timed benchmark needs dozens of rounds for
(benchmarks/tune_defaults.py times what a user gets).

Exact speculative sampling keeps a point-mass draft token with the target's probability of
it, so replaying a plain sample's tokens against a copy prices what a copy would have kept on
average. Rules: `old` (a miss shrinks the next draft to one past what was kept, a whole copy
doubles it, up to 16), `weighed` (backends/copy_length.py, what the in-process engine runs),
`oracle` (drafts exactly as far as the copy will hold, where that pays: the bound for copies),
and llama-server's ngram-simple as dspine launches it alone on a CPU.

`--setting field=value[,...]` adds the weighed rule under other LookupSettings (as
benchmarks/copy_settings_ab.py takes them); `--simple N/M` adds ngram-simple at another match
and length; `--first-seed` samples another set of texts (seeds from there); `--greedy`
replays greedy texts instead, one a prompt, of edits and rewrites of files of 4 to 9 classes;
`--llama-server PATH` samples the texts on that llama-server (plain decoding, the same settings
and seeds) instead of in process, and tokenizes them back: what its copy rule (ngram-copy, the
weighed rule ported) can keep of its own texts.

    .venv/bin/python benchmarks/copy_length_replay.py [--seeds 12] [--tokens 160]
        [--setting resync_window=8] [--simple 4/8] [--first-seed 0] [--greedy] [--llama-server PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class NgramSimple:
    """llama-server's ngram-simple as dspine launches it alone (backends/drafters.NGRAM): the
    latest earlier occurrence of the context's last `match` tokens, the `length` after it
    drafted; nothing followed or learned between steps."""

    def __init__(self, tokens: list[int], match: int, length: int) -> None:
        self.tokens, self.match, self.length = list(tokens), match, length

    def extend(self, tokens) -> None:
        self.tokens += [int(t) for t in tokens]

    def observe(self, drafted: int, kept: int) -> None:
        pass

    def draft(self, room: int) -> list[int]:
        tokens, n = self.tokens, self.match
        if len(tokens) <= n + self.length + 1:
            return []
        pattern = tokens[-n:]
        for start in range(len(tokens) - n - 1, 0, -1):
            if tokens[start : start + n] == pattern:
                copy = tokens[start + n : start + n + min(self.length, room)]
                return copy if len(copy) >= n else []
        return []


def replay(prompt: list[int], reply: list[int], lookup, cost: Callable[[int], float]) -> float:
    """Plain decoding's time over the rule's, for this reply: each step drafts what the rule
    says, keeps the tokens that agree with the reply, and pays its pass."""
    spent, pos, n = 0.0, 0, len(reply)
    while pos < n - 1:
        lookup.extend([reply[pos]])
        copied = lookup.draft(min(16, n - 1 - pos))
        if copied:
            kept = 0
            while kept < len(copied) and pos + 1 + kept < n and copied[kept] == reply[pos + 1 + kept]:
                kept += 1
            spent += cost(len(copied) + 1)
            lookup.observe(len(copied), kept)
            lookup.extend(reply[pos + 1 : pos + 1 + kept])
            pos += kept + 1
        else:
            spent += cost(1)
            pos += 1
    return (n - 1) * cost(1) / spent if spent else 1.0


def server_texts(binary: str, target: Path, prompts: dict, sampling, seeds: range) -> dict[str, list[str]]:
    """Each prompt's plain replies sampled on llama-server, one a seed."""
    from backends.events import Delta
    from backends.llama_server import LlamaServerEngine, ServerConfig

    config = ServerConfig(model=str(target), n_ctx=4096, gpu_layers=0)
    engine = LlamaServerEngine(config, log_dir=Path(tempfile.mkdtemp()), binary=binary).start()
    try:
        return {
            name: [
                "".join(e.text for e in engine.stream(messages, False, sampling.with_(seed=s)) if isinstance(e, Delta))
                for s in seeds
            ]
            for name, messages in prompts.items()
        }
    finally:
        engine.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--setting", action="append", default=[], help="field=value[,field=value] (repeatable)")
    parser.add_argument("--simple", action="append", default=[], help="N/M: ngram-simple's match and length too")
    parser.add_argument("--first-seed", type=int, default=0, help="the first text's seed (another set of texts)")
    parser.add_argument("--greedy", action="store_true")
    parser.add_argument("--llama-server", default=None, help="sample the texts on this llama-server")
    args = parser.parse_args()
    simple = [tuple(int(x) for x in text.split("/")) for text in args.simple]

    from benchmarks.copy_settings_ab import parse_setting

    variants = {text: parse_setting(text) for text in args.setting}

    from app.models.catalog import load_catalog
    from backends.copy_length import PassCosts
    from backends.drafters import NGRAM
    from backends.inproc import COPY_TIMED_LENGTHS, InprocEngine
    from backends.prompt_lookup import LookupSettings, PromptLookup
    from tests.support.copy_prompts import NEW_TEXT, bench_edits, edit, kind_of, other_files, rewrite
    from tests.support.real_models import smollm2_pair

    pair = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    card = load_catalog().find("smollm2-135m").sampling
    assert card is not None
    sampling = card.for_mode(False).with_(max_tokens=args.tokens)
    prompts = {"edit turn": edit(), "rewrite": rewrite(), "poem": NEW_TEXT}
    prompts |= bench_edits()
    for category in ("code", "prose", "math", "agent"):
        prompts[category] = json.loads((ROOT / f"assets/prompts/{category}.jsonl").read_text().splitlines()[0])[
            "messages"
        ]
    if args.greedy:
        # One greedy text a prompt: each of these files is a prompt of its own.
        sampling, args.seeds = sampling.with_(temperature=0.0), 1
        prompts = other_files()

    seeds = range(args.first_seed, args.first_seed + args.seeds)
    served = server_texts(args.llama_server, pair["target"], prompts, sampling, seeds) if args.llama_server else {}
    engine = InprocEngine(str(pair["target"]), n_ctx=4096).load()
    try:
        timed = engine._time_passes([*COPY_TIMED_LENGTHS, 17], rounds=3, depth=400)
        costs = PassCosts(timed)
        print("pass costs here (ms, 400 tokens in):", {n: round(s * 1000, 1) for n, s in sorted(timed.items())})
        target = engine._target
        assert target is not None
        texts = {}
        for name, messages in prompts.items():
            tokens = engine.prompt_tokens(messages, think=False)
            if served:
                texts[name] = [(tokens, target.tokenize(text)) for text in served[name]]
                continue
            texts[name] = [
                (tokens, [t for step in engine.generate_tokens(tokens, sampling.with_(seed=seed)) for t in step])
                for seed in seeds
            ]
        # Which tokens are numbers, asked while the model is open (its vocabulary goes with it).
        seen = {t for replies in texts.values() for prompt, reply in replies for t in (*prompt, *reply)}
        number = {t for t in seen if target.is_number(t)}.__contains__
    finally:
        engine.close()

    class Oracle(PromptLookup):
        future: list[int] = []

        def draft(self, room: int, longer_than: int = 0) -> list[int]:
            if self._follow is None or self._run < self.settings.ngram_min:
                return []
            found = self.tokens[self._follow : self._follow + min(room, self.settings.n_max)]
            at, holds = len(self.tokens), 0
            while holds < len(found) and at + holds < len(self.future) and found[holds] == self.future[at + holds]:
                holds += 1
            best = max(range(holds + 1), key=lambda d: (d + 1) / costs(d + 1))
            return found[:best]

    cpu = NGRAM.on_device(gpu=False)  # as dspine launches it on a CPU, where these costs were timed
    # Replayed, nothing is timed: the costs stay as timed above (no pass corrects them).
    rules = {
        "old": lambda prompt: PromptLookup(LookupSettings(), prompt),
        "weighed": lambda prompt: PromptLookup(LookupSettings(), prompt, costs, number),
        **{
            f"weighed {text}": (lambda prompt, lookup=lookup: PromptLookup(lookup, prompt, costs, number))
            for text, lookup in variants.items()
        },
        f"llama-server's ngram-simple {cpu.alone_match}/{cpu.alone_length}": lambda prompt: NgramSimple(
            prompt, cpu.alone_match, cpu.alone_length
        ),
        **{f"ngram-simple {n}/{m}": (lambda prompt, n=n, m=m: NgramSimple(prompt, n, m)) for n, m in simple},
        "oracle": lambda prompt: Oracle(LookupSettings(), prompt),
    }
    print(
        f"\n{args.seeds} {'greedy' if args.greedy else 'sampled'} replies a prompt, {args.tokens} tokens:"
        " plain's time over the rule's, median (min-max)"
    )
    print(f"{'prompt':16}" + "".join(f"{rule[:30]:>32}" for rule in rules))
    groups: dict[str, list] = {}
    for name, replies in texts.items():
        # Greedy: one text a file, so the files of a kind are summed up together.
        groups.setdefault(kind_of(name) if args.greedy else name, []).extend(replies)
    for name, replies in groups.items():
        cells = []
        for make in rules.values():
            ratios = []
            for prompt, reply in replies:
                Oracle.future = prompt + reply
                ratios.append(replay(prompt, reply, make(prompt), costs))
            spread = f"({min(ratios):.2f}-{max(ratios):.2f})"
            cells.append(f"{statistics.median(ratios):.2f}x {spread} mean {statistics.mean(ratios):.2f}")
        print(f"{name:16}" + "".join(f"{cell:>32}" for cell in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
