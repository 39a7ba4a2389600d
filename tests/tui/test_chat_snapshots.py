"""Snapshots of the chat's main screens (SVG files in tests/tui/__snapshots__;
`pytest --snapshot-update` rewrites them after an intended change)."""

from __future__ import annotations

import time

import pytest

from app.fit.hardware import Hardware
from app.tui.app import ChatApp
from app.tui.screens.first_run import FirstRun
from app.tui.widgets.conversation import Conversation
from tests.support.scripted_engine import ScriptedEngine

SIZE = (100, 30)
STATS = {
    "prompt_tokens": 40,
    "prompt_s": 0.05,
    "generated_tokens": 120,
    "decode_s": 1.2,
    "ttft_s": 0.08,
    "drafted": 150,
    "accepted": 110,
    "verify_steps": 35,
}


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    # The same screen on every machine: the GPU readout is the only hardware on it.
    monkeypatch.setattr("app.tui.app.detect", lambda: Hardware([], 0, 0, "none"))


def test_empty_chat(snap_compare, store):
    assert snap_compare(ChatApp(ScriptedEngine(), store, model="qwen3.8-27b"), terminal_size=SIZE)


def test_chat_with_a_finished_reply(snap_compare, store):
    chat = store.new_chat("reverse a string")
    store.add_message(chat.id, "user", "Write a C function that reverses a string in place.")
    reply = store.add_message(chat.id, "assistant", "", complete=False)
    store.update_message(
        reply,
        "Here it is:\n\n```c\nvoid reverse(char *s) {\n    size_t n = strlen(s);\n"
        "    for (size_t i = 0; i < n / 2; i++) {\n"
        "        char t = s[i]; s[i] = s[n - 1 - i]; s[n - 1 - i] = t;\n    }\n}\n```\n",
        "Swap from both ends.",
        STATS,
        complete=True,
    )

    async def drawn(pilot):
        # A chat opens with its messages asleep; those in view wake right after the first layout.
        # Its context is counted in the background as it opens: the meter fills once that is done.
        conversation = pilot.app.query_one(Conversation)
        meter = pilot.app.query_one("#context")
        deadline = time.monotonic() + 5
        while not (conversation.drawn and str(meter.render()).strip()) and time.monotonic() < deadline:
            await pilot.pause(0.02)

    app = ChatApp(ScriptedEngine(), store, model="qwen3.8-27b")
    assert snap_compare(app, terminal_size=SIZE, run_before=drawn)


def test_first_run_screen(snap_compare, store):
    first_run = FirstRun(
        "qwen3.8-27b (drafter dflash2-q4)",
        lambda: "Fits: Q4_K_M + dflash2-q4, context 77,824, KV f16, 23.9 GiB of 24.0 GiB",
        lambda progress: None,
        small=("smollm2-135m", "a small model that runs on any CPU (94 MB, from the Python package index)"),
        pull_small=lambda progress: None,
        local_file=str,
    )

    async def settle(pilot):
        await pilot.pause(0.2)

    app = ChatApp(None, store, first_run=first_run)
    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_chat_list(snap_compare, store):
    for title in ("reverse a string", "explain a segfault", "write tests for parse()"):
        store.new_chat(title, model="qwen3.8-27b")

    async def open_list(pilot):
        await pilot.press("ctrl+l")
        await pilot.pause(0.2)

    assert snap_compare(ChatApp(ScriptedEngine(), store), terminal_size=SIZE, run_before=open_list)
