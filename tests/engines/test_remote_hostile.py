"""A remote server that misbehaves or lies (issue 50's hostile trial): it trickles or floods
its answers, its counters move with other clients' requests, its words carry escapes and
markup; the key a user gives is checked before anything is sent."""

from __future__ import annotations

import time

import pytest

from app.key_files import key_problem
from backends.errors import RemoteNotOpenAI, RemoteUnreachable
from backends.events import End
from backends.remote import RemoteEngine
from backends.remote_info import said
from backends.sampling import Sampling
from backends.spec_metrics import Counters, fits_one_reply
from backends.stats import Stats
from tests.support.remote_servers import shaped_server

HELLO = [{"role": "user", "content": "hello"}]


def test_a_trickling_listing_is_an_error_within_the_probe_timeout():
    with shaped_server(trickle_models=True) as served:
        started = time.monotonic()
        with pytest.raises(RemoteUnreachable, match="did not answer within 2 s"):
            RemoteEngine.connect(served.url, read_timeout_s=2.0)
        assert time.monotonic() - started < 15


def test_a_flood_is_refused_at_the_size_cap():
    with shaped_server(huge_models=True) as served, pytest.raises(RemoteNotOpenAI, match="sent more than 8 MB"):
        RemoteEngine.connect(served.url)


def test_a_metrics_page_that_never_ends_costs_a_bounded_wait_and_no_figures():
    with shaped_server(endless_metrics=True) as served:
        started = time.monotonic()
        engine = RemoteEngine.connect(served.url, read_timeout_s=2.0)
        try:
            assert not engine.server.counters
            events = list(engine.stream(HELLO, sampling=Sampling(temperature=0.0)))
        finally:
            engine.close()
        assert time.monotonic() - started < 20
    assert isinstance(events[-1], End) and events[-1].stats.draft_note == "acceptance not reported by this server"


def test_counters_moved_by_other_clients_are_not_shown_as_this_replys():
    with shaped_server(others_per_reply=2) as served:
        engine = RemoteEngine.connect(served.url)
        try:
            stats = list(engine.stream(HELLO, sampling=Sampling(temperature=0.0)))[-1].stats
        finally:
            engine.close()
    assert stats.drafted == 0 and "other requests moved the server's counters" in stats.draft_note
    assert "acceptance not shown" in stats.summary() and "no drafter" not in stats.summary()
    assert fits_one_reply(Counters(4, 12, 6), 11) and not fits_one_reply(Counters(12, 36, 18), 11)


def test_a_servers_words_are_shown_as_visible_text_and_bounded():
    hostile = "\x1b[31mRED\x1b]0;TITLE\x07[bold red]M[/]" + "x" * 300
    shown = said(hostile)
    assert "\x1b" not in shown and "\x07" not in shown and "\u241b" in shown
    assert len(shown) <= 120 and shown.endswith("\u2026")


def test_a_key_outside_ascii_is_refused_before_it_is_sent():
    assert key_problem("k\u00e9y") == "a key with characters outside ASCII, which an HTTP header cannot carry"
    assert key_problem("plain-key") is None


def test_stats_say_the_note_instead_of_no_drafter():
    stats = Stats(generated_tokens=3, decode_s=1.0, draft_note="acceptance not reported by this server")
    assert stats.summary().endswith("acceptance not reported by this server")
