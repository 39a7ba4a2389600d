"""`dspine chat` in a real terminal (tmux), the way the README runs it, on a
generated model with llama-server; the screen is printed into the test log."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import psutil
import pytest

from tests.conftest import ROOT, dspine_cmd, wait_for

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def test_chat_in_tmux(env, models, tmp_path):
    files = models["dense"]
    session = f"dspine-test-{tmp_path.name}"
    variables = {
        k: env[k]
        for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "DSPINE_MODELS_DIR", "HOME")
        if k in env
    }
    variables["DSPINE_CHATS_DB"] = str(tmp_path / "chats.db")
    command = " ".join(
        shlex.quote(part)
        for part in dspine_cmd(
            "chat",
            "--model",
            str(files["target"]),
            "--draft",
            str(files["same"]),
            "--think",
            "off",
            "--ctx",
            "2048",
        )
    )
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "110", "-y", "32", "-c", str(ROOT)], check=True)
    try:
        subprocess.run(["tmux", "send-keys", "-t", session, f"env {exports} {command}", "Enter"], check=True)
        wait_for(lambda: "Ask about code" in screen(session), timeout=60, what="the chat to open")
        subprocess.run(["tmux", "send-keys", "-t", session, "Write hello world in C", "Enter"], check=True)
        wait_for(lambda: "accept len" in screen(session), timeout=60, what="live figures")
        subprocess.run(["tmux", "send-keys", "-t", session, "Escape"], check=True)
        wait_for(
            lambda: "tokens ·" in screen(session) or "cancelled" in screen(session),
            timeout=30,
            what="the stopped reply",
        )
        shown = screen(session)
        print("\n--- dspine chat in tmux ---\n" + shown)
        assert "Write hello world in C" in shown and "think off" in shown and "draft" in shown
        pane = int(
            subprocess.run(
                ["tmux", "display", "-p", "-t", session, "#{pane_pid}"], capture_output=True, text=True
            ).stdout
        )
        servers_before = [p for p in psutil.Process(pane).children(recursive=True) if p.name() == "llama-server"]
        assert servers_before, "the chat runs its own llama-server"
        subprocess.run(["tmux", "send-keys", "-t", session, "C-q"], check=True)
        wait_for(
            lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in servers_before),
            timeout=30,
            what="llama-server to stop with the chat",
        )
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
