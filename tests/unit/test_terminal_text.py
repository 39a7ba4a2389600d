"""Model text printed by `dspine run` cannot drive the terminal (issue 14, item 11)."""

from __future__ import annotations

import pytest

from app.terminal_text import for_terminal


@pytest.mark.parametrize(
    "evil",
    [
        "\x1b]52;c;aGVsbG8=\x07",  # OSC 52: write the clipboard
        "\x1b]52;c;aGVsbG8=\x1b\\",
        "\x1b[2J\x1b[H",  # clear the screen, home
        "\x1b]0;owned\x07",  # window title
        "\x1bPq#0;2;0;0;0\x1b\\",  # DCS (sixel)
        "\x9b2J",  # 8-bit CSI
        "\x07\x08\x0d",  # bell, backspace, carriage return
    ],
)
def test_escape_sequences_and_controls_are_removed(evil):
    cleaned = for_terminal(f"a{evil}b\n\tc")
    assert cleaned == "ab\n\tc"


def test_ordinary_text_and_unicode_pass_unchanged():
    text = "def f(x):\n\treturn x  # ünïcode → ok 🙂"
    assert for_terminal(text) == text
