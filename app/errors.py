"""Errors meant for people: one line of cause, one line of what to do.

Every failure a user can cause or meet (bad name, no network, full disk, bad
checksum) is raised as a DspineError subclass. The CLI prints `cause` and
`fix` and exits with `exit_code`; only `--debug` shows a traceback. The
engines (`backends/`) raise their own BackendError, shaped the same way; the CLI
and the chat catch both through ERRORS_FOR_PEOPLE.
"""

from __future__ import annotations

from backends.errors import BackendError


class DspineError(Exception):
    exit_code = 1

    def __init__(self, cause: str, fix: str = "") -> None:
        super().__init__(cause)
        self.cause = cause
        self.fix = fix


class UsageError(DspineError):
    """The user named something that does not exist or asked something invalid."""

    exit_code = 2


class NotFoundError(DspineError):
    """A repository, revision or file the user asked for is not on the hub."""

    exit_code = 3


class AuthError(DspineError):
    """A gated or private repository and no (or a wrong) token."""

    exit_code = 4


class NetworkError(DspineError):
    """The hub cannot be reached, or offline mode is on and nothing is cached."""

    exit_code = 5


class DiskFullError(DspineError):
    exit_code = 6


class ChecksumError(DspineError):
    exit_code = 7


class ConfigError(DspineError):
    exit_code = 8


class ConversionError(DspineError):
    """A safetensors drafter the converter refuses: a config field or tensor it does not
    know, a tensor missing, a vocabulary that differs from the target's."""

    exit_code = 12


class Interrupted(DspineError):
    """Ctrl-C or SIGTERM during long work; what was done is kept."""

    exit_code = 130


# Everything shown to people as cause and fix (and ended with its exit code).
ERRORS_FOR_PEOPLE = (DspineError, BackendError)
