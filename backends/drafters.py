"""What each kind of drafter is: one table that the catalog, the model shape,
the planner, the engines, doctor and llama-server all read.

    dspine  Tencent's DSpine: a block drafter over a sliding window (dspine's patch, or a fork)
    dflash  DFlash2 (and plain DFlash): a block drafter (upstream llama.cpp of late 2026)
    dspark  DSpark: DFlash with a Markov head (upstream llama.cpp of late 2026)
    mtp     the target's own multi-token-prediction head (nothing to download)
    draft   a plain small model of the same vocabulary (any llama.cpp; in process too)

Each kind also says what its GGUF holds (`Layout`): the tensors and keys that
decide the kind and those the llama-server reads for it. `drafter_files.py`
reads a header against these; the names are data, so a layout that turns out
otherwise is a line to change here.

It lives with the engines because llama-server needs each kind's --spec-type
names, and the engines import nothing from `app/`; the app reads it from below.
Figures marked FACTS come from the drafters' model cards and llama.cpp.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

# Tensor names as GGUF spells them; `N` stands for a block index (blk.N.attn_q.weight).


@dataclass(frozen=True)
class Layout:
    """What a GGUF of one drafter kind holds, as the llama-server that runs the kind reads it.

    `marker`: tensors that decide the kind (any one present is enough; `N` matches any
    block). `required`: tensors the loader refuses the file without. `optional`: tensors
    it reads when present. `together`: groups where one member present makes the whole
    group required (block by block when every name holds `N`, else on every block).
    `keys_with`: (a tensor, keys the loader needs once that tensor is there)."""

    arch: str | None  # the GGUF architecture; None: any (an MTP head sits in its target's)
    marker: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    together: tuple[tuple[str, ...], ...] = ()
    required_keys: tuple[str, ...] = ()
    optional_keys: tuple[str, ...] = ()
    keys_with: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def tensors(self) -> frozenset[str]:
        """Every tensor name this kind's loader knows."""
        return frozenset(self.marker + self.required + self.optional + tuple(n for g in self.together for n in g))

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(self.required_keys + self.optional_keys + tuple(k for _, ks in self.keys_with for k in ks))


def _joined(*layouts: Layout, **changes) -> Layout:
    """A layout with every name of `layouts` and `changes` on top (the DFlash family shares its trunk)."""
    merged = Layout(
        arch=layouts[0].arch,
        required=tuple(n for lay in layouts for n in lay.required),
        optional=tuple(n for lay in layouts for n in lay.optional),
        together=tuple(g for lay in layouts for g in lay.together),
        required_keys=tuple(k for lay in layouts for k in lay.required_keys),
        optional_keys=tuple(k for lay in layouts for k in lay.optional_keys),
        keys_with=tuple(k for lay in layouts for k in lay.keys_with),
    )
    return Layout(**{**merged.__dict__, **changes})


# Upstream's `dflash` architecture (the pinned llama.cpp's src/models/dflash.cpp, load_arch_tensors
# and load_arch_hparams): the trunk every DFlash-family file carries.
DFLASH_TRUNK = Layout(
    arch="dflash",
    required=(
        "fc.weight",
        "enc.output_norm.weight",
        "output_norm.weight",
        "blk.N.attn_norm.weight",
        "blk.N.attn_q.weight",
        "blk.N.attn_k.weight",
        "blk.N.attn_output.weight",
        "blk.N.attn_q_norm.weight",
        "blk.N.attn_k_norm.weight",
        "blk.N.ffn_norm.weight",
        "blk.N.ffn_gate.weight",
        "blk.N.ffn_down.weight",
        "blk.N.ffn_up.weight",
    ),
    optional=(
        "token_embd.weight",
        "output.weight",
        "d2t",
        "fc.scale",
        "rope_freqs.weight",
        "blk.N.attn_v.weight",
        "blk.N.post_attention_norm.weight",
        "blk.N.post_ffw_norm.weight",
        "blk.N.layer_output_scale.weight",
        "blk.N.attn_sinks.weight",
        # DeepSeek-V4-style hyper-connection drafters (dflash.hyper_connection_count > 0).
        "output_hc_fn.weight",
        "output_hc_base.weight",
        "output_hc_scale.weight",
        *(
            f"blk.N.{name}.weight"
            for name in (
                "attn_q_a",
                "attn_q_a_norm",
                "attn_q_b",
                "attn_kv",
                "attn_kv_a_norm",
                "attn_output_a",
                "attn_output_b",
                "hc_attn_fn",
                "hc_attn_base",
                "hc_attn_scale",
                "hc_ffn_fn",
                "hc_ffn_base",
                "hc_ffn_scale",
                "ffn_gate_inp",
                "ffn_gate_exps",
                "ffn_down_exps",
                "ffn_up_exps",
                "ffn_gate_shexp",
                "ffn_down_shexp",
                "ffn_up_shexp",
            )
        ),
        "blk.N.exp_probs_b.bias",
    ),
    required_keys=("dflash.target_layers",),
    optional_keys=(
        "dflash.block_size",
        "dflash.sample_from_anchor",  # absent: true, the anchor-first layout (a block of 16 drafts 16)
        "dflash.attention.causal",
        "dflash.attention.sliding_window",
        "dflash.attention.sliding_window_pattern",
        "tokenizer.ggml.mask_token_id",
    ),
)

# DFlash2's selector lattice and per-layer convolutions (upstream loads them when
# selector_hidden.weight is there, and then needs all of them and their keys).
DFLASH2_SELECTOR = ("selector_predecessor.weight", "selector_successor.weight", "selector_hidden.weight")
DFLASH2_CONV = (
    "blk.N.attn_conv_base",
    "blk.N.attn_conv_proj.weight",
    "blk.N.ffn_conv_base",
    "blk.N.ffn_conv_proj.weight",
)
DFLASH2_KEYS = (
    "dflash.conv_kernel_size",
    "dflash.conv_group_size",
    "dflash.selector_rank",
    "dflash.selector_top_k",
)
DFLASH_LAYOUT = _joined(
    DFLASH_TRUNK,
    marker=("selector_hidden.weight",),  # DFlash2; a file without it is a plain DFlash, the same kind
    together=((*DFLASH2_SELECTOR, *DFLASH2_CONV),),
    keys_with=(("selector_hidden.weight", ("dflash.block_size", *DFLASH2_KEYS)),),
)

# DSpark: the trunk plus a Markov head (and an optional confidence head).
DSPARK_LAYOUT = _joined(
    DFLASH_TRUNK,
    marker=("markov_w1.weight",),
    required=(*DFLASH_TRUNK.required, "markov_w1.weight", "markov_w2.weight"),
    optional=(*DFLASH_TRUNK.optional, "markov_w2.scale", "conf_proj.weight", "conf_proj.bias"),
    optional_keys=(*DFLASH_TRUNK.optional_keys, "dflash.has_confidence_head"),
)

# DSpine as its authors define it (SpecForge's DSpineDraftModel; docs/dspine-variant.md's names
# table, mirrored; app/hub/convert.py writes them): the trunk, a readout and a write on every
# layer, the shared message, gates and bias, and the fixed code table (r = transfer_rank,
# s = message_size; shapes in ggml order). The code table decides the kind.
DSPINE_INJECTION = (
    "blk.N.dspine_readout.weight",  # SpecForge injection.readouts.N {n_embd, r}
    "blk.N.dspine_write.weight",  # SpecForge injection.writes.N {s, n_embd}
)
DSPINE_SHARED = (
    "dspine_message.weight",  # SpecForge injection.message {r, s}
    "dspine_receiver_gate.weight",  # SpecForge injection.receiver_gate {r, s}
    "dspine_predecessor_gate.weight",  # SpecForge injection.predecessor_gate {r, s}
    "dspine_gate.bias",  # SpecForge injection.bias {s}
    "dspine_codes.weight",  # SpecForge transfer_codes {r, n_vocab}
)
DSPINE_KEYS = ("dflash.dspine.top_k",)  # SpecForge dspine_config.top_k (absent: 16)
DSPINE_LAYOUT = _joined(
    DFLASH_TRUNK,
    marker=("dspine_codes.weight",),
    required=(*DFLASH_TRUNK.required, *DSPINE_INJECTION, *DSPINE_SHARED),
    optional_keys=(*DFLASH_TRUNK.optional_keys, *DSPINE_KEYS),
)

# An MTP head inside its target (any architecture): upstream drafts with it when the last block
# carries nextn.eh_proj (common/speculative.cpp, common_speculative_types_from_gguf).
MTP_LAYOUT = Layout(
    arch=None,
    marker=("blk.N.nextn.eh_proj.weight",),  # on the last block only: drafter_files.has_mtp_head
    optional=(
        "blk.N.nextn.embed_tokens.weight",
        "blk.N.nextn.enorm.weight",
        "blk.N.nextn.hnorm.weight",
        "blk.N.nextn.shared_head_head.weight",
        "blk.N.nextn.shared_head_norm.weight",
    ),
)


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
    label: str = ""  # the kind as people name it (DFlash2, DSpark)
    layout: Layout | None = None  # what its GGUF holds; None: any model (a plain draft model)
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
        # In place (docs/dspine-variant.md: position 0 is the anchor) a block of 16 drafts 15;
        # a file with dflash.sample_from_anchor drafts all 16 (dspine_n_max).
        DrafterKind(
            "dspine",
            0,
            15,
            8192,
            True,
            ("draft-dspine", "dspine"),
            "DSpine needs a llama-server with --spec-type draft-dspine: dspine's patched llama-server "
            "(installers/install.sh --with-server), or a DSpine fork's (--fork URL@REF)",
            label="DSpine",
            layout=DSPINE_LAYOUT,
            # The floor is read against the last-write refinement's scores, softmaxed over its
            # top-k candidates (the lattice walk's own confidence). 0.3 was chosen by
            # benchmarks/draft_p_min.py on the SmolLM2 drafter of the earlier guessed layout
            # (retired, issue 46); for a drafter of the reference's layout it is UNCONFIRMED and
            # is measured again once one is trained (issue 48).
            p_min=0.3,
            # draft-dspine joins need_n_rs_seq's list with dspine's DSpine patch (like draft-dflash).
            snapshots=True,
        ),
        # FACTS: DFlash2 is best at 7 on code. A plain DFlash (v1) file reads as this kind too:
        # upstream runs both through draft-dflash, told apart by the selector tensors.
        DrafterKind(
            "dflash",
            1,
            7,
            None,
            True,
            ("draft-dflash", "dflash"),
            "DFlash needs a llama.cpp of late 2026 (upstream: installers/install.sh --with-server) or the buun fork",
            label="DFlash2",
            layout=DFLASH_LAYOUT,
            # Not measured: no DFlash GGUF small enough for this machine exists (the smallest is
            # Qwen3.8's, 1.1 GB, for a 16 GB target), and DFlash2's lattice drafts no per-token
            # probabilities the floor could read; the server's own floor.
            p_min=None,
            snapshots=True,  # draft-dflash is in need_n_rs_seq's list (pinned common/common.h)
        ),
        # FACTS: DSpark accepts about as much as DFlash2 (10.00 against 10.06 on Qwen3-8B, GSM8K),
        # so it ranks just after it. Its files take the anchor-first layout (dflash.sample_from_anchor
        # true, upstream's default when absent): a block of 16 drafts all 16 (in place: 15).
        DrafterKind(
            "dspark",
            2,
            16,
            None,
            True,
            ("draft-dspark", "dspark"),
            "DSpark needs a llama.cpp of late 2026 (upstream: installers/install.sh --with-server)",
            label="DSpark",
            layout=DSPARK_LAYOUT,
            # Not measured: no DSpark GGUF small enough for this machine; the server's own floor.
            p_min=None,
            snapshots=True,  # draft-dspark is in need_n_rs_seq's list (pinned common/common.h)
        ),
        # FACTS: MTP heads draft 2.
        DrafterKind(
            "mtp",
            3,
            2,
            None,
            False,
            ("draft-mtp", "mtp"),
            "MTP drafting needs a llama.cpp of late 2026 (upstream: installers/install.sh --with-server)",
            label="MTP",
            layout=MTP_LAYOUT,
            # Not measured: no target with an MTP head small enough for this machine; the server's own.
            p_min=None,
            snapshots=True,  # draft-mtp is in need_n_rs_seq's list (pinned common/common.h)
        ),
        # FACTS: upstream llama-server's default draft length is 3.
        DrafterKind(
            "draft",
            4,
            3,
            None,
            False,
            ("draft-simple",),
            "draft models need a llama.cpp with --spec-type draft-simple",
            label="draft model",
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


def dspine_n_max(block_size: int = 16, anchor_first: bool = False) -> int:
    """A DSpine file's longest draft: its block less the anchor in place, the whole block
    anchor-first (the file's dflash.block_size and dflash.sample_from_anchor)."""
    return block_size if anchor_first else block_size - 1


def default_n_max(kind: str | None, unknown: int = 0) -> int:
    """The kind's draft length; `unknown` for no drafter or a kind not in the table."""
    found = KINDS.get(kind or "")
    return found.n_max if found else unknown


@dataclass(frozen=True)
class NgramDrafter:
    """Drafts looked up in the context, chained before the model drafter: llama-server's
    n-gram spec type (a launch flag; its drafts go first whenever it finds a match) and the
    in-process engine's prompt lookup (backends/prompt_lookup.py)."""

    # llama-server's --spec-type name. Measured here (SmolLM2 Q8_0 on llama-server, a 90-line
    # file repeated with a class renamed, 400 tokens, greedy): plain 43.8 tok/s, ngram-mod 64.3
    # (1.47x), ngram-simple 44.8; ngram-map-k is what a 4090 report chained before MTP (FACTS).
    spec_type: str = "ngram-mod"
    # Its own draft length (--spec-ngram-mod-n-max): copies run long and a wrong one is cut at
    # its first miss. The per-request length caps it too: with the chain on, a request asks
    # for this much, and the model drafter keeps its launch length.
    n_max: int = 32
    # It drafts only a copy at least this long (--spec-ngram-mod-n-min). Longer than any model
    # drafter's length (MAX_K 16), so a step's draft length says which drafter made it: the
    # server's timings count drafts, not drafters.
    n_min: int = 17
    # The tokens a match must repeat (--spec-ngram-mod-n-match), the server's own default.
    # ngram-mod keeps one next token per hashed n-gram, the latest: in code that repeats
    # itself (six classes that differ in a number) 12 tokens of context are the same before
    # each number and it drafts the wrong one, where 24 reach back to what tells them apart.
    # Measured here (benchmarks/ngram_chain.py --engines server, 160 tokens): on the rewrite
    # the chain kept 6.67 a step at 12 against the model drafter's 7.27, and 7.27 at 24;
    # edit 10.00 and 8.89 (model 8.42), new text 10.67 and 10.00 (model 7.62).
    n_match: int = 24
    # Alone (no model drafter to tell its drafts from) where drafting is switched per request
    # (dspine's patched llama-server: on edit turns only), llama-server runs ngram-simple: the
    # latest earlier occurrence of the context's last `alone_match` tokens, the next
    # `alone_length` drafted; it looks in the request's own tokens only, where ngram-mod's table
    # outlives requests (a repeated prompt drafts whole) and keeps one next token per n-gram.
    # Measured here (benchmarks/ngram_server_settings.py --rounds 2, SmolLM2 Q8_0, 96 tokens,
    # against plain): edit 1.48x at 4/8, 1.41x at 3/16, 1.07x with ngram-mod 24/17; rewrite
    # 1.03x, 0.99x, 1.04x; a looping poem 1.47x, 1.60x, 1.05x. It drafts on new text too (0.90-1.06x
    # plain on bench's prompts in `dspine tune`), so where every turn drafts (an upstream server)
    # ngram-mod's long copies only stay: they rarely fire where nothing is copied.
    # On a GPU a pass of 9 tokens costs about one of 1 (an H200: edit 1.63x, rewrite 1.32x at
    # 4/8), so a short match's draft costs next to nothing.
    alone_spec_type: str = "ngram-simple"
    alone_match: int = 4
    alone_length: int = 8
    # On a CPU a match of 6 (session 26): a 4-token match is a coincidence often enough (a
    # newline and `return self.`) that its 8-token draft's pass, 4.4 plain steps on this CPU,
    # is lost; a 6-token one is the copy. Replayed over 32 texts sampled as the chat samples
    # (benchmarks/copy_length_replay.py --simple 6/8, two sets of 16, 128 tokens), 6/8 against
    # 4/8: edit turn 1.37x / 1.47x against 1.31x / 1.44x, rewrite 1.32x / 1.15x against 1.27x /
    # 1.15x, bench's edits 1.18-1.27x against 1.01-1.17x, new text 1.00x against 0.93-1.00x;
    # timed (benchmarks/ngram_server_settings.py --sampling chat --rounds 16), edit 1.29x
    # against 1.20x, bench's edits 1.26x / 1.07x against 1.10x / 0.96x, rewrite 1.10x both.
    # (ngram-simple drafts at least as many tokens as it matched, so the length stays 8.)
    alone_match_cpu: int = 6
    # On a CPU, where the binary has it (dspine's patch, installers/patches/llama-server-ngram-copy.patch):
    # ngram-copy, the in-process engine's rule for copies (backends/prompt_lookup.py with
    # copy_length.py, ported token for token): a copy is followed, and drafted as far as the
    # tokens it is expected to keep pay for its verify pass, timed by the server as it makes
    # them; none where a plain step pays more. ngram-simple's fixed 8 tokens lost a file
    # rewrite's long copies (a 16-token pass costs 6 plain steps here, a miss all of them).
    weighed_spec_type: str = "ngram-copy"
    weighed: bool = False  # set where the target runs on the CPU (`on_device`)
    weighed_n_max: int = 16  # its longest copy (--spec-ngram-copy-n-max), as in process

    def on_device(self, gpu: bool) -> NgramDrafter:
        """As launched where the target runs on a GPU, or on the CPU (its match, copies weighed)."""
        return self if gpu else replace(self, alone_match=self.alone_match_cpu, weighed=True)

    def launched(self, chained: bool, per_turn: bool = True, spec_types: Sequence[str] | None = None) -> str:
        """The --spec-type it runs as: chained before a model drafter, alone on the turns
        chosen per request (copies weighed where set and the binary's `spec_types` have it;
        None: assumed), or alone on every turn."""
        if chained or not per_turn:
            return self.spec_type
        if self.weighed and (spec_types is None or self.weighed_spec_type in spec_types):
            return self.weighed_spec_type
        return self.alone_spec_type

    def length_flags(
        self, chained: bool, per_turn: bool = True, spec_types: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Its own length and match flags, named after the spec type it runs as."""
        spec = self.launched(chained, per_turn, spec_types)
        if spec == self.weighed_spec_type:
            return {f"--spec-{spec}-n-max": self.weighed_n_max}
        if spec == "ngram-simple":
            return {f"--spec-{spec}-size-n": self.alone_match, f"--spec-{spec}-size-m": self.alone_length}
        prefix = f"--spec-{spec}"
        return {f"{prefix}-n-max": self.n_max, f"{prefix}-n-min": self.n_min, f"{prefix}-n-match": self.n_match}


NGRAM = NgramDrafter()
