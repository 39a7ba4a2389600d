"""The chat on a remote engine shows what the server runs and its acceptance: a stand-in in
vLLM's shapes counting drafts on /metrics, and one that reports nothing."""

from __future__ import annotations

from app.tui.app import ChatApp
from app.tui.widgets.readout import Readout
from backends.remote import RemoteEngine
from tests.support.pilot import assistant_views, send, until
from tests.support.remote_servers import shaped_server


async def _reply_figures(engine: RemoteEngine, store) -> tuple[str, str]:
    app = ChatApp(engine, store, model="remote")
    async with app.run_test() as pilot:
        await send(pilot, "what is two and two?")
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
        figures = str(assistant_views(app)[-1].query_one(".figures").render())
        mode = str(app.query_one(Readout).query_one("#mode").render())
    return figures, mode


async def test_a_vllm_servers_counters_give_the_readout_its_acceptance(store):
    with shaped_server() as served:
        engine = RemoteEngine.connect(served.url)
        try:
            figures, mode = await _reply_figures(engine, store)
        finally:
            engine.close()
    assert "accept len" in figures and "50% of 12 drafted" in figures and "by position" in figures
    assert "speculative decoding" in mode and "no drafter" not in mode


async def test_a_server_that_reports_nothing_is_not_said_to_have_no_drafter(store):
    with shaped_server(kind="generic", counters=False) as served:
        engine = RemoteEngine.connect(served.url)
        try:
            figures, _ = await _reply_figures(engine, store)
        finally:
            engine.close()
    assert "acceptance not reported by this server" in figures and "no drafter" not in figures


async def test_a_real_remote_llama_servers_acceptance_is_in_the_readout(store, keyed_llama):
    from backends.remote_probe import Prober

    url, key = keyed_llama
    engine = RemoteEngine.connect(url, key)
    try:
        with Prober(url, key) as prober:
            before = prober.counters()
            app = ChatApp(engine, store, model="remote")
            async with app.run_test() as pilot:
                await send(pilot, "Write a Python function that adds two numbers.")
                await until(pilot, lambda: app.last_end is not None and not app.streaming, timeout=120, what="reply")
                stats = app.last_end.stats
                figures = str(assistant_views(app)[-1].query_one(".figures").render())
            after = prober.counters()
    finally:
        engine.close()
    assert stats.drafted > 0 and f"of {stats.drafted:,} drafted" in figures and "by position" in figures
    # what the readout shows from the reply's timings is what the server's /metrics counted
    assert after is not None and before is not None
    assert after.delta(before).draft_tokens == stats.drafted
