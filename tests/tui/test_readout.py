"""The readout names the drafter and shows acceptance by draft position."""

from __future__ import annotations

from app.tui.app import ChatApp
from app.tui.figures import position_bars, readout_line
from app.tui.history import ChatStore
from backends.stats import Stats
from tests.support.scripted_engine import ScriptedEngine


def test_acceptance_by_position_is_a_bar_each():
    stats = Stats(generated_tokens=10, decode_s=1, drafted=12, accepted=8, verify_steps=4)
    assert position_bars(stats) == ""  # engines that cannot see positions: no bars
    stats.position_tested, stats.position_kept = [4, 4, 3, 2, 0], [4, 3, 2, 0, 0]
    assert position_bars(stats) == "█▆▆▁"  # an untested position ends the bars
    assert "by position ▕█▆▆▁▏" in readout_line(stats)


async def test_the_readout_names_the_drafter_file_and_its_kind(tmp_path):
    store = ChatStore(tmp_path / "chats.db")
    app = ChatApp(ScriptedEngine(), store)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert "scripted-drafter.gguf (dspine)" in str(app.query_one("#mode").render())
    app = ChatApp(ScriptedEngine(speculative=False, drafter_name=None), store)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert "no drafter" in str(app.query_one("#mode").render())
    store.close()
