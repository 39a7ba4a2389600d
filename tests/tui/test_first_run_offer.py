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
    offer = plan_offer(Offer("qwen3.8-27b", "dspine"), catalog, settings, card(12))
    assert offer.drafter == "none" and offer.name == "qwen3.8-27b (drafter none)"
    assert "dspine is left out" in offer.text
    gguf_hub.reset_counts()
    pull(make_request("qwen3.8-27b", catalog, None, offer.drafter), settings)
    assert gguf_hub.served_bytes(TARGET_REPO) > 0
    assert gguf_hub.served_bytes(DSPINE_REPO, "Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf") == 0


def test_a_card_that_holds_both_keeps_the_recommended_drafter(gguf_hub, env):
    offer = plan_offer(Offer("qwen3.8-27b", "dspine"), load_catalog(), load_settings(), card(24))
    assert offer.drafter == "dspine" and "dspine is left out" not in offer.text


async def test_the_screen_shows_what_the_plan_offers(store):
    first_run = FirstRun(
        "qwen3.8-27b (drafter dspine)",
        lambda: ("qwen3.8-27b (drafter none)", "Fits: Q4_K_M + no drafter"),
        lambda progress: None,
    )
    app = ChatApp(None, store, first_run=first_run)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FirstRunScreen), what="the first-run screen")
        await until(pilot, lambda: "no drafter" in str(app.screen.query_one("#plan").render()), what="the plan")
        assert "drafter none" in str(app.screen.query_one("#welcome").render())
        assert "drafter none" in str(app.screen.query_one("#pull").label)
        assert "drafter dspine" not in str(app.screen.query_one("#welcome").render())


async def test_hub_unreachable_offers_the_small_bundle_from_the_package_index(store, env, monkeypatch, tmp_path):
    """Issue 37: with the hub out of reach the first-run screen was a dead end. The plan comes
    from the catalog offline; the pull that needs the hub says so and offers smollm2-135m
    (from the package index, which here answers) and a local file."""
    from textual.widgets import Button, Input

    from app.run.first_screen import first_run as _first_run
    from tests.support.fake_index import FakeIndex, add_smollm2
    from tests.support.gguf_models import chat_model, write_model
    from tests.support.scripted_engine import ScriptedEngine

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    member = write_model(tmp_path / "m.gguf", chat_model(n_layer=1, n_embd=64)).read_bytes()
    index = FakeIndex()
    add_smollm2(index, member)
    index.start()
    monkeypatch.setenv("DSPINE_PACKAGE_INDEX", index.url)
    opened: list[str] = []

    def open_engine(model: str):
        opened.append(model)
        return ScriptedEngine()

    app = ChatApp(
        None, store, first_run=_first_run(load_settings(), load_catalog(), "qwen3.8-27b"), open_engine=open_engine
    )
    try:
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, FirstRunScreen), what="the first-run screen")
            plan = app.screen.query_one("#plan")
            await until(
                pilot, lambda: "fit" in str(plan.render()).lower(), timeout=60, what="the plan from the catalog"
            )
            status = app.screen.query_one("#status")
            app.screen.query_one("#pull", Button).press()  # below the fold at this size: pressed, not clicked
            try:
                await until(pilot, lambda: "can still start" in str(status.render()), timeout=60, what="the failure")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; status: {status.render()}; plan: {plan.render()}") from None
            assert "Without the hub" in str(status.render()), str(status.render())
            assert "smollm2-135m" in str(status.render()) and ".gguf" in str(status.render())
            assert "smollm2-135m" in str(app.screen.query_one("#pull-small", Button).label)
            assert app.screen.query_one("#path", Input) is not None
            app.screen.query_one("#pull-small", Button).press()  # pressed, not clicked: below the fold too
            # The pull makes the Q8_0 target with llama-quantize: minutes when the whole suite loads both cores.
            try:
                await until(pilot, lambda: not isinstance(app.screen, FirstRunScreen), timeout=180, what="the pull")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; status: {status.render()}") from None
            await until(pilot, lambda: opened == ["smollm2-135m"], what="the small model's engine")
            assert app.model == "smollm2-135m"
    finally:
        index.stop()


async def test_a_local_gguf_opens_from_the_first_run_screen(store, tmp_path):
    from textual.widgets import Input

    from app.run.first_run_offer import local_model
    from tests.support.gguf_models import chat_model, write_model
    from tests.support.scripted_engine import ScriptedEngine

    model = write_model(tmp_path / "mine.gguf", chat_model(n_layer=1, n_embd=64))
    (tmp_path / "notes.gguf").write_text("not a model")
    opened: list[str] = []
    first_run = FirstRun("qwen3.8-27b", lambda: "Fits", lambda p: None, local_file=local_model)
    app = ChatApp(None, store, first_run=first_run, open_engine=lambda m: opened.append(m) or ScriptedEngine())
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FirstRunScreen), what="the first-run screen")
        app.screen.query_one("#path", Input).value = str(tmp_path / "notes.gguf")
        await pilot.click("#open")
        status = app.screen.query_one("#status")
        await until(pilot, lambda: "not a GGUF model" in str(status.render()), what="the refusal")
        assert isinstance(app.screen, FirstRunScreen) and opened == []
        path = app.screen.query_one("#path", Input)
        path.value = str(model)
        path.focus()
        await pilot.press("enter")
        await until(pilot, lambda: opened == [str(model.resolve())], what=f"the engine {status.render()}")
        assert app.model == "mine.gguf"


def test_with_no_gpu_the_first_screen_offers_the_small_bundle_first(env, monkeypatch):
    """Issue 47, dead end 5: a CPU-only machine was offered the 17.7 GB 27B bundle first."""
    from app.run.first_screen import first_run as _first_run

    monkeypatch.setattr("app.fit.hardware.detect", lambda: type("H", (), {"gpus": []})())
    first_run = _first_run(load_settings(), load_catalog())
    assert first_run.name == "smollm2-135m" and first_run.small is None
    name, text = first_run.describe()
    assert name == "smollm2-135m" and "No GPU was found here" in text
    # What the chat then does on a CPU, not "it drafts with its Q4_1 copy" (it decodes plainly).
    assert "decodes plainly" in text and "drafts with its own" not in text


def test_chat_with_a_catalog_name_not_pulled_yet_opens_its_pull(env):
    """Issue 47, dead end 1: `dspine chat --model smollm2-135m` on a fresh machine printed
    "not pulled" and exited; the README says the first screen offers the pull."""
    from app.run.first_screen import first_run as _first_run
    from app.run.first_screen import unpulled_bundle as _unpulled_bundle

    settings, catalog = load_settings(), load_catalog()
    assert _unpulled_bundle("smollm2-135m", catalog, settings)
    assert not _unpulled_bundle("no-such-bundle", catalog, settings)  # an unknown name still errors
    assert not _unpulled_bundle("model.gguf", catalog, settings)
    assert _first_run(settings, catalog, "smollm2-135m").name == "smollm2-135m"


async def test_a_model_pulled_from_the_first_screen_without_a_thinking_mode_starts_with_thinking_off(store):
    """From a new user's try-it run: `dspine chat --model smollm2-135m` on a fresh machine pulled
    from the first screen and then showed "think on" (and sampled with the think preset) for a
    model whose template has no thinking mode; `--model` on a pulled one started it off."""
    from app.hub.pull import PullResult
    from app.hub.store import PullRecord
    from app.tui.widgets.readout import Readout
    from tests.support.scripted_engine import ScriptedEngine

    def pulled(progress):
        return PullResult(PullRecord("smollm2-135m", "index", "Q8_0", None, None), [])

    for given, expected in ((False, False), (True, True)):
        first_run = FirstRun("smollm2-135m", lambda: "Fits", pulled)
        app = ChatApp(
            None,
            store,
            think=True,
            think_given=given,  # --think on: the user's word wins over the model's template
            first_run=first_run,
            open_engine=lambda m: ScriptedEngine(),
            thinks=lambda engine: False,
        )
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda a=app: isinstance(a.screen, FirstRunScreen), what="the first-run screen")
            app.screen.query_one("#pull").press()
            await until(pilot, lambda a=app: a.engine is not None, what="the pulled model's engine")
            await pilot.pause()
            assert app.think is expected
            mode = str(app.query_one(Readout).query_one("#mode").render())
            assert ("think on" if expected else "think off") in mode, mode
            # Ctrl+T said "think on" for a model with no thinking mode (issue 68): it stays off.
            await pilot.press("ctrl+t")
            await pilot.pause()
            mode = str(app.query_one(Readout).query_one("#mode").render())
            assert app.think is False and "think off" in mode, mode
            if not expected:
                shown = [str(n.message) for n in app._notifications]
                assert any("has no thinking mode: thinking stays off" in text for text in shown), shown


async def test_enter_on_the_first_screen_pulls_and_after_a_failed_pull_pulls_again(store):
    """Focus starts on the recommended pull, and comes back to it when a pull fails: the buttons,
    disabled while pulling, had left it in the path box, where Enter answered "type the path of a
    .gguf file first" instead of trying again."""
    from app.errors import NetworkError
    from app.run.first_run_offer import local_model

    pulled: list[str] = []

    def pull_fails(progress):
        pulled.append("pull")
        raise NetworkError("the package index has no wheel with a sha256", "set package_index")

    first_run = FirstRun("smollm2-135m", lambda: "Fits", pull_fails, local_file=local_model)
    app = ChatApp(None, store, first_run=first_run)
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FirstRunScreen), what="the first-run screen")
        await until(pilot, lambda: app.focused is not None, what="a focused widget")
        assert app.focused is app.screen.query_one("#pull")
        # Textual ignores Enter on a button for its press effect's length (0.2 s) after a press: a
        # pull that fails within it (no network) left the next Enter dropped. Made long here, so
        # an Enter right after the failure always falls inside it.
        app.screen.query_one("#pull").active_effect_duration = 60
        await pilot.press("enter")
        status = app.screen.query_one("#status")
        await until(pilot, lambda: "sha256" in str(status.render()), what="the failure")
        await until(pilot, lambda: not app.screen.query_one("#pull").disabled, what="the buttons back")
        assert app.focused is app.screen.query_one("#pull")
        await pilot.press("enter")
        await until(pilot, lambda: pulled == ["pull", "pull"], what="the second try")
