"""`dspine bench`: plain decoding and each drafter on the same prompts, same
seed, same output length; a report per category, think mode, drafter and
draft length. Aggregation is pure; running is a loop over engines."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends.events import End, Error
from backends.sampling import SamplingPresets, preset
from backends.stats import Stats

from ..errors import UsageError
from ..models.catalog import builtin_catalog_path

PLAIN = "plain"
NGRAM_LABEL = "n-gram"  # the setup of copies from the context alone, no drafter


@dataclass(frozen=True)
class Prompt:
    category: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None  # an agent session's tools, so its tool turns replay as they ran


def builtin_prompt_files() -> list[Path]:
    return sorted((builtin_catalog_path().parent / "prompts").glob("*.jsonl"))


def load_prompts(paths: Iterable[Path]) -> list[Prompt]:
    """One chat a line, OpenAI messages format: {"messages": [...], "category": "..."};
    the category defaults to the file's name."""
    prompts = []
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UsageError(f"cannot read prompts {path}: {exc.strerror}", "check the path") from exc
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                messages = record["messages"] if isinstance(record, dict) else record
                assert isinstance(messages, list) and all("role" in m and "content" in m for m in messages)
            except (ValueError, KeyError, AssertionError, TypeError):
                raise UsageError(
                    f"{path}:{number} is not a chat",
                    'write one JSON object a line: {"messages": [{"role": "user", "content": "..."}]}',
                ) from None
            if isinstance(record, dict):
                prompts.append(Prompt(str(record.get("category", path.stem)), messages, record.get("tools")))
            else:
                prompts.append(Prompt(path.stem, messages))
    if not prompts:
        raise UsageError("no prompts to run", "give --prompts FILE.jsonl with one chat a line")
    return prompts


@dataclass(frozen=True)
class Setup:
    drafter: str  # PLAIN, a variant or a file name
    n_max: int | None  # None for plain, and for adaptive
    adaptive: bool = False  # the engine picks the length per think mode from what it measured


@dataclass
class Run:
    category: str
    think: bool
    setup: Setup
    stats: Stats
    depth: int = 0  # tokens of context before the prompt (`--depth`)
    round: int = 0  # which pass over the setups (each runs every prompt once a round)
    prompt: int = 0  # the prompt's place in the list: a setup's run pairs with plain's of the same round


@dataclass
class Row:
    category: str
    think: bool
    drafter: str
    n_max: int | None
    tokens_per_s: dict[str, float]  # mean, median, min, max over the runs
    speedup: float | None  # median tok/s over plain's median, same category, mode and depth
    acceptance_length: float | None
    acceptance_rate: float | None
    ttft_s: float | None
    counts: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    adaptive: bool = False
    draft_lengths: list[int] = field(default_factory=list)  # lengths adaptive drafted at, run by run
    depth: int = 0
    # The spread of the speedup: each run over plain's run of the same prompt and round (the
    # two ran back to back, so load hit both alike); None with fewer than two pairs.
    speedup_range: tuple[float, float] | None = None

    @property
    def drafted_nothing(self) -> bool:
        """A drafter's row whose drafter never drafted: its "speedup" is no drafting's cost."""
        return self.drafter != PLAIN and self.counts.get("drafted", 0) == 0

    @property
    def length_label(self) -> str:
        if not self.adaptive:
            return str(self.n_max or "-")
        used = sorted(set(self.draft_lengths))
        if not used:
            return "auto"
        return f"auto {used[0]}" if len(used) == 1 else f"auto {used[0]}-{used[-1]}"

    def to_json(self) -> dict:
        return {
            "category": self.category,
            "think": self.think,
            "drafter": self.drafter,
            "n_max": self.n_max,
            "tokens_per_s": self.tokens_per_s,
            "speedup": self.speedup,
            "acceptance_length": self.acceptance_length,
            "acceptance_rate": self.acceptance_rate,
            "ttft_s": self.ttft_s,
            "counts": self.counts,
            "runs": self.runs,
            "adaptive": self.adaptive,
            "draft_lengths": self.draft_lengths,
            "depth": self.depth,
            "speedup_range": list(self.speedup_range) if self.speedup_range else None,
            "drafted_nothing": self.drafted_nothing,
        }


def summarize(runs: list[Run]) -> list[Row]:
    """Rows from raw runs: rates averaged per run, acceptance from summed counts."""
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        key = (run.category, run.think, run.setup.drafter, run.setup.n_max, run.setup.adaptive, run.depth)
        groups.setdefault(key, []).append(run)
    rows = []
    for (category, think, drafter, n_max, adaptive, depth), members in groups.items():
        rates = [r.stats.tokens_per_s for r in members if r.stats.tokens_per_s]
        generated = sum(r.stats.generated_tokens for r in members)
        steps = sum(r.stats.verify_steps for r in members)
        drafted = sum(r.stats.drafted for r in members)
        accepted = sum(r.stats.accepted for r in members)
        ttfts = [r.stats.ttft_s for r in members if r.stats.ttft_s is not None]
        rows.append(
            Row(
                category=category,
                think=think,
                drafter=drafter,
                n_max=n_max,
                tokens_per_s=(
                    {
                        "mean": statistics.fmean(rates),
                        "median": statistics.median(rates),
                        "min": min(rates),
                        "max": max(rates),
                    }
                    if rates
                    else {}
                ),
                speedup=None,
                acceptance_length=generated / steps if steps and drafted else None,
                acceptance_rate=accepted / drafted if drafted else None,
                ttft_s=statistics.fmean(ttfts) if ttfts else None,
                counts={"generated": generated, "verify_steps": steps, "drafted": drafted, "accepted": accepted},
                runs=len(members),
                adaptive=adaptive,
                draft_lengths=[len(r.stats.position_tested) for r in members] if adaptive else [],
                depth=depth,
            )
        )
    plain = {(r.category, r.think, r.depth): r for r in rows if r.drafter == PLAIN}
    plain_runs = {(r.category, r.think, r.depth, r.round, r.prompt): r for r in runs if r.setup.drafter == PLAIN}
    for row in rows:
        base = plain.get((row.category, row.think, row.depth))
        if base and base.tokens_per_s and row.tokens_per_s:
            row.speedup = row.tokens_per_s["median"] / base.tokens_per_s["median"]
        key = (row.category, row.think, row.drafter, row.n_max, row.adaptive, row.depth)
        ratios = []
        for member in groups.get(key, []):
            pair = plain_runs.get((member.category, member.think, member.depth, member.round, member.prompt))
            if pair is not None and member.stats.tokens_per_s and pair.stats.tokens_per_s:
                ratios.append(member.stats.tokens_per_s / pair.stats.tokens_per_s)
        if len(ratios) > 1:
            row.speedup_range = (min(ratios), max(ratios))
    rows.sort(key=lambda r: (r.category, r.depth, not r.think, r.drafter != PLAIN, r.drafter, r.adaptive, r.n_max or 0))
    return rows


CPU_MAX_TOKENS = 64  # without a GPU a full run takes many minutes: a short default, one prompt a category


def short_set(prompts: list[Prompt]) -> list[Prompt]:
    """The first prompt of each category: the short bench a CPU runs by default."""
    seen: dict[str, Prompt] = {}
    for prompt in prompts:
        seen.setdefault(prompt.category, prompt)
    return list(seen.values())


def rotated(every: list[Prompt], chosen: list[Prompt], rounds: int) -> list[list[Prompt]]:
    """For each round, another prompt of each chosen prompt's category (the first, the second,
    ... round by round): llama-server's n-gram drafter remembers the replies of earlier
    requests, and a greedy prompt asked again drafts whole, a speedup nobody gets."""
    by_category: dict[str, list[Prompt]] = {}
    for prompt in every:
        by_category.setdefault(prompt.category, []).append(prompt)
    return [[by_category[p.category][r % len(by_category[p.category])] for p in chosen] for r in range(rounds)]


def row_label(setup: Setup, category: str, think: bool) -> str:
    """The row a run belongs to, for progress: 'q4_1 n_max 4, code, think off'."""
    length = " adaptive" if setup.adaptive else (f" n_max {setup.n_max}" if setup.n_max else "")
    return f"{setup.drafter}{length}, {category}, think {'on' if think else 'off'}"


def remembers_replies(engine: str, ngram: bool, alone: bool = False) -> bool:
    """Whether an engine can answer a repeated prompt from memory: llama-server's n-gram
    drafter chained before a model drafter (`ngram`: n-gram drafts with a drafter; ngram-mod)
    keeps earlier replies across requests, so a greedy prompt asked again drafts whole and shows
    a speedup nobody gets. Alone (`alone`: an n-gram row) it runs ngram-simple or ngram-copy on dspine's
    server, but ngram-mod on an upstream one: counted as remembering, which costs only fresh
    engines each round. In process copies come from the request's own context."""
    return engine == "server" and (ngram or alone)


def run_bench(
    open_engine: Callable[[Setup], Any],
    setups: list[Setup],
    prompts: list[Prompt],
    thinks: list[bool],
    repeat: int,
    max_tokens: int,
    seed: int = 0,
    on_run: Callable[[Run], None] | None = None,
    depths: dict[int, Callable[[list[dict]], list[dict]]] | None = None,
    on_start: Callable[[Setup, str, bool], None] | None = None,
    max_open: int | None = None,
    tokens_for: Callable[[Prompt], int] | None = None,
    round_prompts: list[list[Prompt]] | None = None,
    fresh_rounds: bool = False,
    presets: SamplingPresets | None = None,
) -> list[Run]:
    """Every setup on every prompt, mode, depth, `repeat` rounds. Ctrl-C stops it; what ran is
    returned. `depths`: each depth with what puts that much context before a prompt.
    `fresh_rounds`: every engine closed at the end of a round, so none answers a prompt it saw
    in an earlier one (see `remembers_replies`). `presets`: the model's sampling per think mode
    (None: Qwen3.8's card), what the chat would sample with.

    The setups take turns, so a load spike or a slow minute on this machine hits them alike:
    with every engine open at once (`max_open` None: small models, a CPU) each prompt runs on
    every setup back to back; with room for fewer (`max_open`, a 27B on one GPU) each round
    runs the setups one after another, in the opposite order the next round. Never all of
    plain first and each drafter after, which turned one slow minute into a "speedup"."""
    # One piece: its parameters and their docstring; the body is under 40 lines.
    at_depths = depths or {0: lambda messages: messages}
    runs: list[Run] = []
    engines = _OpenEngines(open_engine, max_open)

    def one(setup: Setup, think: bool, depth: int, index: int, round_: int) -> None:
        # `round_prompts`: other prompts each round (as many), so no engine sees a prompt twice:
        # llama-server's n-gram drafter remembers replies across requests and would draft a
        # repeated greedy reply whole.
        prompt = round_prompts[round_ % len(round_prompts)][index] if round_prompts else prompts[index]
        # `tokens_for`: a prompt's own length (tune: an edit must run long enough to reach its copy)
        # Each round its own seed: under sampling a round's replies are other texts, so a
        # speedup does not rest on one text a prompt (one that happens to copy, or not).
        sampling = preset(think, presets).with_(
            seed=seed + round_, max_tokens=tokens_for(prompt) if tokens_for else max_tokens
        )
        engine = engines.get(setup)
        if on_start:
            on_start(setup, prompt.category, think)
        end = _measured(engine, setup, at_depths[depth](prompt.messages), think, sampling, prompt.tools)
        if end is not None:
            run = Run(prompt.category, think, setup, end.stats, depth, round_, index)
            runs.append(run)
            if on_run:
                on_run(run)

    interleave = max_open is None or max_open >= len(setups)
    try:
        for round_ in range(repeat):
            if fresh_rounds:
                engines.close_all()
            for setup, think, depth, index in _turns(setups, thinks, list(at_depths), len(prompts), round_, interleave):
                one(setup, think, depth, index, round_)
    except KeyboardInterrupt:
        pass
    finally:
        engines.close_all()
    return runs


class _OpenEngines:
    """The setups' engines, opened on first use; at most `max_open` at once (the oldest used
    closed first; None: no limit)."""

    def __init__(self, open_engine: Callable[[Setup], Any], max_open: int | None) -> None:
        self.open_engine = open_engine
        self.max_open = max_open
        self.engines: dict[Setup, Any] = {}  # oldest used first

    def get(self, setup: Setup) -> Any:
        engines = self.engines
        if setup in engines:
            engines[setup] = engines.pop(setup)  # the newest now
            return engines[setup]
        while self.max_open is not None and engines and len(engines) >= self.max_open:
            engines.pop(next(iter(engines))).close()
        engines[setup] = self.open_engine(setup)
        return engines[setup]

    def close_all(self) -> None:
        while self.engines:
            self.engines.pop(next(iter(self.engines))).close()


def _turns(setups: list[Setup], thinks: list[bool], depths: list[int], count: int, round_: int, interleave: bool):
    """One round's runs in order: (setup, think, depth, prompt index). Interleaved, each prompt
    runs on every setup back to back; else each setup runs all of them in turn. Every other
    round the setups go in the opposite order."""
    order = setups if round_ % 2 == 0 else list(reversed(setups))
    if interleave:
        for think in thinks:
            for depth in depths:
                for index in range(count):
                    for setup in order:
                        yield setup, think, depth, index
    else:
        for setup in order:
            for think in thinks:
                for depth in depths:
                    for index in range(count):
                        yield setup, think, depth, index


def _measured(engine: Any, setup: Setup, messages: list[dict], think: bool, sampling, tools) -> End | None:
    """One reply streamed to its end (its End, with the figures); an engine error stops the bench."""
    end = None
    for event in engine.stream(messages, think=think, sampling=sampling, n_max=setup.n_max, tools=tools):
        if isinstance(event, End):
            end = event
        elif isinstance(event, Error):
            raise UsageError(f"{setup.drafter}: {event.message}", event.fix)
    return end


def verdict(rows: list[Row]) -> str:
    """One line: which setup pays here, by how much, and how sure (the spread of its speedup
    over the categories measured); or that none does."""
    by_setup: dict[tuple, list[Row]] = {}
    for row in rows:
        if row.drafter != PLAIN and row.speedup is not None:
            by_setup.setdefault((row.drafter, row.n_max, row.adaptive), []).append(row)
    if not by_setup:
        return "verdict: nothing to compare with plain decoding"

    def label(rows_: list[Row]) -> str:
        row = rows_[0]
        length = f"adaptive ({row.length_label})" if row.adaptive else (f"at n_max {row.n_max}" if row.n_max else "")
        return f"{row.drafter} {length}".strip()

    scored = []
    for members in by_setup.values():
        speedups = [r.speedup for r in members if r.speedup is not None]
        scored.append((statistics.median(speedups), min(speedups), max(speedups), members))
    # A setup that drafted nothing did plain decoding's work: its "speedup" is how much the
    # machine's load moved between runs, never a reason to pick it (nor a figure to show).
    idle = [item for item in scored if all(r.drafted_nothing for r in item[3])]
    drafting = [item for item in scored if item not in idle]
    noise = _noise_note(idle)
    if not drafting:
        names = ", ".join(label(item[3]) for item in idle)
        return f"verdict: plain decoding; {names} drafted nothing here{noise}"
    best, low, high, members = max(drafting, key=lambda item: item[0])
    samples = min(r.runs for r in members)
    spread = f"{low:.2f}-{high:.2f}x over {len(members)} row{'s' if len(members) != 1 else ''}"
    if low > 1.0 and samples >= 3:
        return f"verdict: {label(members)} pays here: {best:.2f}x plain ({spread}, {samples} samples a row){noise}"
    if high < 1.0:
        return f"verdict: plain decoding; no drafter setup beat it (best {label(members)} {best:.2f}x, {spread}){noise}"
    sure = "" if samples >= 3 else f"; only {samples} sample{'s' if samples != 1 else ''} a row: --repeat 3 says more"
    return f"verdict: too close to call: {label(members)} {best:.2f}x plain ({spread}){sure}{noise}"


def _noise_note(idle: list[tuple[float, float, float, list[Row]]]) -> str:
    """Where a setup that drafted nothing (plain decoding's work) still ran well off plain's
    speed, the timings were noisy (another program busy): said, so no figure is taken as read."""
    if not idle:
        return ""
    low = min(item[1] for item in idle)
    high = max(item[2] for item in idle)
    if low >= 0.85 and high <= 1.15:
        return ""
    return (
        f"; timings were noisy: a setup that drafted nothing ran {low:.2f}-{high:.2f}x plain"
        " (something else busy? run again on a quiet machine)"
    )


COLUMNS = (
    "category",
    "depth",
    "think",
    "drafter",
    "n_max",
    "tok/s (min-max)",
    "speedup (min-max)",
    "accept len",
    "accept rate",
    "TTFT s",
)


def cells(r: Row) -> list[str]:
    """A row as the text of its COLUMNS, for every renderer (Rich table, Markdown)."""
    if not r.tokens_per_s:
        rate = "-"
    elif r.runs > 1:  # a range only from more than one sample
        rate = f"{r.tokens_per_s['median']:.1f} ({r.tokens_per_s['min']:.1f}-{r.tokens_per_s['max']:.1f})"
    else:
        rate = f"{r.tokens_per_s['median']:.1f}"
    if r.speedup is None:
        speedup = "-"
    elif r.drafted_nothing:
        speedup = f"drafted nothing ({r.speedup:.2f}x)"
    elif r.speedup_range:
        speedup = f"{r.speedup:.2f}x ({r.speedup_range[0]:.2f}-{r.speedup_range[1]:.2f})"
    else:
        speedup = f"{r.speedup:.2f}x"
    return [
        r.category,
        f"{r.depth // 1024}k" if r.depth and r.depth % 1024 == 0 else str(r.depth),
        "on" if r.think else "off",
        r.drafter,
        r.length_label,
        rate,
        speedup,
        f"{r.acceptance_length:.2f}" if r.acceptance_length else "-",
        f"{r.acceptance_rate:.0%}" if r.acceptance_rate is not None else "-",
        f"{r.ttft_s:.2f}" if r.ttft_s else "-",
    ]


def markdown_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    return "\n".join(lines)
