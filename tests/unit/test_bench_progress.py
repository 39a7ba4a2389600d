"""Issue 37: `dspine bench` on a CPU runs a short default, and its progress names the run
count and the row being measured."""

from __future__ import annotations

from app.run.bench import PLAIN, Prompt, Setup, row_label, run_bench, short_set
from backends.events import End
from backends.stats import Stats


class Instant:
    def stream(self, messages, think=True, sampling=None, n_max=None, tools=None):
        yield End("stop", Stats(generated_tokens=4, decode_s=0.1))

    def close(self) -> None:
        pass


def test_each_run_is_announced_with_its_row_before_it_runs():
    prompts = [Prompt("code", [{"role": "user", "content": "a"}]), Prompt("prose", [{"role": "user", "content": "b"}])]
    setups = [Setup(PLAIN, None), Setup("q4_1", 4), Setup("q4_1", None, adaptive=True)]
    started: list[str] = []
    done: list[int] = []
    runs = run_bench(
        lambda setup: Instant(),
        setups,
        prompts,
        [False],
        1,
        4,
        on_run=lambda run: done.append(len(started)),
        on_start=lambda setup, category, think: started.append(row_label(setup, category, think)),
    )
    assert len(runs) == 6 and done == [1, 2, 3, 4, 5, 6]  # announced, then measured, one by one
    assert started[0] == "plain, code, think off"
    assert started[2] == "q4_1 n_max 4, code, think off" and started[5] == "q4_1 adaptive, prose, think off"


def test_the_short_set_keeps_one_prompt_a_category_in_order():
    prompts = [Prompt(c, [{"role": "user", "content": str(i)}]) for i, c in enumerate("aabcb")]
    assert [(p.category, p.messages[0]["content"]) for p in short_set(prompts)] == [("a", "0"), ("b", "2"), ("c", "3")]
