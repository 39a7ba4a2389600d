"""The readout names the drafter and shows acceptance by draft position."""

from __future__ import annotations

from textual.app import App

from app.chat.store import ChatStore
from app.tui.app import ChatApp
from app.tui.figures import ngram_bars, position_bars, readout_line
from app.tui.widgets.readout import Readout
from backends.stats import Stats
from tests.support.scripted_engine import ScriptedEngine


class ReadoutAlone(App):
    """The readout on a screen of its own."""

    def compose(self):
        yield Readout()


def test_acceptance_by_position_is_a_bar_each():
    stats = Stats(generated_tokens=10, decode_s=1, drafted=12, accepted=8, verify_steps=4)
    assert position_bars(stats) == ""  # engines that cannot see positions: no bars
    stats.position_tested, stats.position_kept = [4, 4, 3, 2, 0], [4, 3, 2, 0, 0]
    assert position_bars(stats) == "█▆▆▁"  # an untested position ends the bars
    assert "by position ▕█▆▆▁▏" in readout_line(stats)


def test_kept_tokens_are_split_between_copies_from_the_context_and_the_model_drafter():
    """With n-gram drafts chained first, the readout says how many kept tokens each drafter
    made, and the bars are per drafter: the model's from what the copies leave of the counts."""
    stats = Stats(generated_tokens=40, decode_s=1, drafted=30, accepted=26, verify_steps=14)
    stats.position_tested, stats.position_kept = [14, 12, 11, 10, 9, 8], [12, 11, 10, 9, 8, 7]
    # two copy steps of 6: one kept whole, one kept 2
    stats.ngram_drafted, stats.ngram_accepted, stats.ngram_steps = 12, 8, 2
    stats.ngram_position_tested, stats.ngram_position_kept = [2, 2, 2, 1, 1, 1], [2, 2, 1, 1, 1, 1]
    line = readout_line(stats)
    assert "kept 8 copied + 18 drafted" in line
    assert ngram_bars(stats) == "██▅███"
    assert f"copies by position ▕{ngram_bars(stats)}▏" in line
    # the model drafter's: tested 12, 10, 9, 9, 8, 7; kept 10, 9, 9, 8, 7, 6
    assert position_bars(stats) == "▇▇█▇▇▇"
    assert "copied" not in readout_line(Stats(generated_tokens=10, decode_s=1, drafted=4, accepted=2, verify_steps=8))


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


async def test_an_engine_error_before_the_first_token_replaces_waiting_in_the_readout(tmp_path):
    """From the remote engine's review: a server that failed the request left the readout on
    "waiting for the first token…" for good, under a chat that had already said the error."""
    from dataclasses import dataclass

    from backends.events import Error
    from tests.support.pilot import send, until

    @dataclass
    class Failing(ScriptedEngine):
        def stream(self, messages, think=True, sampling=None, n_max=None, tools=None):
            self.calls.append({"messages": messages})
            yield Error("the server answered 500 [@click=app.quit]", "try again")

    store = ChatStore(tmp_path / "chats.db")
    app = ChatApp(Failing(), store, model="m", tools=False)
    async with app.run_test() as pilot:
        await send(pilot, "hello")
        live = app.query_one("#figures-live")
        await until(pilot, lambda: "no reply" in str(live.render()), what="the error in the readout")
        assert "the server answered 500 [@click=app.quit]" in str(live.render())
        assert "waiting" not in str(live.render())
    store.close()


async def test_while_the_engine_starts_the_mode_says_so_and_names_no_drafter():
    """A new user saw "think on · ? · no drafter" while the model loaded: a question mark, and a
    drafter said to be missing that was only not started yet."""
    app = ReadoutAlone()
    async with app.run_test() as pilot:
        readout = app.query_one(Readout)
        readout.set_mode(True, None, None)
        await pilot.pause()
        mode = str(readout.query_one("#mode").render())
        assert "engine starting" in mode and "?" not in mode and "no drafter" not in mode
        readout.set_mode(True, "llama-server", "dspine", "d.gguf")
        await pilot.pause()
        assert "d.gguf (dspine)" in str(readout.query_one("#mode").render())


async def test_at_120_columns_speed_and_acceptance_stay_on_the_readouts_line(tmp_path):
    """A new user's 120-column terminal showed the readout cut before the acceptance figure: a
    long drafter file name took half the line and the figures wrapped onto a row not shown. The
    mode gives way (cut with an ellipsis) and the figures stay on one line."""
    from app.tui.widgets.readout import Readout
    from tests.support.pilot import send, until

    store = ChatStore(tmp_path / "chats.db")
    app = ChatApp(ScriptedEngine(drafter_name="smollm2-135m-instruct.q4_1.gguf"), store)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await send(pilot, "hello")
        figures = app.query_one(Readout).query_one("#figures-live")
        await until(pilot, lambda: "accept len" in str(figures.render()), what="a reply's figures")
        await pilot.pause()
        shown = figures.render_line(0).text
        assert "tok/s" in shown and "accept len 3.00" in shown, shown  # the figure, not only its name
        mode = app.query_one(Readout).query_one("#mode")
        assert "think on" in mode.render_line(0).text and mode.region.width <= 120 * 0.4 + 1
    store.close()


async def test_ctrl_c_says_how_to_quit_in_plain_words(tmp_path):
    """A new user's Ctrl+C showed "Press [b]ctrl+q[/b] to quit the app": Textual's markup, shown
    as typed by notifications that never read markup."""
    store = ChatStore(tmp_path / "chats.db")
    app = ChatApp(ScriptedEngine(), store)
    async with app.run_test() as pilot:
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()
        said = [str(n.message) for n in app._notifications]
        assert any("Press ctrl+q to quit the app" in m for m in said), said
        assert not any("[b]" in m for m in said), said
    store.close()


async def test_the_context_meter_counts_the_reply_as_it_streams():
    app = ReadoutAlone()
    async with app.run_test() as pilot:
        readout = app.query_one(Readout)
        readout.show_context(138, 1000)
        readout.start()
        readout.show(Stats(generated_tokens=550, decode_s=5.0))
        await pilot.pause()
        assert str(readout.query_one("#context").render()).strip() == "ctx 688/1.0k"
        assert readout.query_one("#context").has_class("full") is False
        readout.show(Stats(generated_tokens=700, decode_s=7.0))
        await pilot.pause()
        assert readout.query_one("#context").has_class("full")  # 838 of 1,000: warned
        readout.show_context(900, 1000)  # the next turn's prompt counted: the meter starts there
        await pilot.pause()
        assert str(readout.query_one("#context").render()).strip() == "ctx 900/1.0k"
