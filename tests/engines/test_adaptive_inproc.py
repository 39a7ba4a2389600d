"""Adaptive draft length in the in-process engine: it learns from real drafting on a
generated pair and applies the length it chose (the pure rules: tests/unit/test_adaptive.py)."""

from backends.adaptive import AdaptiveDraft


def test_the_in_process_engine_learns_and_applies_a_length(models):
    from backends.events import End
    from backends.inproc import InprocEngine
    from backends.sampling import Sampling

    files = models["dense"]
    adaptive = AdaptiveDraft(default=8)
    engine = InprocEngine(str(files["target"]), draft_path=str(files["noisy"]), n_ctx=1024, adaptive=adaptive).load()
    try:
        greedy = Sampling(temperature=0, max_tokens=64)
        first = [
            e
            for e in engine.stream([{"role": "user", "content": "hello"}], think=False, sampling=greedy)
            if isinstance(e, End)
        ][-1]
        tested = first.stats.position_tested
        assert len(tested) == 8 and 0 < tested[0] <= first.stats.verify_steps  # every drafting step tests position 0
        assert sum(first.stats.position_kept) == first.stats.accepted
        learned = adaptive.mode(False)
        assert learned.steps == first.stats.verify_steps and learned.drafted == first.stats.drafted
        table = adaptive.verify_s_by_len  # timed once: a target pass of each length it may choose
        assert table is not None and len(table) == adaptive.max_k + 1 and all(t > 0 for t in table)
        chosen = adaptive.choose(think=False)
        second = [
            e
            for e in engine.stream([{"role": "user", "content": "again"}], think=False, sampling=greedy)
            if isinstance(e, End)
        ][-1]
        assert len(second.stats.position_tested) <= chosen  # the next reply drafted at most the chosen length
        assert adaptive.choose(think=True) == 8  # the other mode learned nothing yet
    finally:
        engine.close()
