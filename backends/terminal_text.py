"""Model text made safe for a terminal: no escape sequences, no control characters.

A model (or a prompt that steers it) can emit OSC 52 (write the clipboard), screen
clears or title changes; printed raw, the terminal obeys. Newlines and tabs stay.
"""

from __future__ import annotations

import re

# OSC ... BEL/ST, DCS/SOS/PM/APC ... ST, CSI ... final byte, then any other ESC pair.
_SEQUENCES = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# Bidirectional overrides, embeddings and isolates: they draw text in another order than it is
# (a "Trojan Source" line of code reads one way and runs another), so a reply names them.
_REORDERING = re.compile("[\u202a-\u202e\u2066-\u2069]")


def for_terminal(text: str) -> str:
    shown = _CONTROLS.sub("", _SEQUENCES.sub("", text))
    return _REORDERING.sub(lambda m: f"<U+{ord(m.group()):04X}>", shown)


def _symbol(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ESC shows as ␛
    return "\u2421" if code == 0x7F else f"<{code:#04x}>"


def controls_shown(text: str) -> str:
    """Control characters made visible (ESC as ␛), for text the user must judge as it
    is, such as a command awaiting consent: stripping would hide what would run."""
    return _CONTROLS.sub(_symbol, text)


# Characters that move or hide text without being control characters: line and paragraph
# separators, bidirectional overrides and isolates (text drawn in another order than it
# runs), zero-width characters.
_INVISIBLE = re.compile("[\u2028\u2029\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def one_line(text: str) -> str:
    """Outside text as one visible line, for a question the user answers: line breaks and
    tabs shown as symbols (␊, ␉) so a name cannot draw lines of its own (a fake entry, a fake
    "y/n"), and invisible or reordering characters named (<U+202E>)."""
    shown = controls_shown(text.replace("\n", "\u240a").replace("\t", "\u2409"))
    return _INVISIBLE.sub(lambda m: f"<U+{ord(m.group()):04X}>", shown)
