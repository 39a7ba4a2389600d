"""llama-server's draft flags from a config: the drafter kind's probability floor, unless
the config (the `draft_p_min` setting) gives one, and only where the binary has the flag."""

from __future__ import annotations

from backends.adaptive import MAX_K
from backends.drafters import KINDS, NGRAM
from backends.llama_server import Capabilities, ServerConfig, server_args

CURRENT = Capabilities(
    flags=frozenset(
        {"-md", "-ngld", "--spec-type", "--spec-draft-n-max", "--spec-draft-p-min", "--spec-draft-sampling"}
    ),
    spec_types=("draft-simple", "draft-dspine", "draft-dflash"),
)


def p_min_flag(args: list[str]) -> str | None:
    return args[args.index("--spec-draft-p-min") + 1] if "--spec-draft-p-min" in args else None


def test_a_draft_model_runs_with_its_kinds_floor_unless_the_config_sets_one():
    config = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="draft")
    assert KINDS["draft"].p_min == 0.3
    assert p_min_flag(server_args(config, CURRENT)) == "0.3"
    assert p_min_flag(server_args(ServerConfig(**{**config.__dict__, "draft_p_min": 0.0}), CURRENT)) == "0"
    assert p_min_flag(server_args(ServerConfig(**{**config.__dict__, "draft_p_min": 0.75}), CURRENT)) == "0.75"
    # DSpine's floor, measured on the drafter trained here (backends/drafters.py)
    dspine = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="dspine")
    assert KINDS["dspine"].p_min == 0.3 and p_min_flag(server_args(dspine, CURRENT)) == "0.3"


def test_no_floor_where_the_kind_has_none_or_the_binary_lacks_the_flag():
    dflash = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="dflash")
    assert KINDS["dflash"].p_min is None and p_min_flag(server_args(dflash, CURRENT)) is None
    older = Capabilities(flags=CURRENT.flags - {"--spec-draft-p-min"}, spec_types=CURRENT.spec_types)
    draft = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="draft", draft_p_min=0.5)
    assert p_min_flag(server_args(draft, older)) is None
    assert p_min_flag(server_args(ServerConfig("t.gguf"), CURRENT)) is None  # no drafter, no floor


def test_a_draft_models_sampled_drafts_are_verified_by_rejection_where_the_binary_can():
    """Probabilistic drafts (rejection sampling) keep as many drafts on llama-server as in
    process; drafts verified by match lose most of a noisy drafter's (backends/drafters.py)."""
    draft = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="draft")
    args = server_args(draft, CURRENT)
    assert args[args.index("--spec-draft-sampling") + 1] == "probabilistic"
    older = Capabilities(flags=CURRENT.flags - {"--spec-draft-sampling"}, spec_types=CURRENT.spec_types)
    assert "--spec-draft-sampling" not in server_args(draft, older)
    dspine = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="dspine")
    assert "--spec-draft-sampling" not in server_args(dspine, CURRENT)  # not measured: the server's own


NGRAM_BINARY = Capabilities(
    flags=CURRENT.flags
    | {"--spec-ngram-mod-n-max", "--spec-ngram-mod-n-min", "--spec-ngram-mod-n-match"}
    | {"--spec-ngram-simple-size-n", "--spec-ngram-simple-size-m"},
    spec_types=("draft-simple", "ngram-mod", "ngram-simple"),
    per_request_draft=True,
)


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_the_ngram_drafter_is_chained_before_the_draft_model_with_its_own_length():
    chained = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="draft", n_max=8, ngram=NGRAM)
    args = server_args(chained, NGRAM_BINARY)
    assert args.count("--spec-type") == 1 and flag(args, "--spec-type") == "ngram-mod,draft-simple"
    assert flag(args, "--spec-ngram-mod-n-max") == str(NGRAM.n_max)
    assert flag(args, "--spec-ngram-mod-n-min") == str(NGRAM.n_min)
    assert flag(args, "--spec-draft-n-max") == "8"  # the model drafter keeps its own length
    # Its drafts are never shorter than its n_min, a model's never longer than the longest length
    # adaptive may choose: a step's draft length says which drafter made it.
    assert NGRAM.n_min > MAX_K


def test_the_ngram_drafter_alone_and_not_where_the_binary_lacks_it():
    # Alone it looks in the request's own tokens (ngram-simple: nothing kept across requests),
    # with a short match and draft (measured: benchmarks/ngram_server_settings.py).
    alone = server_args(ServerConfig("t.gguf", ngram=NGRAM), NGRAM_BINARY)
    assert flag(alone, "--spec-type") == "ngram-simple" and "-md" not in alone
    assert flag(alone, "--spec-ngram-simple-size-n") == "4" and flag(alone, "--spec-ngram-simple-size-m") == "8"
    # On a CPU a long pass costs several plain steps: a copy is drafted after a 6-token match,
    # where a 4-token one was a coincidence often enough to lose (session 26, measured there).
    on_cpu = server_args(ServerConfig("t.gguf", ngram=NGRAM.on_device(gpu=False)), NGRAM_BINARY)
    assert flag(on_cpu, "--spec-ngram-simple-size-n") == "6" and flag(on_cpu, "--spec-ngram-simple-size-m") == "8"
    assert NGRAM.on_device(gpu=True) == NGRAM
    assert "--spec-ngram-mod-n-min" not in alone
    # Where the binary has ngram-copy (dspine's patch), a CPU's copies are weighed against the
    # passes the server times: drafted as far as they pay, up to 16 tokens (session 27).
    copy_flags = NGRAM_BINARY.flags | {"--spec-ngram-copy-n-max"}
    copy_binary = Capabilities(copy_flags, (*NGRAM_BINARY.spec_types, "ngram-copy"), per_request_draft=True)
    weighed = server_args(ServerConfig("t.gguf", ngram=NGRAM.on_device(gpu=False)), copy_binary)
    assert flag(weighed, "--spec-type") == "ngram-copy" and flag(weighed, "--spec-ngram-copy-n-max") == "16"
    assert "--spec-ngram-simple-size-n" not in weighed
    on_gpu = server_args(ServerConfig("t.gguf", ngram=NGRAM.on_device(gpu=True)), copy_binary)
    assert flag(on_gpu, "--spec-type") == "ngram-simple" and "--spec-ngram-copy-n-max" not in on_gpu
    # Several slots share each pass: its time is no one slot's, so their copies are not weighed.
    slots = server_args(ServerConfig("t.gguf", ngram=NGRAM.on_device(gpu=False), n_parallel=2), copy_binary)
    assert flag(slots, "--spec-type") == "ngram-simple" and flag(slots, "--spec-ngram-simple-size-n") == "6"
    # Chained before a model drafter it stays ngram-mod (a step's length tells the drafters apart).
    chained_cpu = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="draft", ngram=NGRAM.on_device(gpu=False))
    assert flag(server_args(chained_cpu, copy_binary), "--spec-type") == "ngram-mod,draft-simple"
    no_simple = Capabilities(NGRAM_BINARY.flags, ("draft-simple", "ngram-mod"), per_request_draft=True)
    assert "--spec-type" not in server_args(ServerConfig("t.gguf", ngram=NGRAM), no_simple)
    # A server that cannot switch drafting per request drafts on every turn, new text too: there
    # only ngram-mod's long copies, which rarely fire where nothing is copied.
    upstream = Capabilities(NGRAM_BINARY.flags, NGRAM_BINARY.spec_types)
    every_turn = server_args(ServerConfig("t.gguf", ngram=NGRAM), upstream)
    assert flag(every_turn, "--spec-type") == "ngram-mod" and flag(every_turn, "--spec-ngram-mod-n-min") == "17"
    assert "--spec-ngram-simple-size-n" not in every_turn
    lacking = server_args(ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="draft", ngram=NGRAM), CURRENT)
    assert flag(lacking, "--spec-type") == "draft-simple" and "--spec-ngram-mod-n-max" not in lacking


def test_a_dspine_code_table_goes_on_the_device_only_where_asked_and_the_drafter_is_on_a_gpu():
    has_otd = Capabilities(flags=CURRENT.flags | {"--override-tensor-draft"}, spec_types=CURRENT.spec_types)
    dspine = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="dspine")
    assert "--override-tensor-draft" not in server_args(dspine, has_otd)  # host memory by default
    on_device = ServerConfig(**{**dspine.__dict__, "code_table_device": "CUDA0"})
    args = server_args(on_device, has_otd)
    assert args[args.index("--override-tensor-draft") + 1] == r"dspine_codes\.weight=CUDA0"
    # a drafter on the CPU, another kind, or a binary without the flag: nothing to move
    for config, caps in (
        (ServerConfig(**{**on_device.__dict__, "draft_gpu_layers": 0}), has_otd),
        (ServerConfig(**{**on_device.__dict__, "drafter_kind": "dflash"}), has_otd),
        (on_device, CURRENT),
    ):
        assert "--override-tensor-draft" not in server_args(config, caps)


def test_the_copies_match_follows_where_the_target_runs(monkeypatch):
    from app.fit.hardware import Gpu, Hardware
    from app.run.engines import _target_on_gpu

    no_gpu = Hardware([], 0, 0, "none")
    one_gpu = Hardware([Gpu(0, "NVIDIA GeForce RTX 3090", 24 << 30, 23 << 30)], 0, 0, "nvml")
    monkeypatch.setattr("app.fit.hardware.detect", lambda: no_gpu)
    assert not _target_on_gpu(ServerConfig("t.gguf"), None)  # -ngl 999 on a machine with no GPU
    assert _target_on_gpu(ServerConfig("t.gguf"), plan=object())  # fit planned layers on a GPU
    monkeypatch.setattr("app.fit.hardware.detect", lambda: one_gpu)
    assert _target_on_gpu(ServerConfig("t.gguf", gpu_layers=20), None)  # --gpu-layers 20
    assert not _target_on_gpu(ServerConfig("t.gguf", gpu_layers=0), None)  # --gpu-layers 0: the CPU


def test_requests_name_the_sampling_order_unless_the_launch_flags_give_one(tmp_path):
    """The temperature before top-p (backends/sampling.LLAMA_SERVER_ORDER), every sampler named
    (one left out would not run); a `--samplers` among the user's launch flags is theirs."""
    from backends.llama_server import LlamaServerEngine
    from backends.sampling import LLAMA_SERVER_ORDER

    extra = dict(LlamaServerEngine(ServerConfig("t.gguf"), log_dir=tmp_path).request_extra)
    order = extra["samplers"]
    assert order == list(LLAMA_SERVER_ORDER) and order.index("temperature") < order.index("top_p")
    assert {"dry", "xtc", "typ_p", "top_n_sigma", "penalties", "min_p", "top_k"} <= set(order)
    own = ServerConfig("t.gguf", extra_args=("--samplers", "top_k;top_p;temperature"))
    assert LlamaServerEngine(own, log_dir=tmp_path).request_extra == ()
