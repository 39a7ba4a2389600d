"""What every command shares: the Typer app, the options more than one command takes, the two
consoles, how an error is reported."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Iterator
from typing import Annotated, cast

import typer
from rich.console import Console
from rich.text import Text

from backends.errors import BackendError

from ..choices import (
    EngineName,
)
from ..errors import DspineError, UsageError
from ..hub.store import Manifest
from ..settings import Settings
from ..terminal_text import controls_shown

app = typer.Typer(
    name="dspine",
    help="Fast local coding models on your own machine (one GPU, or a CPU), with speculative decoding "
    "(DSpine, DFlash2, MTP, copies from the context).",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


# Options more than one command takes, declared once.
MODEL_HELP = (
    "A pulled catalog name or repository, or a .gguf file (default: the model to start with on this machine, "
    "smollm2-135m without a GPU, else the only model pulled)."
)


ModelOption = Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP)]


DraftOption = Annotated[
    str | None, typer.Option("--draft", "-d", help="Drafter: a .gguf file, the pulled variant, or none.")
]


EngineOption = Annotated[
    EngineName | None,
    typer.Option(
        "--engine",
        "-e",
        help="auto (dspine's llama-server if found, else any llama-server, else in process), server "
        "(llama-server), inproc (llama-cpp-python) or remote. Default: the `engine` setting (auto).",
    ),
]


UrlOption = Annotated[str | None, typer.Option("--url", help="Base URL for --engine remote.")]


ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="The remote server's API key, as @FILE (a file only you can read; a key typed here would show "
        "in ps). Default: the DSPINE_API_KEY environment variable.",
    ),
]


# Written to a file or a pipe, a console is 80 columns unless COLUMNS says otherwise, and every
# table was cut there ("spee…", "(103…" in a saved bench): a file has no width, so 200 there.
FILE_WIDTH = 200


def _width(stream) -> int | None:
    return None if os.environ.get("COLUMNS") or stream.isatty() else FILE_WIDTH


out = Console(highlight=False, width=_width(sys.stdout))


err = Console(stderr=True, highlight=False, width=_width(sys.stderr))


_debug = {"on": False}


def _version(value: bool) -> None:
    if value:
        from ..version import package_version

        out.print(f"dspine {package_version()}")
        raise typer.Exit()


@app.callback()
def main_options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    _debug["on"] = _debug["on"] or debug


def _open_manifest(settings: Settings) -> Manifest:
    """The manifest, saying so when a damaged one had to be set aside."""
    manifest = Manifest(settings.manifest_path)
    if manifest.set_aside is not None:
        err.print(
            f"[yellow]warning:[/] the manifest was damaged and was set aside as {manifest.set_aside}; "
            "the model files are untouched: pull each model again to record it (nothing is downloaded twice)"
        )
    return manifest


@contextlib.contextmanager
def _headless_failure(form: str, model: str | None) -> Iterator[None]:
    """chat -p with a JSON output: a refusal before the run starts (a bad option, a chat that
    is not there) ends in the `result` object a script reads, as a failed start does."""
    try:
        yield
    except DspineError as exc:
        if form == "text":
            raise
        raise typer.Exit(_failed_start(exc, form, model)) from None


def _failed_start(exc: DspineError | BackendError, form: str, model: str | None) -> int:
    """A headless run that never started, said on standard error and, for a script reading
    JSON, as its `result` object on standard output; returns the exit code."""
    from ..agent.headless_output import OutputFormat, startup_failure

    code = _report(exc, exc.exit_code, exc.cause, exc.fix)
    sys.stdout.write(json.dumps(startup_failure(cast("OutputFormat", form), exc.cause, exc.fix, code, model)) + "\n")
    return code


def _has_terminal() -> bool:
    """Whether the chat's screen has a terminal to draw on and read keys from (without one it
    drew into a file and waited for keys that never came)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _one_model(positional: str | None, option: str | None) -> str | None:
    """The model named as an argument or with --model (the way every command takes it)."""
    if positional is not None and option is not None and positional != option:
        raise UsageError(f"two models given: {positional} and --model {option}", "give one")
    return option or positional


def _say_warning(warning: str) -> None:
    """What the user must hear before the engine opens (a remote reached over plain http)."""
    err.print(Text.assemble(("warning: ", "yellow"), controls_shown(warning)))


def _report(exc: BaseException, code: int, cause: str, fix: str) -> int:
    from ..settings import wants_traceback

    if _debug["on"] or wants_traceback():
        traceback.print_exception(exc)
    # A path, a value from a file or the environment, or a server's words may hold escapes or
    # brackets: shown as text, never run as markup.
    err.print(Text.assemble(("error: ", "bold red"), controls_shown(cause)), soft_wrap=True)
    if fix:
        err.print(Text.assemble(("fix: ", "bold"), controls_shown(fix)), soft_wrap=True)
    return code
