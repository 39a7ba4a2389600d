"""llama-server's ngram-copy (installers/patches/llama-server-ngram-copy.patch) is the
in-process engine's rule for copies (backends/prompt_lookup.py with copy_length.py), ported
to C++: replayed over the same texts, it drafts the same tokens at every step, with the
passes untimed (the rule's prior shape of costs) and with passes timed as they go.

The patch's own common/ngram-copy.cpp, from the patched build's source tree, is compiled with
a small driver (tests/support/ngram_copy_replay.cpp). The texts are made up: token sequences
copied from a prompt with tokens changed, dropped and inserted at several rates, and replies
that repeat themselves, so that following, losing and picking up a copy, the run's bands, the
confirming 6-gram and the prompt's capped evidence all come into play."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from backends.copy_length import PassCosts
from backends.prompt_lookup import LookupSettings, PromptLookup
from tests.conftest import ROOT

# The patch's prior shape of pass costs (a pass of n tokens against one of 1: COPY_SHAPE_*).
SHAPE = {1: 1.0, 2: 1.78, 3: 1.98, 5: 2.75, 9: 3.94, 17: 6.10}


def made_up_seconds(n_pass: int, step: int) -> float:
    """A pass's time in the timed replay (the driver makes the same up)."""
    return 0.008 + 0.0025 * (n_pass - 1) + 0.0001 * (step % 7)


def python_drafts(prompt: list[int], reply: list[int], timed: bool) -> str:
    # Timed, the table is in seconds (PassCosts' level is clipped around 1); the patch's shape
    # is relative and its level unclipped: the same costs either way.
    costs = PassCosts({n: s * 0.01 for n, s in SHAPE.items()} if timed else SHAPE)
    lookup = PromptLookup(LookupSettings(), prompt, costs, numeric=lambda token: token % 5 == 0)  # as the driver
    cells, pos, n, step = [], 0, len(reply), 0
    while pos < n - 1:
        lookup.extend([reply[pos]])
        draft = lookup.draft(min(16, n - 1 - pos))
        cells.append(",".join(map(str, draft)) or "-")
        kept = 0
        while kept < len(draft) and pos + 1 + kept < n and draft[kept] == reply[pos + 1 + kept]:
            kept += 1
        if draft:
            lookup.observe(len(draft), kept)
        if timed:
            costs.observe(len(draft) + 1, made_up_seconds(len(draft) + 1, step))
        lookup.extend(reply[pos + 1 : pos + 1 + kept])
        step += 1
        pos += kept + 1
    return " ".join(cells)


def texts(seed: int, count: int) -> list[tuple[list[int], list[int]]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        vocab = rng.choice([8, 30, 200])  # few kinds of token: many coincidental matches
        source = [rng.randrange(vocab) for _ in range(rng.randrange(5, 300))]
        prompt = source + [rng.randrange(vocab) for _ in range(rng.randrange(0, 20))]
        rate = rng.choice([0.0, 0.02, 0.1, 0.3])
        reply: list[int] = []
        for token in source:
            r = rng.random()
            if r < rate:
                reply.append(rng.randrange(vocab))  # changed
            elif r < rate * 1.3:
                continue  # dropped
            elif r < rate * 1.6:
                reply += [token, rng.randrange(vocab)]  # one inserted
            else:
                reply.append(token)
        reply = reply[: rng.randrange(2, 400)]
        if rng.random() < 0.3:
            reply += reply[: rng.randrange(0, 100)]  # the reply repeats itself
        cases.append((prompt, reply))
    return cases


@pytest.fixture(scope="module")
def driver(patched_server, tmp_path_factory) -> Path:
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    source = patched_server.parent.parent / "src"
    assert (source / "common" / "ngram-copy.cpp").is_file(), "the ngram-copy patch was not applied"
    binary = tmp_path_factory.mktemp("ngram-copy") / "replay"
    subprocess.run(
        [compiler, "-std=c++17", "-O1", *(f"-I{source / d}" for d in ("common", "include", "ggml/include"))]
        + [str(source / "common" / "ngram-copy.cpp"), str(ROOT / "tests" / "support" / "ngram_copy_replay.cpp")]
        + ["-o", str(binary)],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    return binary


@pytest.mark.parametrize("timed", [False, True], ids=["untimed", "timed"])
def test_the_servers_copy_rule_drafts_what_the_in_process_rule_drafts(driver, timed):
    cases = texts(seed=27 + timed, count=150)
    lines = "".join(" ".join(map(str, p)) + "\n" + " ".join(map(str, r)) + "\n" for p, r in cases)
    ran = subprocess.run(
        [str(driver), *(["timed"] if timed else [])], input=lines, capture_output=True, text=True, check=True
    )
    ported = ran.stdout.splitlines()
    assert len(ported) == len(cases)
    drafted = 0
    for i, ((prompt, reply), theirs) in enumerate(zip(cases, ported, strict=True)):
        ours = python_drafts(prompt, reply, timed)
        assert theirs == ours, f"text {i}: the drafts part (Python first)\n{ours}\n{theirs}"
        drafted += sum(cell != "-" for cell in ours.split())
    # Long copies, short ones and none: both rules had choices to make.
    all_cells = [cell for line in ported for cell in line.split()]
    lengths = {len(cell.split(",")) for cell in all_cells if cell != "-"}
    assert drafted > 1000 and "-" in all_cells and {2, 12, 16} <= lengths, sorted(lengths)
