"""Live figures while a reply streams: tok/s, TTFT, acceptance, a sparkline of
tok/s over the reply, the modes in force (permissions when the chat has
tools, thinking, engine, drafter), and how full the model's context is."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import Sparkline, Static

from backends.stats import Stats

from ..figures import readout_line
from ..plain import plain


class Readout(Horizontal):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.rates: list[float] = []
        # The prompt's count, what may be taken, whether exact: what the meter adds a reply to.
        self._counted: tuple[int, int, bool] | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="mode")
        yield Static("", id="figures-live")
        yield Static("", id="context")
        yield Sparkline([], id="rate-sparkline")
        yield Static("", id="gpu")

    def set_mode(
        self,
        think: bool,
        engine: str | None,
        drafter: str | None,
        drafter_name: str | None = None,
        permissions: str = "",
    ) -> None:
        """`engine`: its name (None: still starting, nothing known of its drafter yet);
        `drafter`: its kind; `drafter_name`: which one (its file), shown when it says more;
        `permissions`: the permission mode's label, shown first (marked unless it is `ask`) when
        the chat has tools ("": none)."""
        mode = "think on" if think else "think off"
        which = drafter or "no drafter"
        if drafter and drafter_name and drafter_name != drafter:
            which = f"{drafter_name} ({drafter})"
        if engine is None:
            line = Content.from_markup("[b]$mode[/] · engine starting", mode=mode)
        else:
            line = Content.from_markup("[b]$mode[/] · $engine · $which", mode=mode, engine=engine, which=which)
        if permissions:
            style = "$permissions · " if permissions == "ask" else "[b reverse] $permissions [/] · "
            line = Content.from_markup(style, permissions=permissions) + line
        self.query_one("#mode", Static).update(line)

    def show_gpu(self, used: int | None, total: int | None) -> None:
        text = "GPU -" if not total or used is None else f"GPU {used / 2**30:.1f}/{total / 2**30:.1f} GiB"
        self.query_one("#gpu", Static).update(text)

    def show_context(self, used: int, available: int, exact: bool = True) -> None:
        """`ctx 2.1k/6.1k`: the prompt's tokens against what the model may take before it replies;
        marked `~` when estimated, warned from 80% (compaction comes before 100%). The reply's
        tokens are added as they come (`show`)."""
        self._counted = (used, available, exact)
        self._meter(used, available, exact)

    def _meter(self, used: int, available: int, exact: bool) -> None:
        share = used / available if available else 0.0
        text = f"ctx {_k(used)}/{_k(available)}{'' if exact else '~'} "
        meter = self.query_one("#context", Static)
        meter.set_class(share >= 0.8, "full")
        meter.update(text)

    def clear_context(self) -> None:
        """Nothing counted yet (a new chat)."""
        self._counted = None
        meter = self.query_one("#context", Static)
        meter.set_class(False, "full")
        meter.update("")

    def show_state(self, text: str) -> None:
        """What the engine is doing before any reply: loading, ready, or why there is none."""
        self.query_one("#figures-live", Static).update(plain(text))

    def start(self) -> None:
        self.rates = []
        self.query_one("#rate-sparkline", Sparkline).data = []
        self.query_one("#figures-live", Static).update(readout_line(None))

    def show(self, stats: Stats) -> None:
        # The readout's size never changes: no need to lay the whole screen out again
        # (with a long conversation that costs more than the text itself).
        self.query_one("#figures-live", Static).update(readout_line(stats), layout=False)
        if self._counted is not None and stats.generated_tokens:
            # A long reply fills the context too: the meter stayed at the prompt's count until
            # the next turn (138 while 550 tokens streamed, then 688).
            used, available, exact = self._counted
            self._meter(used + stats.generated_tokens, available, exact)
        if stats.tokens_per_s:
            self.rates.append(stats.tokens_per_s)
            self.query_one("#rate-sparkline", Sparkline).data = self.rates[-60:]


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)
