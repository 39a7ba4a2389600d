"""Issue 37: `dspine bench` on a CPU runs a short default, and its progress names the run
count and the row being measured. Issue 47: the setups take turns, so a slow minute hits
them alike; a row that drafted nothing says so; a verdict line says what pays."""

from __future__ import annotations

from app.run.bench import PLAIN, Prompt, Setup, cells, row_label, run_bench, short_set, summarize, verdict
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
    # Every setup runs a prompt back to back before the next prompt (issue 47: in turns).
    assert started[:3] == ["plain, code, think off", "q4_1 n_max 4, code, think off", "q4_1 adaptive, code, think off"]
    assert started[5] == "q4_1 adaptive, prose, think off"


def test_the_short_set_keeps_one_prompt_a_category_in_order():
    prompts = [Prompt(c, [{"role": "user", "content": str(i)}]) for i, c in enumerate("aabcb")]
    assert [(p.category, p.messages[0]["content"]) for p in short_set(prompts)] == [("a", "0"), ("b", "2"), ("c", "3")]


class Machine:
    """A fake clock: every reply takes 1 s of decode for 40 tokens, except while a load spike
    lasts (the first `spike` replies of the whole bench), when it takes 2 s. Both setups are
    equally fast: any "speedup" is the spike's."""

    def __init__(self, spike: int, drafts: bool = True) -> None:
        self.calls = 0
        self.spike = spike
        self.drafts = drafts

    def engine(self, setup: Setup):
        machine = self

        class Engine:
            def stream(self, messages, think=True, sampling=None, n_max=None, tools=None):
                slow = machine.calls < machine.spike
                machine.calls += 1
                drafted = 20 if setup.drafter != PLAIN and machine.drafts else 0
                steps = 20 if drafted else 40
                yield End(
                    "stop",
                    Stats(
                        generated_tokens=40,
                        decode_s=2.0 if slow else 1.0,
                        drafted=drafted,
                        accepted=drafted // 2,
                        verify_steps=steps,
                        draft_asked=setup.drafter != PLAIN,
                    ),
                )

            def close(self) -> None:
                pass

        return Engine()


def test_setups_in_turns_remove_a_load_spikes_fake_speedup():
    prompts = [Prompt(c, [{"role": "user", "content": c}]) for c in ("code", "prose", "edit")]
    setups = [Setup(PLAIN, None), Setup("dspine", 15)]
    # The spike covers a third of the bench: on the old order (all plain first) every plain run.
    machine = Machine(spike=6)
    runs = run_bench(machine.engine, setups, prompts, [False], 3, 40)
    rows = summarize(runs)
    drafter = [r for r in rows if r.drafter == "dspine"]
    assert all(0.9 <= r.speedup <= 1.1 for r in drafter), [(r.category, r.speedup) for r in drafter]
    assert all(r.runs == 3 and r.speedup_range is not None for r in drafter)
    assert verdict(rows).startswith("verdict: too close to call") or verdict(rows).startswith("verdict: plain")
    assert "dspine at n_max 15" in verdict(rows)  # the length named, not a bare "15" after the name
    # One engine at a time (a GPU): the order turns each round, and the spike still evens out.
    machine = Machine(spike=6)
    rows = summarize(run_bench(machine.engine, setups, prompts, [False], 2, 40, max_open=1))
    speedups = [r.speedup for r in rows if r.drafter == "dspine"]
    assert all(s is not None and 0.7 <= s <= 1.4 for s in speedups), speedups


def test_a_row_that_drafted_nothing_says_so_instead_of_a_speedup():
    prompts = [Prompt("code", [{"role": "user", "content": "x"}])]
    machine = Machine(spike=0, drafts=False)
    rows = summarize(run_bench(machine.engine, [Setup(PLAIN, None), Setup("dspine", 15)], prompts, [False], 3, 40))
    (row,) = [r for r in rows if r.drafter == "dspine"]
    assert row.drafted_nothing and cells(row)[6].startswith("drafted nothing")
    assert "drafted nothing here" in verdict(rows)


class Remembering:
    """An engine like llama-server with n-gram drafts: a prompt asked again is answered from
    memory, ten times faster (its whole greedy reply drafted from the last time)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def stream(self, messages, think=True, sampling=None, n_max=None, tools=None):
        text = messages[-1]["content"]
        again = text in self.seen
        self.seen.append(text)
        yield End("stop", Stats(generated_tokens=40, decode_s=0.1 if again else 1.0))

    def close(self) -> None:
        pass


def test_rounds_of_other_prompts_keep_a_remembering_engine_from_faking_a_speedup():
    from app.run.bench import rotated

    every = [Prompt(c, [{"role": "user", "content": f"{c}{i}"}]) for c in ("code", "prose") for i in range(3)]
    chosen = short_set(every)
    plain_engine, remembering = Instant(), Remembering()
    setups = [Setup(PLAIN, None), Setup("n-gram", None)]
    pick = {PLAIN: plain_engine, "n-gram": remembering}
    repeated = summarize(run_bench(lambda s: pick[s.drafter], setups, chosen, [False], 3, 40))
    assert max(r.speedup for r in repeated if r.drafter == "n-gram") > 2  # the fake speedup
    remembering.seen.clear()
    rounds = rotated(every, chosen, 3)
    assert [[p.messages[0]["content"] for p in r] for r in rounds] == [
        ["code0", "prose0"],
        ["code1", "prose1"],
        ["code2", "prose2"],
    ]
    fair = summarize(run_bench(lambda s: pick[s.drafter], setups, chosen, [False], 3, 40, round_prompts=rounds))
    assert all(abs(r.speedup - 1.0) < 0.01 for r in fair if r.drafter == "n-gram")  # never asked twice


def test_fresh_rounds_keep_repeated_prompts_from_faking_a_speedup_on_an_engine_that_remembers():
    """The user's own --prompts (or a GPU's full set) repeat each round. One engine at a time
    (a GPU) still reused the last setup of a round as the first of the next, and with every
    engine open (a CPU) all of them: an engine that remembers replies answered round 2 from
    round 1. Fresh engines each round leave nothing to remember."""
    from app.run.bench import remembers_replies

    prompts = [Prompt(c, [{"role": "user", "content": c}]) for c in ("code", "prose")]
    setups = [Setup(PLAIN, None), Setup("n-gram", None)]

    def fresh(setup: Setup):
        return Instant() if setup.drafter == PLAIN else Remembering()

    for max_open in (None, 1):
        # Two rounds (a GPU's default): one engine at a time reuses the n-gram one in the second.
        reused = summarize(run_bench(fresh, setups, prompts, [False], 2, 40, max_open=max_open))
        assert max(r.speedup for r in reused if r.drafter == "n-gram") > 2, max_open  # the fake speedup
        fair = summarize(run_bench(fresh, setups, prompts, [False], 2, 40, max_open=max_open, fresh_rounds=True))
        assert all(abs(r.speedup - 1.0) < 0.01 for r in fair if r.drafter == "n-gram"), max_open
    assert remembers_replies("server", ngram=True)
    assert not remembers_replies("inproc", ngram=True) and not remembers_replies("server", ngram=False)


def test_each_round_samples_with_its_own_seed_every_setup_the_same():
    """Under sampling one seed every round replays one text a prompt: the "three samples" of a
    cell were one text three times, and a speedup rested on whether it happened to copy."""
    seeds: list[tuple[str | None, int | None]] = []

    def opened(setup: Setup):
        class Recording(Instant):
            def stream(self, messages, think=True, sampling=None, n_max=None, tools=None):
                seeds.append((setup.drafter, sampling.seed))
                yield from super().stream(messages, think, sampling, n_max, tools)

        return Recording()

    prompts = [Prompt("code", [{"role": "user", "content": "a"}])]
    run_bench(opened, [Setup(PLAIN, None), Setup("q4_1", 4)], prompts, [False], 3, 4, seed=5)
    assert sorted(seeds) == sorted([(PLAIN, 5), ("q4_1", 5), (PLAIN, 6), ("q4_1", 6), (PLAIN, 7), ("q4_1", 7)])


def test_a_setup_that_drafted_nothing_is_never_the_verdicts_pick_and_noise_is_said():
    """A busy machine made `n-gram drafted nothing here (15.81x plain, 0.26-31.35x over 2 rows)`:
    a speedup for a setup that did plain decoding's work. It is never picked, shows no figure,
    and a spread like that is said to be noise."""
    from app.run.bench import Row

    def row(drafter, speedup, drafted_nothing, category="code"):
        counts = {"drafted": 0 if drafted_nothing else 40}
        rate = {"median": 1.0, "min": 1.0, "max": 1.0}
        return Row(category, False, drafter, 8, rate, speedup, None, None, None, counts, runs=3)

    noisy = [row(PLAIN, 1.0, False), row("n-gram", 31.35, True), row("n-gram", 0.26, True, "prose")]
    said = verdict(noisy)
    assert said.startswith("verdict: plain decoding; n-gram") and "drafted nothing here" in said
    assert "31.35x" not in said.split(";")[1] and "timings were noisy" in said
    mixed = [*noisy, row("dspine", 1.4, False), row("dspine", 1.3, False, "prose")]
    assert verdict(mixed).startswith("verdict: dspine at n_max 8 pays here: 1.35x plain")
