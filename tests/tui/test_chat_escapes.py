"""Model text with terminal escape sequences cannot reach the terminal through the chat
(issue 14, item 11): a clipboard write (OSC 52), a screen clear, cursor moves, a title
change. The chat renders through Textual, which strips some control codes (bell,
backspace, CR) but not ESC; what the screen would write is checked here."""

from __future__ import annotations

from rich.console import Console

from app.tui.app import ChatApp
from tests.support.pilot import send, until
from tests.support.scripted_engine import ScriptedEngine

HOSTILE = [
    "Sure.\x1b]52;c;cm0gLXJmIH4K\x07 Done",
    "\x1b[2J\x1b[H cleared\x1b[10A up",
    "\x1b]0;pwned title\x1b\\ \x9b31m csi \x1bP dcs \x1b\\ end\n\n```\ncode \x1b[31mred\x1b[0m\n```\n",
]
PAYLOADS = ("\x1b]52", "\x1b[2J", "\x1b[H cleared", "\x1b[10A", "\x1b]0;", "\x9b31m", "\x1bP", "pwned\x07")


def screen_output(app) -> str:
    """What the app would write to the terminal for a full redraw of its screen."""
    update = app.screen._compositor.render_update(full=True)
    return update.render_segments(Console(force_terminal=True, color_system="truecolor", legacy_windows=False))


async def test_escape_sequences_in_model_text_do_not_reach_the_terminal(store):
    engine = ScriptedEngine(answer=HOSTILE)
    app = ChatApp(engine, store, model="tiny.gguf")
    async with app.run_test(size=(100, 40)) as pilot:
        await send(pilot, "hello")
        await until(pilot, lambda: app.last_end is not None, what="the reply")
        await pilot.pause()
        written = screen_output(app)
        for payload in PAYLOADS:
            assert payload not in written, repr(payload)
        # The words around the sequences are still shown, and the screen is intact.
        assert "Done" in written and "cleared" in written and "end" in written
        assert app.screen.query_one("#prompt") is not None
    saved = store.messages(store.chats()[0].id)
    assert any("Done" in m.content for m in saved)  # the store keeps the reply


def test_a_stored_reply_with_escapes_is_shown_clean(store):
    from app.tui.widgets.message_view import MessageView

    view = MessageView("assistant", text="old \x1b]52;c;eA==\x07reply", thinking="\x1b[2Jthought")
    assert view.answer == "old reply" and view.thinking == "thought"


def test_a_command_awaiting_consent_shows_its_escapes_instead_of_obeying_them():
    from app.tui.screens.consent import ConsentScreen
    from app.tui.widgets.tool_line import ToolLine, call_title

    screen = ConsentScreen("Run this command?", "echo hi\x1b[2K\x1b[1Grm -rf ~", None)
    assert "\x1b" not in screen.body and "␛[2K" in screen.body and "rm -rf ~" in screen.body
    assert "\x1b" not in call_title("run_command", '{"command": "ls\\u001b]52;c;eA==\\u0007"}')
    line = ToolLine("run_command", "{}", result="\x1b[31mred\x1b[0m")
    assert line.result == "red"
