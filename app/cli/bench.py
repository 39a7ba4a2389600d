"""`dspine bench`: drafting setups measured against plain decoding, alternated round by round."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import UsageError
from ..models.catalog import load_catalog
from ..settings import load_settings
from ..terminal_text import controls_shown
from .base import (
    ApiKeyOption,
    EngineOption,
    ModelOption,
    UrlOption,
    _say_warning,
    app,
    err,
    out,
)
from .bench_options import (
    AdaptiveOption,
    ContextFilesOption,
    CtxOption,
    DepthOption,
    DraftersOption,
    JsonOption,
    MarkdownOption,
    MaxTokensOption,
    NMaxOption,
    PromptsOption,
    RepeatOption,
    SeedOption,
    ThinkOption,
)


def _server_adapts(settings) -> bool:
    """Whether the llama-server here drafts at a per-request length (dspine's patch): only
    then does a bench row with the adaptive length measure adapting on the server engine."""
    from backends.base import EngineError
    from backends.server_draft import honoured_by_binary

    from ..run.engines import llama_server_binary

    try:
        return honoured_by_binary(llama_server_binary(settings))
    except EngineError:
        return False


@app.command()
def bench(
    model: ModelOption = None,
    engine: EngineOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    drafters: DraftersOption = "all",
    prompts: PromptsOption = None,
    think: ThinkOption = "off",
    n_max: NMaxOption = "",
    adaptive: AdaptiveOption = True,
    repeat: RepeatOption = None,
    max_tokens: MaxTokensOption = None,
    ctx: CtxOption = 4096,
    seed: SeedOption = 0,
    as_json: JsonOption = False,
    markdown: MarkdownOption = False,
    depth: DepthOption = "0",
    context_files: ContextFilesOption = None,
) -> None:
    """Measure plain vs speculative decoding on your prompts: tok/s, speedup, acceptance."""
    from ..fit.hardware import detect
    from ..run.bench import CPU_MAX_TOKENS, builtin_prompt_files, load_prompts
    from ..run.engines import engine_and_url
    from ..run.inputs import check_lengths, check_sampling

    lengths = _draft_lengths(n_max)
    on_cpu = not detect().gpus
    # Three samples a cell on a CPU (its timings wander by 10-20%); a range needs more than one.
    repeat = repeat if repeat is not None else (3 if on_cpu else 2)
    if repeat < 1:
        raise UsageError(f"--repeat {repeat}", "give 1 or more rounds (3 give a spread worth reading)")
    short = on_cpu and prompts is None and max_tokens is None
    max_tokens = max_tokens or (CPU_MAX_TOKENS if on_cpu else 128)
    check_lengths(max_tokens=max_tokens, ctx=ctx)
    check_sampling(seed=seed)
    settings = load_settings()
    # The engine chat runs here (issue 68): a llama-server where one is found, else in process.
    running, url = engine_and_url(engine, settings, url)
    thinks = [True, False] if think == "both" else [think == "on"]
    if running == "remote":
        if drafters != "all" or depth != "0":
            raise UsageError(
                "--draft and --depth are for a local engine", "a remote server runs its own drafter; leave them out"
            )
        if max_tokens == CPU_MAX_TOKENS and short:
            max_tokens = 128  # the model runs on the remote's GPUs, not this machine's CPU
        chats = load_prompts(prompts or builtin_prompt_files())
        _bench_remote(
            settings, url, api_key, model, ctx, lengths, thinks, chats, repeat, max_tokens, seed, as_json, markdown
        )
        return
    plan = LocalBench(settings, running, model, drafters, lengths, adaptive, thinks, repeat, max_tokens, seed, on_cpu)
    plan.choose(load_prompts(prompts or builtin_prompt_files()), short, quiet=as_json or markdown)
    plan.at_depths(depth, context_files, ctx)
    rows, chart = plan.measure(quiet=as_json or markdown)
    title = f"dspine bench: {plan.plain_files.label}, {running}, {max_tokens} tokens a prompt"
    _bench_output(rows, title, as_json, markdown, chart)


def _draft_lengths(n_max: str) -> list[int]:
    from ..run.inputs import check_lengths

    try:
        lengths = [int(x) for x in n_max.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--n-max {n_max!r}", "give draft lengths as numbers, e.g. 2,4,8,16") from None
    for length in lengths:
        check_lengths(n_max=length)
    return lengths


def _bench_remote(
    settings, url, api_key, model, ctx, lengths, thinks, chats, repeat, max_tokens, seed, as_json, markdown
):
    """A remote server's model, measured with and without its drafting where it can switch."""
    from ..run.bench_remote import RemoteBench, run_remote

    asked = RemoteBench(url, api_key, model, ctx, lengths, thinks)
    done = run_remote(asked, chats, repeat, max_tokens, seed, settings, _say_warning)
    _bench_output(done.rows, f"{done.title}, {max_tokens} tokens a prompt", as_json, markdown, [])
    if done.note and not as_json:
        err.print(done.note, markup=False, highlight=False)


def _chosen_drafters(drafters: str, model, catalog, settings) -> list[tuple[str, Path, str]]:
    """The drafters --draft names: (label, file, kind); "all" is the pulled one."""
    from ..run.engines import drafter_kind_of, resolve_files

    chosen: list[tuple[str, Path, str]] = []
    if drafters == "all":
        pulled = resolve_files(model, None, catalog, settings)
        if pulled.drafter is not None and pulled.drafter_kind:
            chosen.append((pulled.drafter.name, pulled.drafter, pulled.drafter_kind))
        return chosen
    if drafters == "none":
        return chosen
    for item in (x.strip() for x in drafters.split(",") if x.strip()):
        if item.lower() in ("none", "ngram", "n-gram"):
            continue
        if item.lower().endswith(".gguf"):
            path = Path(item)
            if not path.is_file():
                raise UsageError(f"the drafter file {path} does not exist", "check the path")
            chosen.append((path.name, path, drafter_kind_of(path)))
        else:
            files = resolve_files(model, item, catalog, settings)
            if files.drafter is not None and files.drafter_kind:
                chosen.append((item, files.drafter, files.drafter_kind))
    return chosen


class LocalBench:
    """A bench on this machine's engine: the setups (plain, n-gram copies, each drafter at each
    length and adapting), the prompts, the depths, then the runs alternated round by round."""

    def __init__(self, settings, running, model, drafters, lengths, adaptive, thinks, repeat, max_tokens, seed, on_cpu):
        from backends.drafters import default_n_max

        from ..run.bench import NGRAM_LABEL, PLAIN, Setup
        from ..run.engines import resolve_files

        self.settings, self.running, self.thinks, self.repeat = settings, running, thinks, repeat
        self.max_tokens, self.seed, self.on_cpu = max_tokens, seed, on_cpu
        catalog = load_catalog(settings.catalog)
        self.plain_files = resolve_files(model, "none", catalog, settings)
        self.chosen = _chosen_drafters(drafters, model, catalog, settings)
        # N-gram copies alone (no drafter): what a machine without a GPU runs on edits, and what the
        # tune weighs; bench measures it as a setup of its own (issue 47: the tune had the row, bench not).
        self.ngram_row = drafters == "all" or any(x.strip().lower() in ("ngram", "n-gram") for x in drafters.split(","))
        self.setups = [Setup(PLAIN, None)] + ([Setup(NGRAM_LABEL, None)] if self.ngram_row else [])
        adapts = adaptive and (running == "inproc" or (running == "server" and _server_adapts(settings)))
        for label, _, kind in self.chosen:
            self.setups += [Setup(label, length) for length in (lengths or [default_n_max(kind, unknown=4)])]
            if adapts:
                self.setups.append(Setup(label, None, adaptive=True))
        self.by_label = {label: (path, kind) for label, path, kind in self.chosen}
        self.chats: list = []
        self.round_prompts = None
        self.depths: dict = {}
        self.run_ctx = 0

    def choose(self, chats, short: bool, quiet: bool) -> None:
        """Without a GPU and with nothing asked: one prompt a category, turned each round."""
        from ..run.bench import rotated, short_set

        self.chats = chats
        if short:
            self.chats = short_set(chats)
            self.round_prompts = rotated(chats, self.chats, self.repeat)  # no prompt asked twice of one engine
            if not quiet:
                err.print(
                    f"no GPU found: a short bench ({len(self.chats)} prompts, one a category, {self.max_tokens} "
                    "tokens each); --prompts or --max-tokens run a full one"
                )

    def at_depths(self, depth: str, context_files, ctx: int) -> None:
        from ..run.depth import parse_depths

        drafter_files = [path for _, path, _ in self.chosen]
        self.depths, skipped, self.run_ctx = contexts_for(
            self.plain_files.target, parse_depths(depth), context_files, self.chats, ctx, self.max_tokens,
            drafter_files, self.settings,
        )  # fmt: skip
        for skip in skipped:
            err.print(f"[yellow]depth {skip.depth:,} skipped: {skip.reason}[/]")

    def open_for(self, setup):
        from ..run.bench import NGRAM_LABEL
        from ..run.engines import EngineOptions, open_engine

        path, kind = self.by_label.get(setup.drafter, (None, None))
        files = replace(self.plain_files, drafter=path, drafter_kind=kind)  # the model's sampling too
        # Bench measures each setup as named: n-gram drafts join the drafters only when the setting
        # says `on` (compare an `edit` run with DSPINE_NGRAM_DRAFTING=on and without).
        ngram = (self.settings.ngram_drafting == "on" and path is not None) or setup.drafter == NGRAM_LABEL
        options = EngineOptions(engine=self.running, ctx=self.run_ctx, n_max=setup.n_max, break_even=False, ngram=ngram)
        return open_engine(files, options, self.settings)

    def measure(self, quiet: bool):
        """The runs under a progress bar (on standard error), summarized: (rows, depth chart)."""
        from rich.markup import escape
        from rich.progress import Progress, TimeRemainingColumn

        from ..run.bench import remembers_replies, row_label, run_bench, summarize
        from ..run.depth import acceptance_chart

        total = len(self.setups) * len(self.thinks) * self.repeat * len(self.chats) * len(self.depths)
        console = err if not quiet else Console(stderr=True, quiet=True)
        columns = (*Progress.get_default_columns(), TimeRemainingColumn(compact=True, elapsed_when_finished=True))
        # The same prompts each round (the user's, or a GPU's full set) on an engine that
        # remembers replies: fresh engines each round, or the n-gram rows fake a speedup.
        ngram_on = self.settings.ngram_drafting == "on" and bool(self.chosen)
        fresh = self.round_prompts is None and self.repeat > 1
        fresh = fresh and remembers_replies(self.running, ngram_on, alone=self.ngram_row)
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task("benchmarking", total=total)
            started = [0]

            def on_start(setup, category: str, think: bool) -> None:
                started[0] += 1
                progress.update(
                    task, description=f"run {started[0]}/{total}: {escape(row_label(setup, category, think))}"
                )

            runs = run_bench(
                self.open_for, self.setups, self.chats, self.thinks, self.repeat, self.max_tokens, self.seed,
                on_run=lambda run: progress.advance(task), depths=self.depths, on_start=on_start,
                # Small models on a CPU: every setup's engine stays open and each prompt runs on them
                # back to back; with a GPU one engine at a time, the order turned each round.
                max_open=None if self.on_cpu else 1, round_prompts=self.round_prompts, fresh_rounds=fresh,
                presets=self.plain_files.sampling,
            )  # fmt: skip
        if len(runs) < total:
            err.print(f"[yellow]interrupted: {len(runs)} of {total} runs measured; showing those[/]")
        rows = summarize(runs)
        return rows, (acceptance_chart(rows) if len(self.depths) > 1 else [])


def _bench_output(rows, title: str, as_json: bool, markdown: bool, chart: list[str]) -> None:
    from ..run.bench import COLUMNS, cells, markdown_table, verdict

    if as_json:
        out.print_json(json.dumps([row.to_json() for row in rows]))
    elif markdown:
        sys.stdout.write(markdown_table(rows) + "\n")
    else:
        # Drafter labels are file names or a remote server's words: text, never markup.
        table = Table(title=Text(controls_shown(title)), title_justify="left")
        for column in COLUMNS:
            table.add_column(column)
        for row in rows:
            table.add_row(*(Text(controls_shown(cell)) for cell in cells(row)))
        out.print(table)
        out.print(Text(controls_shown(verdict(rows))))
        if chart:
            out.print("acceptance rate by depth:")
            for line in chart:
                out.print("  " + line)


def contexts_for(
    target: Path | None,
    depths: list[int],
    files: list[Path] | None,
    chats,
    ctx: int,
    max_tokens: int,
    drafters: list[Path],
    settings,
):
    """Each depth that fits, with what puts that much real context before a prompt (counted
    in the target's own tokens); the depths that do not fit, with why (the fit plan's, for a
    context longer than --ctx); and the context the engines open with (the longest needed)."""
    from ..run.depth import context_corpus, context_of, default_context_files, fitting, with_context
    from ..run.depth_fit import plan_check

    if depths == [0]:
        return {0: lambda messages: messages}, [], ctx
    if target is None:
        raise UsageError(
            "--depth counts tokens with the target's tokenizer, and there is no target file", "give --model"
        )
    from llama_cpp import Llama

    vocab = Llama(model_path=str(target), vocab_only=True, verbose=False)

    def tokenize(text: str) -> list[int]:
        return vocab.tokenize(text.encode(), add_bos=False, special=False)

    def detokenize(tokens: list[int]) -> str:
        return vocab.detokenize(tokens).decode("utf-8", errors="replace")

    # The longest prompt, with room for the chat template's own tokens.
    prompt_tokens = max(len(tokenize(" ".join(str(m["content"]) for m in c.messages))) for c in chats) + 64
    fits, skipped, run_ctx = fitting(depths, ctx, prompt_tokens, max_tokens, plan_check(target, drafters, settings))
    corpus = context_corpus(files or default_context_files()) if any(fits) else ""
    at_depths = {}
    for depth in fits:
        context = context_of(corpus, depth, tokenize, detokenize)
        at_depths[depth] = lambda messages, context=context: with_context(messages, context)
    return at_depths, skipped, run_ctx
