"""`dspine tune` as a user runs it: it measures, prints what it measured and what it picked,
saves it; `run` then starts with the pick and names it; `--show` prints it back, a changed
model file makes it stale (said, and not used); `--reset` forgets it."""

from __future__ import annotations

import json
import os

from tests.support.gguf_models import chat_model, write_model


def test_tune_then_run_show_stale_and_reset(dspine, tmp_path):
    model = write_model(tmp_path / "chat.gguf", chat_model(n_layer=1, n_embd=64))
    inproc = ("--engine", "inproc")

    tuned = dspine("tune", str(model), *inproc, "--rounds", "1", "--max-tokens", "8", timeout=300)
    assert tuned.returncode == 0, tuned.stderr[-2000:]
    assert "dspine tune: chat.gguf, inproc" in tuned.stdout and "1 rounds" not in tuned.stdout
    # The hint names the model as it was given (a bare `dspine tune --reset` tunes the default).
    assert f"`dspine tune {model} --reset` forgets it" in tuned.stdout
    assert "n-gram" in tuned.stdout and "plain" in tuned.stdout  # both rows measured
    picked = next(line for line in tuned.stdout.splitlines() if line.startswith("picked "))
    saved = json.loads((tmp_path / "data" / "dspine" / "tunes.json").read_text())
    (entry,) = saved.values()
    assert entry["summary"] in picked and entry["table"]

    ran = dspine("run", str(model), *inproc, "-n", "4", "--think", "off", "--json", "hi")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads(ran.stdout)["stats"]["drafting"].startswith("tuned: ")

    shown = dspine("tune", str(model), *inproc, "--show")
    assert shown.returncode == 0 and entry["summary"] in shown.stdout and "stale" not in shown.stdout

    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the file changed since the tune
    stale = dspine("run", str(model), *inproc, "-n", "4", "--think", "off", "hi")
    assert stale.returncode == 0
    assert "was measured with other model files: run `dspine tune` again" in stale.stderr
    assert "tuned:" not in stale.stderr
    assert "stale: measured with other model files" in dspine("tune", str(model), *inproc, "--show").stdout

    assert "forgot the tune for chat.gguf" in dspine("tune", str(model), *inproc, "--reset").stdout
    assert "no tune for chat.gguf" in dspine("tune", str(model), *inproc, "--show").stdout


def test_a_remote_engine_is_not_tuned(dspine, tmp_path):
    model = write_model(tmp_path / "chat.gguf", chat_model(n_layer=1, n_embd=64))
    refused = dspine("tune", str(model), "--engine", "remote")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr


def test_a_model_file_name_is_never_markup_in_the_tune_table(dspine, tmp_path):
    """From review: a file name in brackets was read as markup (`[bold]` vanished, `[/x]` raised)."""
    model = write_model(tmp_path / "m[bold]x.gguf", chat_model(n_layer=1, n_embd=64))
    tuned = dspine("tune", str(model), "--engine", "inproc", "--rounds", "1", "--max-tokens", "4", timeout=300)
    assert tuned.returncode == 0, tuned.stderr[-2000:]
    assert "m[bold]x.gguf" in tuned.stdout
    shown = dspine("tune", str(model), "--engine", "inproc", "--show")
    assert shown.returncode == 0 and "m[bold]x.gguf" in shown.stdout, shown.stderr[-2000:]


def test_tune_show_names_the_command_for_this_model_and_show_with_reset_is_refused(dspine, tmp_path):
    model = write_model(tmp_path / "chat.gguf", chat_model(n_layer=1, n_embd=64))
    shown = dspine("tune", str(model), "--engine", "inproc", "--show")
    assert shown.returncode == 0 and f"`dspine tune {model}` makes one" in shown.stdout, shown.stdout
    both = dspine("tune", str(model), "--engine", "inproc", "--show", "--reset")
    assert both.returncode == 2 and "--show and --reset together" in both.stderr


def test_tune_off_a_terminal_under_a_load_spike_prints_progress_and_its_table(env, real, tmp_path):
    """Issue 68: `dspine tune` with its output going to files (not a terminal), and a load that
    comes once it has started (busy programs on every core at nice 0, bounded by the test,
    killed by their PIDs): progress lines reach the file while it runs, the measurement the
    load came into is made again (its runs before and after the load are not alike), and the
    table is printed at the end, saved or refused. The real SmolLM2, whose speed a load changes."""
    import subprocess

    from backends.threads import physical_cores
    from tests.conftest import ROOT, dspine_cmd, wait_for
    from tests.support.busy import busy

    out, err = tmp_path / "tune.out", tmp_path / "tune.err"
    command = dspine_cmd("tune", str(real["q4"]), "--engine", "inproc", "--rounds", "1", "--max-tokens", "16")
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        try:
            wait_for(lambda: "run 1/" in err.read_text() or process.poll() is not None, timeout=120, what="progress")
            assert "run 1/" in err.read_text(), err.read_text()[-2000:]  # said while it runs, not at its end
            with busy(physical_cores()):
                code = process.wait(timeout=300)
        finally:
            process.kill()
    said, table = err.read_text(), " ".join(out.read_text().split())
    assert code in (0, 2), said[-2000:]  # saved, or refused because the speeds wandered
    assert "tuning: " in said and " runs" in said
    assert "measuring again" in said and "other programs kept" in said, said[-2000:]
    assert "│ plain" in table and "n-gram" in table, table[-2000:]
    assert ("picked " in table) if code == 0 else ("(not saved: the speeds wandered)" in table)
