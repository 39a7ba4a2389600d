"""Adaptive draft length on made-up acceptance profiles."""

from backends.adaptive import AdaptiveDraft, AdaptiveStore, Costs, ModeStats, best_length, expected_tokens

GPU_LIKE = Costs(draft_per_token=0.001, verify_fixed=0.020, verify_per_token=0.0005)


def learned(profile: list[float], steps: int = 400) -> ModeStats:
    """Feed `steps` verify steps whose position-i acceptance follows `profile` exactly."""
    stats = ModeStats()
    tested, kept = [0] * 16, [0] * 16
    reach = float(steps)
    for i, a in enumerate(profile):
        tested[i] = round(reach)
        kept[i] = round(reach * a)
        reach *= a
    stats.add(tested, kept, draft_s=0.001 * 16 * steps, drafted=16 * steps, verify_s=0.028 * steps, steps=steps)
    return stats


def test_expected_tokens():
    assert expected_tokens([1.0] * 4, 4) == 5
    assert expected_tokens([0.5, 0.5], 2) == 1 + 0.5 + 0.25


def test_acceptance_falling_off_shortens_the_draft():
    falls = [0.9, 0.5, 0.1] + [0.05] * 13
    assert best_length(falls, GPU_LIKE) <= 3


def test_acceptance_staying_high_lengthens_the_draft():
    high = [0.95] * 16
    assert best_length(high, GPU_LIKE) >= 10


def test_expensive_drafting_shortens_it_too():
    costly = Costs(draft_per_token=0.015, verify_fixed=0.020, verify_per_token=0.0005)
    assert best_length([0.8] * 16, costly) < best_length([0.8] * 16, GPU_LIKE)


def test_adaptive_per_mode_and_remembered(tmp_path):
    adaptive = AdaptiveDraft(default=4, plain_token_s=0.020)
    assert adaptive.choose(think=True) == 4  # nothing learned yet
    adaptive.modes["think"] = learned([0.6, 0.3, 0.1] + [0.05] * 13)
    adaptive.modes["no_think"] = learned([0.97] * 16)
    short, long = adaptive.choose(think=True), adaptive.choose(think=False)
    assert short < 4 < long
    store = AdaptiveStore(tmp_path / "adaptive.json")
    store.save("model-a", adaptive)
    again = store.load("model-a", default=4)
    assert (again.choose(True), again.choose(False)) == (short, long)
    assert store.load("model-b", default=3).choose(True) == 3


def test_the_in_process_engine_learns_and_applies_a_length(models):
    from backends.events import End
    from backends.inproc import InprocEngine
    from backends.sampling import Sampling

    files = models["dense"]
    adaptive = AdaptiveDraft(default=8)
    engine = InprocEngine(str(files["target"]), draft_path=str(files["noisy"]), n_ctx=1024, adaptive=adaptive).load()
    try:
        greedy = Sampling(temperature=0, max_tokens=64)
        first = [e for e in engine.stream([{"role": "user", "content": "hello"}], think=False, sampling=greedy) if isinstance(e, End)][-1]
        tested = first.stats.position_tested
        assert len(tested) == 8 and 0 < tested[0] <= first.stats.verify_steps  # every drafting step tests position 0
        assert sum(first.stats.position_kept) == first.stats.accepted
        learned = adaptive.mode(False)
        assert learned.steps == first.stats.verify_steps and learned.drafted == first.stats.drafted
        chosen = adaptive.choose(think=False)
        second = [e for e in engine.stream([{"role": "user", "content": "again"}], think=False, sampling=greedy) if isinstance(e, End)][-1]
        assert len(second.stats.position_tested) <= chosen  # the next reply drafted at most the chosen length
        assert adaptive.choose(think=True) == 8  # the other mode learned nothing yet
    finally:
        engine.close()
