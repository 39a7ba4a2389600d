"""Rich renderings for the CLI: pull progress, pull summary, list, config."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from .hub.orphans import Orphan
from .hub.pull import PlannedFile, PullProgress, PullResult
from .hub.store import Manifest, file_state, record_status
from .settings import SPECS, Settings
from .terminal_text import controls_shown
from .units import format_bytes

if TYPE_CHECKING:
    from .hub.download import FetchReport


def shown(value: object) -> str:
    """A name from the hub or the manifest (a repository, a file, a path) for Rich: its
    control characters made visible (ESC as ␛) and its brackets taken as text, not markup."""
    return escape(controls_shown(str(value)))


_ACTION_WORDS = {"present": "already here, checking its sha256", "hf-cache": "in your HF cache", "fetch": "download"}


class BinarySpeedColumn(ProgressColumn):
    """Speed in MiB/s, to match the MiB of the size column."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{format_bytes(speed)}/s", style="progress.data.speed")


class RichPullProgress(PullProgress):
    """A bar per file and one for the whole pull, with speed and ETA."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}", justify="left"),
            BarColumn(bar_width=None),
            DownloadColumn(binary_units=True),
            BinarySpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.total: TaskID | None = None
        self.tasks: dict[str, TaskID] = {}
        self.converting: TaskID | None = None

    def begin(self, files: list[PlannedFile]) -> None:
        for item in files:
            if item.action != "fetch":
                self.console.print(f"  {item.role:8} {shown(item.label)}  [green]{_ACTION_WORDS[item.action]}[/]")
        to_fetch = [f for f in files if f.action == "fetch"]
        if not to_fetch:
            return
        self.progress.start()
        self.total = self.progress.add_task(
            "total",
            total=sum(f.remote.size for f in to_fetch),
            completed=sum(f.partial for f in to_fetch),
        )
        for item in to_fetch:
            self._task(item)

    def _task(self, item: PlannedFile) -> TaskID:
        """The file's bar; made on first use for a file that was already here (checked, or fetched again)."""
        if item.remote.path not in self.tasks:
            self.progress.start()
            self.tasks[item.remote.path] = self.progress.add_task(
                f"{item.role} {shown(item.label)}", total=item.remote.size, completed=item.partial, start=False
            )
        return self.tasks[item.remote.path]

    def resume_from(self, item: PlannedFile, have: int) -> None:
        task = self._task(item)
        self.progress.start_task(task)
        self.progress.update(task, completed=have, description=f"{item.role} {shown(item.label)}")
        if self.total is not None and have != item.partial:
            self.progress.update(self.total, advance=have - item.partial)
        if have:
            self.progress.console.print(f"  resuming {shown(item.label)} from {format_bytes(have)}")

    def rehash(self, item: PlannedFile, n: int) -> None:
        if item.action != "present":
            return  # re-reading a .part is quick next to the download; no separate bar
        task = self._task(item)
        self.progress.start_task(task)
        self.progress.update(task, description=f"sha256 {shown(item.label)}")
        self.progress.advance(task, n)

    def notice(self, item: PlannedFile, text: str) -> None:
        self.progress.console.print(f"  {shown(text)}")

    def advance(self, item: PlannedFile, n: int) -> None:
        self.progress.advance(self._task(item), n)
        if self.total is not None:
            self.progress.advance(self.total, n)

    def file_end(self, item: PlannedFile, report: FetchReport | None) -> None:
        if item.remote.path in self.tasks:
            task = self.tasks[item.remote.path]
            self.progress.update(
                task, completed=item.remote.size, description=f"[green]✓[/] {item.role} {shown(item.label)}"
            )

    def say(self, text: str) -> None:
        self.console.print(f"  {shown(text)}")

    def convert_stage(self, what: str, total: int) -> None:
        """A bar per stage of a drafter's conversion (converting, quantizing, sha256)."""
        self.progress.start()
        if self.converting is not None:
            task = self.progress.tasks[self.converting]
            self.progress.update(self.converting, completed=task.total, description=f"[green]✓[/] {task.description}")
        self.converting = self.progress.add_task(f"drafter {shown(what)}", total=total)

    def convert_advance(self, n: int) -> None:
        if self.converting is not None:
            self.progress.advance(self.converting, n)

    def end(self) -> None:
        if self.converting is not None:
            task = self.progress.tasks[self.converting]
            if task.completed >= (task.total or 0):
                self.progress.update(self.converting, description=f"[green]✓[/] {task.description}")
        self.progress.stop()


def render_pull_result(console: Console, result: PullResult) -> None:
    for note in result.notes:
        console.print(f"[dim]note: {shown(note)}[/]")
    record = result.record
    drafter = f", drafter {record.drafter} ({record.drafter_kind})" if record.drafter else ", no drafter"
    what = shown(f"{record.name} ({record.quant or 'default quant'}{drafter})")
    console.print(f"[bold green]pulled[/] {what}")
    for stored in record.files:
        made_here = result.converted is not None and stored.role == "drafter"
        check = "converted here, read back, sha256 recorded" if made_here else "sha256 ok"
        # A path is one line whatever the width: a script reading it, or a long models folder, gets it whole.
        console.print(f"  {stored.role:8} {shown(stored.local)}  {format_bytes(stored.size)}  {check}", soft_wrap=True)
    if result.fetched_bytes and result.seconds > 0:
        rate = result.fetched_bytes / result.seconds
        reused = f", {format_bytes(result.reused_bytes)} resumed from disk" if result.reused_bytes else ""
        console.print(
            f"  fetched {format_bytes(result.fetched_bytes)} in {result.seconds:.1f} s ({format_bytes(rate)}/s){reused}"
        )
    if result.left_behind:
        size = sum(p.stat().st_size for p in result.left_behind if p.exists())
        console.print(
            f"[yellow]kept:[/] the earlier pull of {shown(record.name)} left {len(result.left_behind)} file(s) "
            f"({format_bytes(size)}) that it no longer uses:"
        )
        for path in result.left_behind:
            console.print(f"  {shown(path)}")
        console.print("  `dspine list` shows them; `dspine rm --orphans` deletes them")


def list_table(manifest: Manifest) -> Table:
    table = Table(title=f"Pulled models ({shown(manifest.path.parent)})", title_justify="left")
    for column in ("name", "role", "size", "on disk", "status", "path"):
        table.add_column(column, overflow="fold")
    for record in manifest.records.values():
        status = record_status(record)
        for index, stored in enumerate(record.files):
            state = file_state(stored)
            colour = {"complete": "green", "partial": "yellow", "missing": "red"}[state.status]
            shown_status = f"[{colour}]{state.status}[/]"
            if stored.role == "package" and state.status == "complete":  # the wheel, its models not yet made
                shown_status = "[yellow]downloaded; `dspine pull` makes the models[/]"
            table.add_row(
                shown(record.name) if index == 0 else "",
                stored.role + (f" ({record.drafter_kind})" if stored.role == "drafter" else ""),
                format_bytes(stored.size),
                format_bytes(state.on_disk),
                shown_status,
                shown(stored.local),
            )
        if not record.files:
            table.add_row(shown(record.name), "", "", "", status, "")
    return table


def orphans_table(orphans: list[Orphan]) -> Table:
    total = sum(o.size for o in orphans)
    table = Table(
        title=f"On disk, owned by no pull ({format_bytes(total)} in all; `dspine rm --orphans` deletes them)",
        title_justify="left",
    )
    for column in ("file", "size", "path"):
        table.add_column(column, overflow="fold")
    for orphan in orphans:
        unfinished = "" if orphan.final in orphan.paths else " [dim](unfinished)[/]"
        table.add_row(shown(orphan.name) + unfinished, format_bytes(orphan.size), shown(orphan.final))
    return table


def _setting_text(value: object) -> Text:
    """A value from the settings file or the environment as plain text: no Rich markup,
    control characters shown (ESC as ␛) rather than sent to the terminal."""
    if value is None:
        shown = ""
    elif isinstance(value, tuple):
        shown = ", ".join(str(item) for item in value)
    elif isinstance(value, dict):  # MCP servers: their names only (their env may hold secrets)
        shown = ", ".join(str(name) for name in value) or "none"
    else:
        shown = str(value)
    return Text(controls_shown(shown))


def config_table(settings: Settings) -> Table:
    state = "exists" if settings.file_exists else "not created yet; defaults apply"
    title = Text("Settings file: ") + _setting_text(settings.file) + Text(f" ({state})")
    table = Table(title=title, title_justify="left")
    for column in ("setting", "value", "from", "environment variable", "meaning"):
        table.add_column(column, overflow="fold")
    for spec in SPECS:
        value = getattr(settings, spec.key)
        table.add_row(
            spec.key, _setting_text(value), _setting_text(settings.sources[spec.key]), spec.env_var, spec.help
        )
    return table


def _cpu_view(console: Console, result, name: str) -> None:
    """No GPU: everything runs from system RAM, so a GPU table would be all zeros."""
    plan = result.plan
    ram = {k: v for k, v in plan.ram.items() if v}
    parts = ", ".join(f"{k.replace('_', ' ').replace(' kv', ' KV cache')} {format_bytes(v)}" for k, v in ram.items())
    free = f" of {format_bytes(result.hardware.ram_available)} free" if result.hardware.ram_available else ""
    verdict = "[bold green]fits[/]" if plan.fits else "[bold red]does not fit[/]"
    console.print(
        f"{verdict} on the CPU (no NVIDIA GPU found): {shown(name)} {shown(plan.target.label)}, "
        f"context {plan.n_ctx:,}, "
        f"KV {plan.kv}; in system RAM {format_bytes(sum(ram.values()))}{free} ({parts})"
    )
    for reason in plan.reasons:
        if not reason.startswith("No NVIDIA GPU found"):
            console.print(f"  • {reason}", soft_wrap=False)
    console.print("[dim]llama-server " + " ".join(plan.server_args()) + "[/]", soft_wrap=True)


def fit_view(console: Console, result, name: str = "") -> None:
    """`name`: what was planned as the user knows it (a catalog name, a file's name)."""
    plan = result.plan
    if plan.budget == 0 and not result.hardware.gpus:
        _cpu_view(console, result, name or Path(plan.target.path).name)
        return
    runtime_rows = _fit_rows(plan)
    table = Table(
        title=f"dspine fit: {plan.target.label} ({plan.target.shape.name or plan.target.path})", title_justify="left"
    )
    table.add_column("on the GPU", overflow="fold")
    table.add_column("MiB", justify="right")
    for label, value in runtime_rows:
        table.add_row(label, f"{value / 2**20:,.0f}")
    table.add_section()
    table.add_row("[bold]total[/]", f"[bold]{plan.total / 2**20:,.0f}[/]")
    table.add_row("budget", f"{plan.budget / 2**20:,.0f}")
    colour = "green" if plan.fits else "red"
    table.add_row(f"[{colour}]headroom[/]", f"[{colour}]{plan.headroom / 2**20:,.0f}[/]")
    console.print(table)
    ram = {k: v for k, v in plan.ram.items() if v}
    if ram:
        console.print(
            "In system RAM: " + ", ".join(f"{k.replace('_', ' ')} {v / 2**20:,.0f} MiB" for k, v in ram.items())
        )
    verdict = "[bold green]fits[/]" if plan.fits else "[bold red]does not fit[/]"
    drafter = f"{plan.drafter.label} ({plan.drafter.kind})" if plan.drafter else "no drafter"
    console.print(
        f"{verdict}: {plan.target.label} + {drafter}, context {plan.n_ctx:,}, KV {plan.kv}, "
        f"flash attention {'on' if plan.flash_attn else 'off'}, GPU layers {plan.gpu_layers}"
        + (f" (drafter {plan.drafter_gpu_layers})" if plan.drafter_gpu_layers else "")
    )
    for reason in plan.reasons:
        console.print(f"  • {reason}", soft_wrap=False)
    console.print("[dim]llama-server " + " ".join(plan.server_args()) + "[/]", soft_wrap=True)


def _fit_rows(plan) -> list[tuple[str, int]]:
    shape = plan.target.shape
    m = plan.memory
    all_layers = shape.n_layer + 1
    rows = [
        (f"target weights ({plan.target.label}, {plan.gpu_layers}/{all_layers} layers)", m["target_weights"]),
        (f"target KV cache ({plan.kv}, {plan.n_ctx:,} tokens, {len(shape.kv_layers)} blocks)", m["target_kv"]),
    ]
    if shape.recurrent_layers:
        rows.append((f"recurrent state ({len(shape.recurrent_layers)} Gated-DeltaNet blocks)", m["recurrent_state"]))
    measured = "measured by llama.cpp" if plan.compute_measured else "estimated"
    rows.append(
        (f"compute buffer (ubatch {plan.n_ubatch}, {1 + plan.draft_n_max} logit rows, {measured})", m["compute"])
    )
    rows.append(("backend overhead (CUDA context)", m["overhead"]))
    if plan.drafter is not None:
        label = plan.drafter.label
        rows.append((f"drafter weights ({label})", m["drafter_weights"]))
        rows.append((f"drafter KV cache ({label})", m["drafter_kv"]))
        measured = "measured by llama.cpp" if plan.drafter_compute_measured else "estimated"
        rows.append((f"drafter compute buffer ({measured})", m["drafter_compute"]))
    rows.append(("safety margin", m["margin"]))
    return rows
