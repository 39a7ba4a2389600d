"""llama-server's draft flags from a config: the drafter kind's probability floor, unless
the config (the `draft_p_min` setting) gives one, and only where the binary has the flag."""

from __future__ import annotations

from backends.drafters import KINDS
from backends.llama_server import Capabilities, ServerConfig, server_args

CURRENT = Capabilities(
    flags=frozenset(
        {"-md", "-ngld", "--spec-type", "--spec-draft-n-max", "--spec-draft-p-min", "--spec-draft-sampling"}
    ),
    spec_types=("draft-simple", "draft-dspine"),
)


def p_min_flag(args: list[str]) -> str | None:
    return args[args.index("--spec-draft-p-min") + 1] if "--spec-draft-p-min" in args else None


def test_a_draft_model_runs_with_its_kinds_floor_unless_the_config_sets_one():
    config = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="draft")
    assert KINDS["draft"].p_min == 0.3
    assert p_min_flag(server_args(config, CURRENT)) == "0.3"
    assert p_min_flag(server_args(ServerConfig(**{**config.__dict__, "draft_p_min": 0.0}), CURRENT)) == "0"
    assert p_min_flag(server_args(ServerConfig(**{**config.__dict__, "draft_p_min": 0.75}), CURRENT)) == "0.75"


def test_no_floor_where_the_kind_has_none_or_the_binary_lacks_the_flag():
    dspine = ServerConfig("t.gguf", draft_model="d.gguf", drafter_kind="dspine")
    assert KINDS["dspine"].p_min is None and p_min_flag(server_args(dspine, CURRENT)) is None
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
