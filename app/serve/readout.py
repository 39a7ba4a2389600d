"""The terminal readout while serving (Rich): what runs at the top, one line per
request in flight and the last ones done, totals and a sparkline, the GPU.
Without a terminal: one plain line per finished request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..terminal_text import one_line
from .board import Board, sparkline
from .figures import RequestFigures
from .gpu_status import GpuStatus


@dataclass(frozen=True)
class ServeInfo:
    model: str
    drafter: str
    plan: str  # context, GPU layers, KV, draft length, slots
    endpoint: str  # http://127.0.0.1:8080/v1
    think: bool
    # A remote server's own figures, server-wide (remote_counters.py); None: nothing to add.
    server_figures: Callable[[], str | None] | None = None


def _mode(think: bool | None) -> str:
    return "-" if think is None else ("think" if think else "no-think")


def _pct(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return fmt.format(value) if value is not None else "-"


def request_cells(f: RequestFigures) -> list[str]:
    stats = f.stats
    return [
        f"#{f.number}",
        f.state,
        f.client,
        f.endpoint.removeprefix("/v1/"),
        _mode(f.think),
        str(f.live_tokens),
        _num(f.live_tokens_per_s),
        _num(stats.acceptance_length, "{:.2f}") if stats.drafted else "-",
        _pct(stats.acceptance_rate),
        str(stats.drafted) if stats.drafted else "-",
        _num(stats.ttft_s, "{:.2f}"),
        prompt_cell(f),
    ]


def prompt_cell(f: RequestFigures) -> str:
    """Prompt tokens processed for this request, and reused from the slot's cache
    (llama-server's timings prompt_n and cache_n): a lost prefix shows as a big first number."""
    stats = f.stats
    if not stats.prompt_tokens and not stats.prompt_cached:
        return "-"
    return f"{stats.prompt_tokens} new, {stats.prompt_cached} reused"


def request_line(f: RequestFigures) -> str:
    """One line per finished request (no terminal, or a log reader)."""
    number, state, client, endpoint, mode, tokens, rate, length, rate_pct, drafted, ttft, prompt = request_cells(f)
    client = one_line(client)  # from the request's User-Agent
    return (
        f"{number} {state} {client} {endpoint} {mode}: {tokens} tokens, {rate} tok/s, "
        f"accept len {length}, accept {rate_pct} of {drafted}, ttft {ttft} s, prompt {prompt}"
    )


def gpu_line(gpus: list[GpuStatus]) -> str:
    if not gpus:
        return "GPU: none seen by NVML"
    parts = []
    for gpu in gpus:
        text = f"{gpu.name} {gpu.used / 2**30:.1f}/{gpu.total / 2**30:.1f} GiB"
        if gpu.temperature_c is not None:
            text += f", {gpu.temperature_c} °C"
        if gpu.sm_clock_mhz is not None:
            text += f", {gpu.sm_clock_mhz} MHz" + (f" of {gpu.max_sm_clock_mhz}" if gpu.max_sm_clock_mhz else "")
        parts.append(text)
    return "GPU: " + "; ".join(parts)


COLUMNS = (
    "req",
    "state",
    "client",
    "endpoint",
    "mode",
    "tokens",
    "tok/s",
    "acc len",
    "acc",
    "drafted",
    "ttft s",
    "prompt",
)
NUMERIC = {"tokens", "tok/s", "acc len", "acc", "drafted"}


def render(info: ServeInfo, board: Board, gpus: list[GpuStatus]) -> RenderableType:
    head = Text.assemble(
        ("dspine serve ", "bold"),
        (one_line(info.model), "bold cyan"),
        f"  drafter {one_line(info.drafter)}  default {'think' if info.think else 'no-think'}\n",
        f"{one_line(info.plan)}\n",
        ("OpenAI ", "dim"),
        info.endpoint,
        ("   Anthropic ", "dim"),
        info.endpoint.removesuffix("/v1") + "/v1/messages",
    )
    table = Table(box=None, pad_edge=False, header_style="dim")
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in NUMERIC else "left")
    # A client's name comes from its User-Agent: text, never markup or escapes.
    for figures in sorted(board.in_flight.values(), key=lambda f: f.number):
        table.add_row(*(Text(one_line(c)) for c in request_cells(figures)), style="bold")
    for figures in board.done:
        style = "dim" if figures.state == "done" else "red"
        table.add_row(*(Text(one_line(c)) for c in request_cells(figures)), style=style)
    totals = board.totals
    summary = Text(
        f"{totals.requests} done ({totals.failed} failed or dropped), {len(board.in_flight)} in flight "
        f"({board.queued} queued); {totals.generated} tokens at {_num(totals.tokens_per_s)} tok/s; "
        f"accept len {_num(totals.acceptance_length, '{:.2f}')}, accept {_pct(totals.acceptance_rate)}  "
    )
    summary.append(sparkline(list(board.rates)), style="green")
    server = info.server_figures() if info.server_figures is not None else None
    lines: list[RenderableType] = [head, table, summary]
    if server:
        lines.append(Text(server))
    return Group(*lines, Text(gpu_line(gpus), style="dim"))
