"""Errors meant for people, raised by the engines: one line of cause, one of what
to do, and the exit code a command line should end with.

The engines are a library that imports nothing from `app/`, so they carry their
own base. dspine's CLI catches it next to the app's DspineError and prints both
the same way.
"""

from __future__ import annotations


class BackendError(Exception):
    exit_code = 1

    def __init__(self, cause: str, fix: str = "") -> None:
        super().__init__(cause)
        self.cause = cause
        self.fix = fix


class EngineError(BackendError):
    """An engine could not start or run: a missing binary, a model that will not load."""

    exit_code = 11


class ContextFull(EngineError):
    """The prompt, or the reply growing after it, does not fit in the context: the caller
    may shorten the conversation and try again."""


class GgufError(BackendError):
    """Not a GGUF file, or a damaged one."""

    exit_code = 9


class ChatTemplateError(BackendError):
    """A model's own chat template failed to render.

    Exit 11 like every other model that loads but cannot be used (a drafter whose
    vocabulary differs, a file llama-server refuses): the file reads as a GGUF, so
    not 9, and the fix is another model file, so not a usage error."""

    exit_code = 11


class RemoteUnreachable(EngineError):
    """Nothing answers at a remote engine's URL (refused, timed out): the same code as a hub
    out of reach."""

    exit_code = 5


class RemoteRefused(EngineError):
    """A remote server needs an API key, or refused the one given."""

    exit_code = 4


class RemoteNotOpenAI(EngineError):
    """Something answers at the URL, but not as an OpenAI-compatible server. (13 is
    `chat -p`'s "a tool call was denied".)"""

    exit_code = 14


class RemoteModelUnknown(EngineError):
    """The remote server does not serve the model asked for (or serves several and none was named)."""

    exit_code = 2


class RemoteBadUrl(EngineError):
    """--url is not an http(s) URL."""

    exit_code = 2
