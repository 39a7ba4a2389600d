"""The one way the chat puts outside text on screen: as text, never as markup.

A tool's arguments, an MCP tool's or server's name, a file name, a model's name, a
project's command file: any of them can hold Textual markup. Parsed, `[@click=...]`
turns a harmless-looking line into a button that runs an app action (a click on
`read_file README.md` once overwrote a file with a screenshot). Widgets that show such
text take a `Content` built here: the text as it is, its control characters made
visible, and any style the caller adds around it, not inside it.
"""

from __future__ import annotations

from textual.content import Content

from ..terminal_text import controls_shown


def plain(text: str, style: str = "") -> Content:
    """`text` exactly as written (control characters shown as symbols), optionally styled whole."""
    content = Content(controls_shown(text))
    return content.stylize(style) if style else content


def joined(*parts: str | Content) -> Content:
    """Pieces in a row: a `str` is outside text (made `plain`), a `Content` is the caller's own."""
    return Content.assemble(*(part if isinstance(part, Content) else plain(part) for part in parts))


def markdown_code(text: str) -> str:
    """`text` as one Markdown code span, whatever backticks it holds (a command file's
    `argument-hint` cannot close the span and add a link or a heading)."""
    text = controls_shown(text).replace("\n", " ")
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"
