"""What each kind of drafter is: one table that the catalog, the model shape,
the planner, the engines, doctor and llama-server all read.

    dspine  Tencent's DSpine: a block drafter over a sliding window (llama.cpp fork)
    dflash  DFlash2: a block drafter (upstream llama.cpp of late 2026)
    dspark  DSpark: DFlash with a Markov head (upstream llama.cpp of late 2026)
    mtp     the target's own multi-token-prediction head (nothing to download)
    draft   a plain small model of the same vocabulary (any llama.cpp; in process too)

It lives with the engines because llama-server needs each kind's --spec-type
names, and the engines import nothing from `app/`; the app reads it from below.
Figures marked FACTS come from the drafters' model cards and llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DrafterKind:
    name: str
    rank: int  # which kind the planner prefers when several fit: lower drafts faster
    # Tokens drafted per step: the target verifies 1 + this many in one pass, and
    # llama-server reserves logits for exactly that many rows.
    n_max: int
    window: int | None  # a sliding window that caps the drafter's KV cache
    block: bool  # drafts its whole block in one pass: n_max + 1 output rows for the drafter too
    spec_types: tuple[str, ...]  # llama-server's --spec-type names for it (forks spell them differently)
    install_hint: str  # what to install when no llama-server here runs it
    arch_marker: str | None = None  # a GGUF architecture containing this names a drafter of this kind
    in_process: bool = False  # the in-process engine (llama-cpp-python) can run it
    # The draft probability floor llama-server runs it with (--spec-draft-p-min: a draft stops
    # where the drafter's own probability for its token is below it); None: the server's own
    # (0, never stop). Measured with benchmarks/draft_p_min.py where a drafter of the kind exists
    # here; each kind's entry below says what was measured, or why nothing was.
    p_min: float | None = None
    # How a sampled request's drafts are drawn (--spec-draft-sampling): True, from the drafter's
    # distribution under the request's sampler, verified by rejection sampling against the
    # target's (exact in distribution); False, drawn on the target's random stream and kept
    # only where the target's own draw matches; None: the server's default (match).
    probabilistic: bool | None = None
    # llama-server keeps a snapshot of a hybrid target's recurrent state per drafted token for
    # this kind (n_rs_seq = --spec-draft-n-max: common/common.h need_n_rs_seq), so the state is
    # allocated 1 + n_max times. backends/rollback.py counts it.
    snapshots: bool = False


KINDS: dict[str, DrafterKind] = {
    kind.name: kind
    for kind in (
        # FACTS: DSpine drafts a block of 16 and attends over a sliding window of 8,192 tokens.
        DrafterKind(
            "dspine",
            0,
            16,
            8192,
            True,
            ("draft-dspine", "dspine"),
            "DSpine needs a DSpine-enabled llama.cpp fork: installers/install.sh --with-server --fork URL@REF",
            arch_marker="dspine",
            # Not measured: no DSpine-enabled llama.cpp runs here (FACTS), so the server's own floor.
            p_min=None,
            # draft-dspine joins need_n_rs_seq's list with dspine's DSpine patch (like draft-dflash).
            snapshots=True,
        ),
        # FACTS: DFlash2 is best at 7 on code.
        DrafterKind(
            "dflash",
            1,
            7,
            None,
            True,
            ("draft-dflash", "dflash"),
            "DFlash needs a llama.cpp of late 2026 (upstream) or the buun fork",
            arch_marker="dflash",
            # Not measured: no DFlash GGUF small enough for this machine exists (the smallest is
            # Qwen3.8's, 1.1 GB, for a 16 GB target), and DFlash2's lattice drafts no per-token
            # probabilities the floor could read; the server's own floor.
            p_min=None,
            snapshots=True,  # draft-dflash is in need_n_rs_seq's list (pinned common/common.h)
        ),
        # DSpark (DFlash + a Markov head and a confidence head): upstream's draft-dspark. Minimal
        # entry for the safetensors converter's pull; the MTP/drafter helper owns its figures.
        # n_max: DFlash2's 7 (UNCONFIRMED for DSpark: nobody here has run the real one). Its GGUF
        # architecture is `dflash` like DFlash's, so no marker: it is told from its tensors.
        DrafterKind(
            "dspark",
            1,
            7,
            None,
            True,
            ("draft-dspark",),
            "DSpark needs a llama.cpp of late 2026 (upstream, --spec-type draft-dspark)",
            p_min=None,
            snapshots=True,  # draft-dspark is in need_n_rs_seq's list (pinned common/common.h)
        ),
        # FACTS: MTP heads draft 2.
        DrafterKind(
            "mtp",
            2,
            2,
            None,
            False,
            ("draft-mtp", "mtp"),
            "MTP drafting needs a llama.cpp of late 2026 (upstream)",
            # Not measured: no target with an MTP head small enough for this machine; the server's own.
            p_min=None,
            snapshots=True,  # draft-mtp is in need_n_rs_seq's list (pinned common/common.h)
        ),
        # FACTS: upstream llama-server's default draft length is 3.
        DrafterKind(
            "draft",
            3,
            3,
            None,
            False,
            ("draft-simple",),
            "draft models need a llama.cpp with --spec-type draft-simple",
            in_process=True,
            # Measured (benchmarks/draft_p_min.py --tokens 64 --rounds 1, patched llama-server, load
            # average 12-15 on 2 cores; counted work, which load does not change): on SmolLM2-135M
            # Q8_0 with its Q4_1 and Q2_K and on the generated pair, both think presets, with a
            # drafted token costing 0.1 of a target pass (a small drafter on a GPU), 0.3 is within
            # 0.905 of the best floor everywhere; 0 falls to 0.655 (a near-random drafter drafts
            # 417 tokens to keep 8), 0.5 to 0.757, 0.75 to 0.457 (it cuts good drafts short). With
            # a drafter as big as its target no floor beats plain, and break-even switches it off.
            # Tests on generated near-flat models (a top-10 confidence near 0.1, so 0.3 would
            # stop every draft) pin 0 where drafting is what they test; the setting
            # `draft_p_min` overrides this. The in-process engine has no floor.
            p_min=0.3,
            # Measured (the think-off preset: temperature 0.7, top-k 20, top-p 0.8, presence 1.5;
            # six seeds of 96 tokens, k=4, patched llama-server): SmolLM2 Q8_0 with its Q4_1 kept
            # 449/477 drafts (0.94) by rejection against 429/548 (0.78) by match, as many as in
            # process (453/481, 0.94, rejection); the generated pair 413/611 (0.68) against
            # 121/1745 (0.07). Drafts drawn by match agree only where both draws land on the same
            # token: a truncated, noisy tail rarely does. Greedy requests verify by match either way.
            probabilistic=True,
        ),
    )
}


def kind_of_architecture(arch: str) -> str:
    """A drafter file's kind from its GGUF architecture (dspine, dflash), else a plain draft model."""
    lowered = arch.lower()
    return next((k.name for k in KINDS.values() if k.arch_marker and k.arch_marker in lowered), "draft")


def default_n_max(kind: str | None, unknown: int = 0) -> int:
    """The kind's draft length; `unknown` for no drafter or a kind not in the table."""
    found = KINDS.get(kind or "")
    return found.n_max if found else unknown
