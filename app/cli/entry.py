"""The console script: run a command, report what went wrong in words (a traceback only with
--debug), return the exit code."""

from __future__ import annotations

import os
import sys

import typer

from ..errors import ERRORS_FOR_PEOPLE, Interrupted
from .base import (
    _debug,
    _report,
    app,
)


def _report_usage(exc: typer.TyperException) -> int:
    """What typer refused, in dspine's two lines; its exit code (2 for a bad command line)."""
    cause = exc.format_message().replace("Value error, ", "")  # pydantic's prefix says nothing here
    if not cause:  # `dspine` alone: the help is shown, nothing went wrong to say
        return exc.exit_code
    context = getattr(exc, "ctx", None)
    command = context.command_path if context is not None else "dspine"
    return _report(exc, exc.exit_code, cause, f"see `{command} --help`")


def _debug_first(argv: list[str]) -> list[str]:
    """`--debug` anywhere among the options (as the errors' fix line puts it after the command)
    moved to where the CLI takes it, before the command; a `--debug` after `--` is an argument."""
    end = argv.index("--") if "--" in argv else len(argv)
    if "--debug" not in argv[:end]:
        return argv
    return ["--debug", *(a for a in argv[:end] if a != "--debug"), *argv[end:]]


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return an exit code; errors become two lines for people."""
    argv = _debug_first(list(sys.argv[1:] if argv is None else argv))
    _debug["on"] = "--debug" in argv  # else the setting `debug` decides, when an error comes
    from backends.cpu_repack import forget_empty  # here: its HTTP client would slow every start

    forget_empty(os.environ)  # before any llama-server runs, --help included
    try:
        result = app(args=argv, prog_name="dspine", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except ERRORS_FOR_PEOPLE as exc:
        return _report(exc, exc.exit_code, exc.cause, exc.fix)
    except typer.TyperException as exc:  # typer's parsing: a value not among the choices, a missing argument
        return _report_usage(exc)
    except typer.Exit as exc:
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort) as exc:
        return _report(exc, Interrupted.exit_code, "interrupted", "")
    except OSError as exc:
        if exc.filename is None:
            return _unexpected(exc)
        # A file or folder that could not be used: a read-only home, a full disk, its permissions.
        where = exc.filename if exc.filename2 is None else f"{exc.filename} -> {exc.filename2}"
        return _report(
            exc,
            1,
            f"cannot use {where}: {exc.strerror or exc}",
            "make that folder writable (or free some space), or move dspine's folders with DSPINE_DATA_DIR, "
            "DSPINE_CACHE_DIR and DSPINE_LOG_DIR (`dspine config` shows where they are)",
        )
    except Exception as exc:
        return _unexpected(exc)


def _unexpected(exc: BaseException) -> int:
    return _report(
        exc, 1, f"unexpected {type(exc).__name__}: {exc}", "run again with --debug for the traceback, and report it"
    )


def main() -> None:
    sys.exit(run())
