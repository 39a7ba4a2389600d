"""The first-run screen offers the drafter its own fit plan keeps, and pulls only that
(issue 14, item 11): on a card too small for the target the plan drops the drafter, and
the screen used to recommend it and pull it anyway."""

from __future__ import annotations

from app.fit.hardware import Gpu, Hardware
from app.hub.pull import make_request, pull
from app.models.catalog import load_catalog
from app.run.first_run_offer import Offer, plan_offer
from app.settings import load_settings
from app.tui.app import ChatApp
from app.tui.screens.first_run import FirstRun, FirstRunScreen
from tests.conftest import DSPINE_REPO, TARGET_REPO
from tests.support.pilot import until

GiB = 2**30


def card(gib: int) -> Hardware:
    return Hardware([Gpu(0, f"test card {gib} GiB", gib * GiB, gib * GiB)], 64 * GiB, 60 * GiB, "nvml")


def test_a_card_too_small_for_the_target_is_offered_no_drafter_and_pulls_none(gguf_hub, env, models_dir):
    settings = load_settings()
    catalog = load_catalog()
    offer = plan_offer(Offer("qwen3.8-27b", "dspine-q4"), catalog, settings, card(12))
    assert offer.drafter == "none" and offer.name == "qwen3.8-27b (drafter none)"
    assert "dspine-q4 is left out" in offer.text
    gguf_hub.reset_counts()
    pull(make_request("qwen3.8-27b", catalog, None, offer.drafter), settings)
    assert gguf_hub.served_bytes(TARGET_REPO) > 0
    assert gguf_hub.served_bytes(DSPINE_REPO, "Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf") == 0


def test_a_card_that_holds_both_keeps_the_recommended_drafter(gguf_hub, env):
    offer = plan_offer(Offer("qwen3.8-27b", "dspine-q4"), load_catalog(), load_settings(), card(24))
    assert offer.drafter == "dspine-q4" and "dspine-q4 is left out" not in offer.text


async def test_the_screen_shows_what_the_plan_offers(store):
    first_run = FirstRun(
        "qwen3.8-27b (drafter dspine-q4)",
        lambda: ("qwen3.8-27b (drafter none)", "Fits: Q4_K_M + no drafter"),
        lambda progress: None,
    )
    app = ChatApp(None, store, first_run=first_run)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FirstRunScreen), what="the first-run screen")
        await until(pilot, lambda: "no drafter" in str(app.screen.query_one("#plan").render()), what="the plan")
        assert "drafter none" in str(app.screen.query_one("#welcome").render())
        assert "drafter none" in str(app.screen.query_one("#pull").label)
        assert "dspine-q4" not in str(app.screen.query_one("#welcome").render())
