"""CLI choices are Literal types (issue 26, item 5): typer lists them in --help and
refuses any other word with dspine's two lines and exit 2; shared options are one
declaration; End.reason is a closed set too."""

from __future__ import annotations

import pytest
import typer

from app.cli import app, run
from app.errors import UsageError
from backends.events import END_REASONS, end_reason


@pytest.fixture(autouse=True)
def no_user_settings(tmp_path, monkeypatch):
    """An error report reads the setting `debug`: from an empty file, not this machine's."""
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("DSPINE_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.delenv("DSPINE_DEBUG", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


@pytest.mark.parametrize(
    ("argv", "option", "choices"),
    [
        (["run", "m", "hi", "--think", "maybe"], "'--think'", "'on', 'off'"),
        (["run", "m", "hi", "--engine", "cloud"], "'--engine'", "'auto', 'server', 'inproc', 'remote'"),
        (["chat", "--engine", "cloud"], "'--engine'", "'auto', 'server', 'inproc', 'remote'"),
        (["chat", "--think", "1"], "'--think'", "'on', 'off'"),
        (["chat", "--mode", "auto"], "'--mode'", "'ask', 'accept-edits', 'plan'"),
        (["bench", "--engine", "cloud"], "'--engine'", "'auto', 'server', 'inproc', 'remote'"),
        (["tune", "m", "--engine", "remote"], "'--engine'", "'server', 'inproc'"),
        (["bench", "--think", "all"], "'--think'", "'on', 'off', 'both'"),
        (["fit", "m", "--goal", "fastest"], "'--goal'", "'speed', 'context'"),
        (["fit", "m", "--kv", "q2"], "'--kv'", "'f16', 'q8_0', 'q4_0'"),
        (["serve", "m", "--think", "yes"], "'--think'", "'on', 'off'"),
    ],
)
def test_a_word_outside_the_choices_is_refused_plainly(capsys, argv, option, choices):
    assert run(argv) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert f"error: Invalid value for {option}" in said.err and f"is not one of {choices}" in said.err
    assert f"fix: see `dspine {argv[0]} --help`" in said.err
    assert "unexpected" not in said.err and "Traceback" not in said.err and "Value error" not in said.err


def test_other_command_line_mistakes_exit_2_with_the_same_two_lines(capsys):
    assert run(["run"]) == 2
    assert "error: run needs a prompt" in capsys.readouterr().err
    assert run(["list", "--bogus"]) == 2
    assert "error: No such option: --bogus" in capsys.readouterr().err
    assert run(["nosuch"]) == 2
    assert "error: No such command 'nosuch'." in capsys.readouterr().err
    assert run(["run", "m", "hi", "--debug", "--think", "maybe"]) == 2  # --debug: the traceback too
    assert "Traceback" in capsys.readouterr().err


def test_help_shows_the_choices(capsys):
    assert run(["fit", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "speed|context" in shown and "f16|q8_0|q4_0" in shown


def _options(command: str) -> dict[str, object]:
    group = typer.main.get_command(app)
    found = group.commands[command].params  # type: ignore[attr-defined]
    return {name: param for param in found for name in param.opts}


SHARED = {  # option -> the commands that take the same option (serve's --api-key is its own key)
    "--draft": ("run", "chat", "serve"),
    "--engine": ("run", "chat", "bench"),
    "--url": ("run", "chat", "bench"),
    "--api-key": ("run", "chat", "bench"),
    "--model": ("chat", "bench"),
}


def test_shared_options_are_one_declaration():
    for name, users in SHARED.items():
        declared = {(_options(c)[name].help, tuple(_options(c)[name].opts)) for c in users}  # type: ignore[attr-defined]
        assert len(declared) == 1, (name, declared)


def test_end_reasons_are_a_closed_set():
    assert END_REASONS == ("stop", "length", "cancelled", "tool_calls", "loop")
    for reason in END_REASONS[:-1]:
        assert end_reason(reason) == reason
    assert end_reason("loop") == "stop"  # dspine's own word (a loop it stopped), never a server's
    assert end_reason("function_call") == "tool_calls"  # OpenAI's older name
    assert end_reason("content_filter") == "stop"


def test_auto_is_a_llama_server_where_one_is_found_else_in_process(monkeypatch):
    """Issue 47, dead end 3: every command defaulted to llama-server, which a plain
    `pip install -e .` does not bring; `auto` falls back to the in-process engine."""
    from app.run import engines
    from app.settings import load_settings
    from backends.base import EngineError

    settings = load_settings()
    monkeypatch.setattr(engines, "llama_server_binary", lambda s: (_ for _ in ()).throw(EngineError("none", "x")))
    assert engines.engine_for(None, settings) == "inproc"
    assert engines.engine_for(None, settings, url="http://127.0.0.1:9/v1") == "remote"
    assert engines.engine_for("server", settings) == "server"  # what the user asked for, as asked
    monkeypatch.setattr(engines, "llama_server_binary", lambda s: "/usr/bin/llama-server")
    assert engines.engine_for(None, settings) == "server"
    monkeypatch.setenv("DSPINE_ENGINE", "inproc")
    assert engines.engine_for(None, load_settings()) == "inproc"
    # a URL given without --engine is where the engine is, whatever the setting says
    assert engines.engine_for(None, load_settings(), url="http://127.0.0.1:9/v1") == "remote"
    with pytest.raises(UsageError, match="--url with --engine server"):
        engines.engine_for("server", load_settings(), url="http://127.0.0.1:9/v1")
