"""The drafter trainer's prompts (scripts/train_dspine/corpus.py, pure Python, no JAX): thousands
of them in families of every category, a held-out split by whole family, and none of
`dspine bench`'s prompts (assets/prompts/) or their look-alikes among them."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from train_dspine import corpus  # noqa: E402


@pytest.fixture(scope="module")
def prompts():
    return corpus.build(0)


def test_thousands_of_prompts_in_every_category(prompts):
    by_category = Counter(p.category for p in prompts)
    assert len(prompts) >= 2500
    assert set(by_category) == {"code", "edit", "math", "agent", "prose"}
    assert min(by_category.values()) >= 100, by_category
    # not one template: many families, and edit prompts show code no other prompt shows
    assert len({p.family for p in prompts}) >= 20
    assert len({p.text for p in prompts}) == len(prompts)


def test_the_held_out_split_is_by_whole_family(prompts):
    held = {p.family for p in prompts if p.held_out}
    trained = {p.family for p in prompts if not p.held_out}
    assert held == set(corpus.HELD_OUT) and not held & trained
    assert {f.split(".")[0] for f in held} == {"code", "edit", "math", "agent", "prose"}


def test_no_bench_prompt_nor_a_look_alike_is_trained_on(prompts):
    bench = []
    for path in sorted((ROOT / "assets" / "prompts").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            bench += [m["content"] for m in json.loads(line)["messages"] if m["role"] == "user"]
    assert bench, "no bench prompts found: the filter would have nothing to filter"
    words = corpus._bench_texts()
    # the filter does catch the bench prompts themselves...
    assert all(corpus.near_bench(text, words) for text in bench)
    # ...and no training prompt is one
    for p in prompts:
        users = " ".join(content for role, content in p.messages if role == "user")
        assert users not in bench and not corpus.near_bench(users, words), users


def test_the_chat_is_smollm2s_template():
    text = corpus.chat((("user", "hi"),))
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    given = corpus.chat((("system", "tools"), ("user", "go")))
    assert given.startswith("<|im_start|>system\ntools<|im_end|>") and "SmolLM" not in given
