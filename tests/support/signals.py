"""Signals for the processes tests start."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """A child that a test stops with SIGINT gets SIGINT's default handling (Python's
    KeyboardInterrupt), whatever the test runner inherited: a shell without job control
    starts a background job (`cmd &`) with SIGINT ignored, its children inherit that, and
    Python keeps a SIGINT it finds ignored. Pass as `preexec_fn`."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
