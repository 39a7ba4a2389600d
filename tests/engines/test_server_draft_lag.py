"""On dspine's patched llama-server a request that drafts nothing (`speculative.n_max: 0`,
what break-even sends for a mode where drafting does not pay) does not feed the draft model:
its cache falls behind the target's. The next request that drafts on that slot first feeds
it the tokens it missed, so it drafts as if it had never stopped: the real SmolLM2 Q8_0
target drafting for itself keeps its drafts and writes what plain decoding writes.

What the drafter read shows in each reply's timings: `draft_tokens_processed` (catch-up
included), `draft_tokens_caught_up` and `draft_tokens_skipped`."""

from __future__ import annotations

import pytest

from backends.llama_server import LlamaServerEngine
from tests.support import self_drafting

USER = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
FIRST = USER.format("Write a Python function that parses a CSV line into fields.")
SECOND = "<|im_end|>\n" + USER.format("Now explain how it handles quotes.")


# One slot (the launch's default), so each turn lands where the one before left its cache; no
# prompt cache in RAM: a state restored from it would bring where its own drafter stopped.
NO_RAM_CACHE = ("--cache-ram", "0")


def launch(binary, real, tmp_path, drafter: bool) -> LlamaServerEngine:
    return self_drafting.launch(binary, real, tmp_path, drafter, *NO_RAM_CACHE)


def complete(engine: LlamaServerEngine, prompt: str, **extra) -> tuple[str, dict]:
    request = {"prompt": prompt, "n_predict": 64, "temperature": 0, "cache_prompt": True, **extra}
    return self_drafting.complete(engine, request)


@pytest.fixture(scope="module")
def plain(patched_server, real, tmp_path_factory):
    engine = launch(patched_server, real, tmp_path_factory.mktemp("plain"), drafter=False)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def drafting(patched_server, real, tmp_path_factory):
    engine = launch(patched_server, real, tmp_path_factory.mktemp("self"), drafter=True)
    yield engine
    engine.close()


def test_a_request_without_drafts_leaves_the_drafter_behind_and_the_next_catches_it_up(plain, drafting):
    # Turn one drafts nothing: the drafter reads none of its tokens.
    expected_first, _ = complete(plain, FIRST)
    first, quiet = complete(drafting, FIRST, **{"speculative.n_max": 0})
    assert first == expected_first
    assert quiet.get("draft_n", 0) == 0
    assert quiet["draft_tokens_processed"] == 0, quiet
    # every token the target read: the prompt, and each reply token but the last
    assert quiet["draft_tokens_skipped"] == quiet["prompt_n"] + quiet["predicted_n"] - 1, quiet

    # A request that drafts, sharing turn one's prompt head: the drafter first reads what it
    # missed (all of the reused prefix, as it stopped at 0), then drafts as if it never stopped.
    other = USER.format("Write a Python function that parses a CSV line into fields, then test it.")
    expected, _ = complete(plain, other)
    text, timings = complete(drafting, other)
    assert timings["cache_n"] > 0 and timings["draft_tokens_caught_up"] == timings["cache_n"], timings
    assert timings["draft_tokens_skipped"] == 0
    assert text == expected
    drafted, kept = timings.get("draft_n", 0), timings.get("draft_n_accepted", 0)
    assert drafted >= 40, timings
    assert kept / drafted >= 0.99, (kept, drafted)


def test_a_catch_up_over_a_reply_written_without_drafts_keeps_the_text_and_nearly_all_drafts(plain, drafting):
    """The next turn of a conversation whose last reply drafted nothing: the drafter reads
    that reply in one pass where the target read it token by token. On this CPU build the
    two differ in the last bits, so a copy of the target now and then proposes what the
    target does not pick (measured: 84 of 87 and 55 of 60 kept, 84 of 84 in step); the text
    stays exact."""
    first, quiet = complete(drafting, FIRST, **{"speculative.n_max": 0})
    assert quiet["draft_tokens_processed"] == 0
    second_prompt = FIRST + first + SECOND
    complete(plain, FIRST)  # the plain server's cache as the drafting one's: the same reply before
    expected, _ = complete(plain, second_prompt)
    text, timings = complete(drafting, second_prompt)
    assert timings["cache_n"] > quiet["prompt_n"], timings  # the reply is part of what it caught up on
    assert timings["draft_tokens_caught_up"] == timings["cache_n"] - quiet["cache_n"], (quiet, timings)
    assert text == expected
    assert timings["draft_n"] >= 40 and timings["draft_n_accepted"] / timings["draft_n"] >= 0.9, timings

    # The turn after drafts too: the drafter is in step, nothing to catch up.
    third_prompt = second_prompt + text + SECOND
    expected, _ = complete(plain, third_prompt)
    text, timings = complete(drafting, third_prompt)
    assert timings["draft_tokens_caught_up"] == 0 and timings["draft_tokens_processed"] > 0, timings
    assert text == expected
    assert timings["draft_n_accepted"] / timings["draft_n"] >= 0.9, timings


def test_a_drafter_left_behind_on_a_longer_history_catches_up_from_where_it_stopped(drafting):
    """Drafting, then a request without drafts, then drafting again on the same history:
    the catch-up reads only the tokens after the point where the drafter stopped."""
    base = USER.format("List three uses of a hash map.")
    text, timings = complete(drafting, base)
    assert timings["draft_n"] > 0
    history = base + text + SECOND
    _, quiet = complete(drafting, history, **{"speculative.n_max": 0})
    stopped = quiet["cache_n"]  # the drafter was in step up to here
    assert stopped > 0 and quiet["draft_tokens_processed"] == 0
    _, resumed = complete(drafting, history)
    # the whole of `history` but its last token was cached; the drafter resumes from `stopped`
    assert resumed["draft_tokens_caught_up"] == resumed["cache_n"] - stopped, (quiet, resumed)
    assert resumed["draft_tokens_caught_up"] > 0
    assert resumed["draft_n_accepted"] / resumed["draft_n"] >= 0.99, resumed
