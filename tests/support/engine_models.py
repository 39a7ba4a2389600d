"""The generated model families engine tests share: a target, a drafter equal
to it (every draft accepted) and a noisy one (some accepted), dense and hybrid."""

from __future__ import annotations

from pathlib import Path

from backends.prompt_lookup import LookupSettings
from tests.support.gguf_models import Shape, chat_model, write_model

HYBRID = Shape(
    arch="qwen35",
    n_layer=4,
    n_embd=128,
    n_head=4,
    n_head_kv=2,
    head_dim=32,
    n_ff=256,
    n_vocab=320,
    full_attention_interval=2,
    ssm_state_size=16,
    ssm_group_count=2,
    ssm_time_step_rank=4,
)


def write_family(folder: Path, kind: str) -> dict[str, Path]:
    """`dense` / `hybrid`: weights of scale 0.02, nearly flat logits (fast, but the next
    token hardly depends on what came before). `sharp-dense` / `sharp-hybrid`: scale 0.2,
    so the next token depends strongly on the state and on penalties: what exactness and
    rollback tests need to be able to fail."""
    sharp = kind.startswith("sharp-")
    shape = chat_model() if kind.endswith("dense") else HYBRID
    scale = 0.2 if sharp else 0.02
    noise = 0.1 if sharp else (0.3 if kind == "dense" else 0.05)
    return {
        "target": write_model(folder / f"{kind}-target.gguf", shape, scale=scale),
        "same": write_model(folder / f"{kind}-same.gguf", shape, scale=scale),
        "noisy": write_model(folder / f"{kind}-noisy.gguf", shape, noise=noise, scale=scale),
    }


# Prompt lookup that drafts at nearly every step of a generated model's output: one token of
# match is enough (chained before a drafter too), so its drafts are often wrong and the rejection paths run too.
EAGER_LOOKUP = LookupSettings(n_max=6, ngram_max=3, ngram_min=1, n_min=1, chained_ngram_min=1, weigh_copies=False)
# The same with copies weighed against the model's drafts: the first copy of a reply is only
# scored, so copies ride along after model drafts they agree with.
WEIGHED_LOOKUP = LookupSettings(n_max=6, ngram_max=3, ngram_min=1, n_min=1, chained_ngram_min=1)


def open_engines(files: dict[str, Path], n_ctx: int = 512, n_max: int = 8) -> dict:
    """In-process engines on a family: plain, with the equal drafter, with the noisy one,
    `chain`: the noisy one with prompt lookup chained before it, and `weighed`: the same with
    copies weighed against the model's drafts."""
    from backends.inproc import InprocEngine

    target = str(files["target"])
    noisy = str(files["noisy"])
    return {
        "plain": InprocEngine(target, n_ctx=n_ctx).load(),
        "same": InprocEngine(target, draft_path=str(files["same"]), n_ctx=n_ctx, n_max=n_max).load(),
        "noisy": InprocEngine(target, draft_path=noisy, n_ctx=n_ctx, n_max=n_max).load(),
        "chain": InprocEngine(target, draft_path=noisy, n_ctx=n_ctx, n_max=n_max, ngram=EAGER_LOOKUP).load(),
        "weighed": InprocEngine(target, draft_path=noisy, n_ctx=n_ctx, n_max=n_max, ngram=WEIGHED_LOOKUP).load(),
    }
