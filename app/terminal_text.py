"""Text from outside made safe for a terminal. The one home is backends/terminal_text.py, so
the engines (a remote server's words) and the app use the same rules; the app's modules
import it from here."""

from backends.terminal_text import controls_shown, for_terminal, one_line

__all__ = ["controls_shown", "for_terminal", "one_line"]
