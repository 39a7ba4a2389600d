"""Issue 37: the model is named the same way on every command (`--model`, as chat and
bench take it, on run, serve and fit too) and the drafter too (`--draft`, the older
`--drafter` and `--drafters` kept as aliases)."""

from __future__ import annotations

import json
import subprocess

import httpx2

from tests.conftest import dspine_cmd
from tests.support.serve_harness import ServeProcess


def test_run_takes_the_model_as_an_option(dspine, models):
    files = models["dense"]
    done = dspine(
        "run",
        "--model",
        str(files["target"]),
        "def add(a, b):",
        "-n",
        "4",
        "--engine",
        "inproc",
        "--json",
        "--temp",
        "0",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stats"]["generated_tokens"] == 4
    twice = dspine("run", str(files["target"]), "--model", str(files["same"]), "hi")
    assert twice.returncode == 2 and "two models given" in twice.stderr
    alone = dspine("run", "--model", str(files["target"]))
    assert alone.returncode == 2 and "run needs a prompt" in alone.stderr


def test_bench_takes_the_drafter_as_draft(dspine, models, tmp_path):
    files = models["dense"]
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"messages": [{"role": "user", "content": "def add(a, b):"}], "category": "code"}))
    done = dspine(
        "bench",
        "--repeat",
        "1",
        "--model",
        str(files["target"]),
        "--draft",
        str(files["same"]),
        "--engine",
        "inproc",
        "--prompts",
        str(chats),
        "--max-tokens",
        "8",
        "--n-max",
        "2",
        "--no-adaptive",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    drafters = {row["drafter"] for row in json.loads(done.stdout)}
    assert files["same"].name in drafters and "plain" in drafters


def test_serve_takes_the_model_as_an_option(env, models):
    files = models["dense"]
    served = ServeProcess(env, "--model", str(files["target"]), "--ctx", "1024")
    try:
        listed = httpx2.get(served.url + "/models", timeout=30).json()
        assert listed["data"][0]["id"] == "dense-target"
        assert served.stop() == 0
    finally:
        served.process.kill()


def test_fit_and_pull_take_model_and_draft_like_the_rest(dspine, hub, models):
    planned = dspine("fit", "--model", str(models["dense"]["target"]), "--draft", "none", "--json", "--no-measure")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["settings"]["target_file"] == str(models["dense"]["target"])
    pulled = dspine("pull", "qwen3.8-27b", "--draft", "mtp")
    assert pulled.returncode == 0, pulled.stderr
    assert "drafter mtp" in pulled.stdout


def test_a_model_file_name_is_shown_as_text_never_as_terminal_codes_or_markup(dspine, models, tmp_path):
    """A file name is data: `run` printed a GGUF named with an ESC sequence raw (the terminal
    obeyed it) and took `[bold red]...` in it for Rich markup (the brackets vanished)."""
    hostile = tmp_path / "evil\x1b[31mRED\x1b]0;pwned\x07[bold red]x[link=http:x]y.gguf"
    hostile.symlink_to(models["dense"]["target"])
    done = dspine("run", str(hostile), "hi", "-n", "2", "--engine", "inproc", "--temp", "0")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr + done.stdout and "\x07" not in done.stderr
    shown = dspine("tune", str(hostile), "--show", "--engine", "inproc")
    assert "\x1b" not in shown.stdout + shown.stderr and "\x07" not in shown.stdout + shown.stderr
    assert "evil␛[31mRED␛]0;pwned␇[bold red]x[link=http:x]y.gguf" in shown.stdout, shown.stdout + shown.stderr


def test_a_prompt_that_is_empty_or_not_utf8_is_refused_before_the_engine_starts(dspine, env, models):
    """`run ""` sent an empty prompt to the model; a byte that is not UTF-8 (on the command
    line or piped) ended in "unexpected UnicodeEncodeError"."""
    target = str(models["dense"]["target"])
    for prompt in ("", "   "):
        empty = dspine("run", target, prompt)
        assert empty.returncode == 2 and "run got an empty prompt" in empty.stderr, empty.stderr
    for how in (("run", target, "hi \udcff there"), ("chat", "-p", "hi \udcff there", "--model", target)):
        bad = dspine(*how)
        assert bad.returncode == 2, bad.stderr
        assert "the prompt is not UTF-8 text" in bad.stderr and "unexpected" not in bad.stderr
    piped = subprocess.run(
        dspine_cmd("run", target, "-"), env=env, input=b"caf\xe9 au lait", capture_output=True, timeout=120
    )
    said = piped.stderr.decode()
    assert piped.returncode == 2 and "at character 4" in said and "unexpected" not in said, said


def test_a_folder_dspine_cannot_write_is_named_with_the_setting_that_moves_it(dspine, models, tmp_path):
    """A read-only home made `serve` (and `run --engine server`, `tune`) end in "unexpected
    OSError" when the log folder could not be made; and `--debug`, which the fix line of such
    an error asks for, was refused after the command ("No such option")."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    done = dspine("serve", str(models["dense"]["target"]), extra_env={"DSPINE_LOG_DIR": str(blocker / "logs")})
    assert done.returncode == 1, done.stderr
    assert f"cannot use {blocker / 'logs'}" in done.stderr and "DSPINE_LOG_DIR" in done.stderr
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr
    debug = dspine("run", str(tmp_path / "missing.gguf"), "hi", "--debug")
    assert debug.returncode == 2 and "No such option" not in debug.stderr and "Traceback" in debug.stderr


def test_a_folder_given_as_the_model_is_called_a_folder(dspine, tmp_path):
    """`run dir.gguf` said the file "does not exist"; `run /some/folder` called it "not a
    repository name"."""
    for folder in (tmp_path / "dir.gguf", tmp_path / "somedir"):
        folder.mkdir()
        done = dspine("run", str(folder), "hi")
        assert done.returncode == 2 and f"the model {folder} is a folder, not a GGUF file" in done.stderr


def test_text_piped_in_with_a_prompt_goes_after_the_prompt(dspine, env, models):
    """`git diff | dspine run M "review this"` answered as if nothing were piped: the piped
    text was dropped without a word. It goes after the prompt, as `claude -p` and `llm` take it."""
    target = str(models["dense"]["target"])
    base = ("run", target, "summarize", "-n", "1", "--engine", "inproc", "--json", "--temp", "0")
    alone = dspine(*base)
    assert alone.returncode == 0, alone.stderr
    piped = subprocess.run(dspine_cmd(*base), env=env, input=b"EXTRA CONTEXT " * 20, capture_output=True, timeout=120)
    assert piped.returncode == 0, piped.stderr.decode()
    before = json.loads(alone.stdout)["stats"]["prompt_tokens"]
    assert json.loads(piped.stdout)["stats"]["prompt_tokens"] >= before + 20


def test_a_drafter_asked_of_a_model_not_pulled_goes_into_the_pull_the_fix_names(dspine):
    """`--draft dspine` on a fresh machine: the pull to run is the one that makes that drafter
    (the bundle's default drafter is another), not the plain pull."""
    result = dspine("run", "smollm2-135m", "hi", "--draft", "dspine")
    assert result.returncode != 0
    assert "smollm2-135m is not pulled" in result.stderr
    assert "dspine pull smollm2-135m --draft dspine" in result.stderr
    plain = dspine("run", "smollm2-135m", "hi")
    assert "dspine pull smollm2-135m`" in plain.stderr  # nothing asked for: the plain pull
