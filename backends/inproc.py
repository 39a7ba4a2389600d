"""In-process engine on llama-cpp-python's low-level API: plain decoding, and
dspine's own draft/verify loop with a draft GGUF.

Each step the drafter proposes k tokens one by one; the target checks
[last, *draft] in one batch; the matching prefix plus one target token is
kept (greedy), or rejection sampling decides (speculative.py); both caches
are brought back to what was kept. Every distribution, plain, drafted or
verified, comes from `speculative.distribution` with the tokens generated
before that position, so speculation never changes the answer.

Recurrent state (qwen35 hybrids: Gated DeltaNet + attention) cannot be cut
back like a KV cache. The target verifies a draft in one batch, and llama.cpp
keeps a snapshot of the state after each token of the last batch (`n_rs_seq`),
so it can return to any kept length. A hybrid drafter decodes its draft one
token at a time, where those snapshots reach back only one token, so it
drafts on a copy of its sequence (`SEQ_DRAFT`) and its own sequence reads
only the tokens that were kept.

Prefix reuse: each model remembers the tokens in its cache. A new prompt
keeps the longest common prefix (dense models), or, for hybrids, continues
from the whole cache when the prompt extends it, else from a copy of the state
taken at the end of the previous prompt's messages (`SEQ_SAVED`).
"""

from __future__ import annotations

import codecs
import ctypes
import os
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import cpu_repack
from .adaptive import AdaptiveDraft
from .base import ContextFull, EngineError, check_model_file, check_same_vocabulary, estimate_tokens
from .break_even import BreakEven, reply_note
from .chat_template import probe as probe_template
from .chat_template import render
from .copy_length import PassCosts
from .events import STATS_INTERVAL_S, Delta, End, EndReason, Error, Event, StatsUpdate, ToolCall
from .gguf_header import read_local
from .message_order import normalise
from .prompt_lookup import LookupSettings, PromptLookup, point_masses
from .rollback import INPROC_TARGET_SEQUENCES, inproc_target_snapshots
from .sampling import QWEN_CARD, Sampling, SamplingPresets
from .speculative import (
    History,
    Verdict,
    accept_greedy,
    accept_sampled,
    argmaxes,
    distribution,
    rows_distributions,
    sample,
)
from .stats import Stats, count_ngram_step
from .stats import count_positions as _count_positions
from .template_choice import TemplateChoice, choose
from .thinking import ThinkSplitter
from .threads import SAMPLE_S, LoadWatch, RecentLoad, ThreadChoice, disturbed, physical_cores, pick
from .tool_call_text import ToolCallParser
from .turn_kind import TurnDrafting

# Sequences of a recurrent model's context: the conversation, the state saved at the end
# of the last prompt's messages (prefix reuse), and a hybrid drafter's draft.
SEQ_MAIN, SEQ_SAVED, SEQ_DRAFT = 0, 1, 2


def _with_calls(deltas: Iterable[Delta], calls: ToolCallParser) -> Iterator[Delta | ToolCall]:
    """Answer text goes through the tool-call parser; thinking never holds calls. Text the
    parser passes straight through keeps its draft attribution; text it held back a while
    (a possible tag) comes out unattributed."""
    for delta in deltas:
        if delta.kind != "answer":
            yield delta
            continue
        for out in calls.feed(delta.text):
            if delta.drafted and isinstance(out, Delta) and out.text == delta.text:
                yield delta
            else:
                yield out


class _ReplyText:
    """A reply's tokens on their way out as text: bytes put together into UTF-8, thinking
    told from the answer, tool calls parsed out of the answer."""

    def __init__(self, inside_think: bool, tools: list[dict[str, Any]] | None) -> None:
        self.splitter = ThinkSplitter(inside=inside_think)
        self.calls = ToolCallParser(tools)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, piece: bytes) -> str:
        """A token's bytes as text; a character cut across tokens waits for its rest."""
        return self.decoder.decode(piece)

    def feed(self, text: str, drafted: int) -> Iterator[Delta | ToolCall]:
        return _with_calls(self.splitter.feed(text, drafted), self.calls)

    def flush(self) -> Iterator[Delta | ToolCall]:
        """What was held back at the end: an unfinished character, a possible tag, a call."""
        tail = self.decoder.decode(b"", final=True)
        if tail:
            yield from _with_calls(self.splitter.feed(tail), self.calls)
        yield from _with_calls(self.splitter.flush(), self.calls)
        yield from self.calls.flush()


@dataclass(frozen=True)
class _ReplyDrafting:
    """How one reply drafts, decided before it starts and read again at its end."""

    n_max: int | None  # the draft model's length; 0: no drafting; None: the engine's own
    plain_turn: str | None  # the kind of turn decoded plainly (turn_drafting); None: it drafts
    judge: BreakEven | None  # the break-even that judges the lookup's copies
    lookup: bool | None  # look copies up (None: whenever settings exist)


def _padded(counts: list[int], stats: Stats) -> list[int]:
    """Per-position n-gram counts as long as the totals (a lookup draft may reach further)."""
    return counts[: len(stats.position_tested)] + [0] * max(0, len(stats.position_tested) - len(counts))


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def weight_repacking() -> bool:
    """llama.cpp's CPU weight repacking (its AMX and AVX kernels' layouts), on unless
    LLAMA_ARG_REPACK says off: the variable llama-server reads for --no-repack, so one word
    switches it for both engines. Some VMs advertise AMX that those kernels crash on
    (backends/cpu_repack.py, which the app asks before an engine starts)."""
    return cpu_repack.asked_by_user(os.environ) is not False


def _llama():
    import llama_cpp

    return llama_cpp


_BACKEND_READY = threading.Lock()
# A copy's verify pass is timed at load at these lengths (and the longest a copy can be),
# after this much context, in at most about this many seconds: about 0.4 s for SmolLM2-135M
# on two cores. Between them the costs are interpolated; the passes of real replies then
# correct each length (copy_length.PassCosts).
COPY_TIMED_LENGTHS = (1, 2, 3, 5, 9)
COPY_TIMING_DEPTH = 256
COPY_TIMING_BUDGET_S = 1.5
TIMING_PIECE = 64
# How often a reply looks at the others' load (RecentLoad's last second) between two steps.
LOOK_MID_REPLY_S = 0.25
_backend_started = False
_quiet_logs = None


def _init_backend() -> None:
    global _backend_started, _quiet_logs
    with _BACKEND_READY:
        if _backend_started:
            return
        llama = _llama()

        @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
        def quiet(level, text, user_data):
            pass

        _quiet_logs = quiet  # kept referenced: a collected ctypes callback segfaults
        llama.llama_log_set(_quiet_logs, ctypes.c_void_p())
        llama.llama_backend_init()
        _backend_started = True


class _Model:
    """One model and its context, with just what the loop needs. `cached` is what the
    conversation sequence holds, token for token."""

    def __init__(
        self,
        path: str,
        n_ctx: int,
        gpu_layers: int,
        n_batch: int,
        rollback: int,
        drafts: bool = False,
        threads: int | None = None,
    ) -> None:
        llama = _llama()
        _init_backend()
        params = llama.llama_model_default_params()
        params.n_gpu_layers = gpu_layers
        if hasattr(params, "use_extra_bufts") and not weight_repacking():
            params.use_extra_bufts = False
        self.model = llama.llama_model_load_from_file(path.encode(), params)
        if not self.model:
            raise EngineError(f"llama.cpp could not load {path}", "check that it is a complete GGUF (`dspine list`)")
        self.vocab = llama.llama_model_get_vocab(self.model)
        self.n_vocab = llama.llama_vocab_n_tokens(self.vocab)
        self.recurrent = bool(llama.llama_model_is_recurrent(self.model) or llama.llama_model_is_hybrid(self.model))
        cparams = llama.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = min(n_batch, 512)
        # llama.cpp's library default is 4 threads; the engine sets what backends/threads.py picks.
        threads = threads or physical_cores()
        cparams.n_threads = cparams.n_threads_batch = threads
        if self.recurrent:
            cparams.n_rs_seq = rollback  # per-token snapshots of the last batch: a verify pass can be cut back
            # SEQ_MAIN, SEQ_SAVED (, SEQ_DRAFT): the fit plan counts the target's (backends/rollback.py)
            cparams.n_seq_max = INPROC_TARGET_SEQUENCES + 1 if drafts else INPROC_TARGET_SEQUENCES
            cparams.kv_unified = True  # the sequences share one KV buffer (and the context length)
        else:
            cparams.n_seq_max = 1
        self.rollback_limit = rollback if self.recurrent else None
        self.ctx = llama.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            llama.llama_model_free(self.model)
            raise EngineError(
                f"llama.cpp could not create a context of {n_ctx} tokens for {path}", "try a smaller --ctx"
            )
        self.n_ctx = llama.llama_n_ctx(self.ctx)
        self.memory = llama.llama_get_memory(self.ctx)
        self.batch = llama.llama_batch_init(n_batch, 0, 1)
        self.n_batch = n_batch
        self.cached: list[int] = []
        self._numbers: dict[int, bool] = {}
        self.saved: list[int] | None = None  # the tokens SEQ_SAVED holds the state after

    @property
    def n_past(self) -> int:
        return len(self.cached)

    def tokenize(self, text: str) -> list[int]:
        llama = _llama()
        data = text.encode()
        buffer = (llama.llama_token * (len(data) + 16))()
        n = llama.llama_tokenize(self.vocab, data, len(data), buffer, len(buffer), False, True)
        if n < 0:
            raise EngineError("the prompt could not be tokenized", "report it")
        return list(buffer[:n])

    def piece(self, token: int) -> bytes:
        buffer = ctypes.create_string_buffer(64)
        n = _llama().llama_token_to_piece(self.vocab, token, buffer, 64, 0, False)
        return buffer.raw[: max(n, 0)]

    def is_eog(self, token: int) -> bool:
        return bool(_llama().llama_vocab_is_eog(self.vocab, token))

    def is_number(self, token: int) -> bool:
        """Whether the token's text is digits (what an edit changes in what it copies)."""
        known = self._numbers.get(token)
        if known is None:
            known = self._numbers[token] = self.piece(token).strip().isdigit()
        return known

    def decode(self, tokens: list[int], all_logits: bool) -> np.ndarray:
        """Feed tokens to the conversation; logits of every position (all_logits) or the last."""
        rows = self._decode(tokens, self.n_past, SEQ_MAIN, all_logits)
        return rows

    def _decode(self, tokens: list[int], pos: int, seq: int, all_logits: bool) -> np.ndarray:
        llama = _llama()
        rows = []
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            last_chunk = start + self.n_batch >= len(tokens)
            batch = self.batch
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = pos + start + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = seq
                batch.logits[i] = all_logits or (last_chunk and i == len(chunk) - 1)
            if llama.llama_decode(self.ctx, batch) != 0:
                raise ContextFull(
                    "llama.cpp failed to decode (the context may be full)", "start a new chat or raise --ctx"
                )
            if seq == SEQ_MAIN:
                self.cached += chunk
            if all_logits:
                rows += [self._logits(i) for i in range(len(chunk))]
            elif last_chunk:
                rows.append(self._logits(len(chunk) - 1))
        return np.stack(rows)

    def _logits(self, i: int) -> np.ndarray:
        pointer = _llama().llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()

    def rollback(self, n_keep: int) -> bool:
        """Forget positions from n_keep on. False where the model cannot (a recurrent
        model without enough snapshots)."""
        if n_keep >= self.n_past:
            return True
        ok = bool(_llama().llama_memory_seq_rm(self.memory, SEQ_MAIN, n_keep, -1))
        if ok:
            del self.cached[n_keep:]
        return ok

    # -- drafting on a copy (recurrent drafters) ----------------------------------

    def fork(self) -> None:
        """SEQ_DRAFT becomes a copy of the conversation (state shared until written)."""
        llama = _llama()
        llama.llama_memory_seq_rm(self.memory, SEQ_DRAFT, -1, -1)
        llama.llama_memory_seq_cp(self.memory, SEQ_MAIN, SEQ_DRAFT, -1, -1)

    def decode_fork(self, tokens: list[int], pos: int) -> np.ndarray:
        return self._decode(tokens, pos, SEQ_DRAFT, all_logits=False)

    def drop_fork(self) -> None:
        _llama().llama_memory_seq_rm(self.memory, SEQ_DRAFT, -1, -1)

    # -- prompts and prefix reuse ---------------------------------------------------

    def load_prompt(self, tokens: list[int], save_at: int | None = None) -> tuple[np.ndarray | None, int]:
        """Bring the cache to `tokens`, reusing what it already holds; the logits after the
        last token and how many tokens were reused. A recurrent model also saves its state
        after `save_at` tokens, where the next turn's prompt is expected to branch off."""
        if not tokens:
            self.reset()
            return None, 0
        start = self._reuse(tokens)
        rest = tokens[start:]
        if self.recurrent and save_at is not None and start < save_at < len(tokens):
            self.decode(tokens[start:save_at], all_logits=False)
            self._save()
            rest = tokens[save_at:]
        return self.decode(rest, all_logits=False)[-1], start

    def _reuse(self, tokens: list[int]) -> int:
        """Position the cache at the longest reusable prefix of `tokens` (at most all but the
        last token: its logits are needed) and return its length."""
        limit = len(tokens) - 1
        common = common_prefix(self.cached, tokens)
        if not self.recurrent:
            keep = min(common, limit)
            if self.rollback(keep):
                return keep
        elif common == self.n_past and common <= limit:
            return common  # the prompt continues the cache
        elif self.saved is not None and len(self.saved) <= limit and tokens[: len(self.saved)] == self.saved:
            llama = _llama()
            llama.llama_memory_seq_rm(self.memory, SEQ_MAIN, -1, -1)
            llama.llama_memory_seq_cp(self.memory, SEQ_SAVED, SEQ_MAIN, -1, -1)
            self.cached = list(self.saved)
            return len(self.cached)
        self.reset()
        return 0

    def _save(self) -> None:
        llama = _llama()
        llama.llama_memory_seq_rm(self.memory, SEQ_SAVED, -1, -1)
        llama.llama_memory_seq_cp(self.memory, SEQ_MAIN, SEQ_SAVED, -1, -1)
        self.saved = list(self.cached)

    def can_roll_back(self) -> bool:
        """Decode a few tokens and take one back: what a rejected draft needs."""
        self.reset()
        try:
            self.decode([0, 1, 2], all_logits=False)
            return self.rollback(2)
        finally:
            self.reset()

    def reset(self) -> None:
        _llama().llama_memory_clear(self.memory, True)
        self.cached = []
        self.saved = None

    def set_threads(self, threads: int) -> None:
        _llama().llama_set_n_threads(self.ctx, threads, threads)

    def free(self) -> None:
        llama = _llama()
        if self.ctx:
            llama.llama_batch_free(self.batch)
            llama.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            llama.llama_model_free(self.model)
            self.model = None


def _verify(
    target: _Model,
    cur: int,
    draft: list[int],
    draft_probs: list[np.ndarray] | None,
    sampling: Sampling,
    history: History,
    rng: np.random.Generator,
    stats: Stats,
) -> tuple[Verdict, float]:
    """One verify step, whoever drafted: the target reads [cur, *draft] in one pass, the rules
    of speculative sampling keep a prefix of the draft (`draft_probs` None: a copy's point
    masses), the target's cache goes back to what was kept. The verdict and the pass's seconds."""
    base = target.n_past
    verifying = time.monotonic()
    verify = target.decode([cur, *draft], all_logits=True)
    target_probs = rows_distributions(verify, sampling, history, draft)
    if sampling.greedy:
        verdict = accept_greedy(draft, argmaxes(target_probs))
    else:
        verdict = accept_sampled(draft, draft_probs, target_probs, rng)
    spent = time.monotonic() - verifying  # with the rows the verdict read: part of the pass's cost
    stats.verify_s += spent
    stats.verify_steps += 1
    stats.drafted += len(draft)
    stats.accepted += verdict.accepted
    if not target.rollback(base + 1 + verdict.accepted):
        raise EngineError(
            "this target cannot roll back a rejected draft (a recurrent model without snapshots)",
            "use --draft none for this model",
        )
    return verdict, spent


def _propose(
    drafter: _Model, feed: list[int], room: int, sampling: Sampling, history: History, rng: np.random.Generator
) -> tuple[list[int], list[np.ndarray]]:
    """Draft `room` tokens, one at a time, with the sampler the target uses (the drafted
    tokens count as generated for the ones after them); their distributions too."""
    logits = drafter.decode(feed, all_logits=False)[-1]
    forked = drafter.recurrent
    if forked:
        drafter.fork()
    pos = drafter.n_past
    draft: list[int] = []
    probs: list[np.ndarray] = []
    try:
        for j in range(room):
            q = distribution(logits, sampling, history.after(draft))
            token = sample(q, rng)
            draft.append(token)
            probs.append(q)
            if j + 1 < room:
                logits = drafter.decode_fork([token], pos + j)[-1] if forked else drafter.decode([token], False)[-1]
    finally:
        if forked:
            drafter.drop_fork()
    return draft, probs


@dataclass
class _Decided:
    """What a reply has decided so far, for `generate_tokens`' steps: the tokens taken, the
    history the samplers see, the context copies come from, the decode clock; and what the
    steps decide with (the sampler, its random generator, the pass costs a copy is weighed on)."""

    target: _Model
    history: History
    context: PromptLookup | None
    stats: Stats
    limit: int
    sampling: Sampling
    rng: np.random.Generator
    costs: PassCosts | None
    produced: int = 0
    started: float = field(default_factory=time.monotonic)

    def take(self, kept: list[int]) -> tuple[list[int], bool]:
        """A step's accepted drafts: what to yield, and whether the reply ends with them (an
        accepted end of generation ends it after the tokens before it)."""
        for i, token in enumerate(kept):
            if self.target.is_eog(token):
                self.history.add(kept[: i + 1])
                self.produced += i + 1
                return kept[: i + 1], True
        self.history.add(kept)
        if self.context is not None:
            self.context.extend(kept)
        self.produced += len(kept)
        return kept, False

    def step_done(self) -> bool:
        """The figures after a step; whether the reply reached its length."""
        self.stats.generated_tokens, self.stats.decode_s = self.produced, time.monotonic() - self.started
        return self.produced >= self.limit

    def copy_after(self, cur: int, room: int, longer_than: int) -> list[int]:
        """The context's copy to verify after `cur`; [] without the lookup or a copy."""
        if self.context is None:
            return []
        self.context.extend([cur])
        return self.context.draft(room, longer_than=longer_than)

    def verify_copy(self, cur: int, copied: list[int]) -> Verdict:
        """The draft is the context's own: verified like a model's, with a point mass as q."""
        assert self.context is not None
        stats = self.stats
        verdict, spent = _verify(self.target, cur, copied, None, self.sampling, self.history, self.rng, stats)
        stats.ngram_verify_s += spent
        if self.costs is not None:
            self.costs.observe(len(copied) + 1, spent)
        _count_positions(stats, len(copied), verdict.accepted)
        count_ngram_step(stats, len(copied), verdict.accepted)
        self.context.observe(len(copied), verdict.accepted)
        return verdict

    def plain_step(self, cur: int) -> int:
        """The target's own token after `cur`, from a pass of `cur` alone."""
        stepping = time.monotonic()
        logits = self.target.decode([cur], all_logits=False)[-1]
        self.stats.verify_steps += 1
        token = sample(distribution(logits, self.sampling, self.history.seen), self.rng)
        if self.costs is not None:
            self.costs.observe(1, time.monotonic() - stepping)  # what a copy's pass is weighed against
        return token

    def verify_model_draft(
        self, drafter: _Model, unread: list[int], cur: int, room: int, copy_room: int
    ) -> tuple[Verdict, list[int]]:
        """The draft model reads what it has not yet and `cur`, drafts `room` tokens, a copy that
        agrees with all of them rides along, the target verifies: the verdict and the kept drafts."""
        stats = self.stats
        drafting = time.monotonic()
        draft, draft_probs = _propose(drafter, unread + [cur], room, self.sampling, self.history, self.rng)
        stats.draft_s += time.monotonic() - drafting
        # Where the copy being followed agrees with the whole of the model's draft, its
        # tokens after it ride along (point masses, as a copy's): a step keeps at least
        # what the model's draft alone would.
        modelled = len(draft)
        extra = self.context.extension(draft, copy_room) if self.context is not None else []
        if extra:
            draft, draft_probs = [*draft, *extra], [*draft_probs, *point_masses(extra, self.target.n_vocab)]
        verdict, spent = _verify(self.target, cur, draft, draft_probs, self.sampling, self.history, self.rng, stats)
        # The tokens that rode along: their share of the pass is the copies' (the draft
        # model's own cost, which adaptive lengths learn from, leaves them out).
        stats.ngram_verify_s += spent * len(extra) / (1 + len(draft))
        # Positions are the model's; the tokens that rode along count as copies.
        _count_positions(stats, modelled, min(verdict.accepted, modelled))
        stats.ngram_drafted += len(extra)
        stats.ngram_accepted += max(0, verdict.accepted - modelled)
        if self.context is not None:
            self.context.observe_model(min(verdict.accepted, modelled))
        return verdict, draft[: verdict.accepted]


def _drafter_unread(drafter: _Model, base: int, verdict: Verdict, kept: list[int]) -> list[int]:
    """After a model-drafted step verified from `base`: the kept drafts the drafter has still to
    read, its cache brought back to what was kept."""
    if drafter.recurrent:
        return kept  # its own sequence read only cur: the kept drafts come next
    # It read cur and draft[:-1]: keep what was accepted, catch up on the rest next step.
    if not drafter.rollback(min(base + 1 + verdict.accepted, drafter.n_past)):
        raise EngineError("the drafter cannot roll back its draft", "use another drafter or --draft none")
    return kept[drafter.n_past - base - 1 :]


@dataclass
class InprocEngine:
    model_path: str
    draft_path: str | None = None
    n_ctx: int = 4096
    gpu_layers: int = 999
    n_max: int = 4
    adaptive: AdaptiveDraft | None = None  # learns the draft length per think mode when given
    on_close: Callable[[], None] | None = None  # e.g. save what `adaptive` learned
    break_even: BreakEven | None = None  # stops drafting in a mode where it runs below plain decoding
    # Drafts looked up in the conversation, tried before the draft model each step (None: off).
    ngram: LookupSettings | None = None
    # Per think mode, whether the lookup pays on top of the draft model (or plain, without one).
    ngram_break_even: BreakEven | None = None
    # Whether to draft on an edit turn and on new text (backends/turn_kind.py; None: on both).
    turn_drafting: TurnDrafting | None = None
    # What a request samples with where it sets nothing, per think mode (the model's card's).
    presets: SamplingPresets = QWEN_CARD
    # What a target pass of n tokens costs here, which a copy's length is weighed against
    # (None: timed when the engine loads, where the lookup is on and weighs its copies).
    copy_costs: PassCosts | None = None
    name: str = "inproc"
    # CPU threads: the `threads` setting, 0 = the cores others leave free, looked at again
    # before each reply (backends/threads.py); what it runs on now is `thread_choice`.
    threads: int = 0
    thread_choice: ThreadChoice | None = field(default=None, init=False)
    _load: LoadWatch | None = field(default=None, init=False, repr=False)
    _judge_load: LoadWatch | None = field(default=None, init=False, repr=False)
    _recent: RecentLoad | None = field(default=None, init=False, repr=False)
    _target: _Model | None = field(default=None, init=False, repr=False)
    _drafter: _Model | None = field(default=None, init=False, repr=False)
    _template: str | None = field(default=None, init=False, repr=False)
    # The chat template in force and where later system messages go (decided at load).
    template_choice: TemplateChoice | None = field(default=None, init=False)
    _cancel: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    notes: list[str] = field(default_factory=list, init=False)

    @property
    def drafter(self) -> str | None:
        if self._drafter is not None:
            return "draft"
        return "ngram" if self.ngram is not None else None

    @property
    def ngram_chained(self) -> bool:
        """Whether n-gram drafts from the context come first (before the draft model, if any)."""
        return self.ngram is not None

    @property
    def drafter_name(self) -> str | None:
        name = Path(self.draft_path).name if self._drafter is not None and self.draft_path else None
        return f"n-gram + {name}" if name and self.ngram is not None else name

    def load(self) -> InprocEngine:
        self._load = LoadWatch() if self.threads <= 0 else None  # others' load, sampled while it loads
        target = check_model_file(self.model_path, "model")
        if self.draft_path:
            check_same_vocabulary(target, check_model_file(self.draft_path, "drafter"))
        self.template_choice = choose(read_local(target).get("tokenizer.chat_template"))
        self._template = self.template_choice.text
        probe_template(self._template, str(target))
        # A verify pass is cut back this far: the draft model's length or the lookup's, the longer.
        longest = max(self.n_max, self.ngram.n_max if self.ngram else 0)
        n_batch = max(512, longest + 1)
        self._target = _Model(
            self.model_path, self.n_ctx, self.gpu_layers, n_batch, rollback=inproc_target_snapshots(longest)
        )
        if self.draft_path:
            # A drafter never cuts its own sequence back by more than one token: it drafts on a copy.
            self._drafter = _Model(self.draft_path, self.n_ctx, self.gpu_layers, n_batch, rollback=0, drafts=True)
            if not self._target.can_roll_back():
                # Speculation needs to take rejected drafts back; without that, plain decoding.
                self._drafter.free()
                self._drafter = None
                self.notes.append(
                    "this llama.cpp cannot roll back the target's state (a recurrent model without "
                    "snapshots): running without the drafter"
                )
        self._follow_load(settle=True)
        if self.copy_costs is None:
            try:
                self.copy_costs = self._time_copies()
            except BaseException:
                self.close()
                raise
        return self

    def _follow_load(self, settle: bool = False) -> None:
        """The thread count for the load others put on the machine now; `settle`: the first look,
        over the model's load, given its whole sample window (a small model loads in less);
        later looks ask the last second's load (RecentLoad), kept while the engine is open."""
        if self._load is None:
            self.thread_choice = pick(physical_cores(), -1.0, self.threads)
        elif settle:
            self._load.settle(SAMPLE_S)
            self.thread_choice = pick(physical_cores(), self._load.busy())
            self._recent = RecentLoad()
        else:
            recent = self._recent.busy() if self._recent is not None else None
            if recent is None:
                return  # no look yet since the load's: its choice stands
            kept = self.thread_choice
            self.thread_choice = pick(physical_cores(), recent)
            if kept is not None and kept.threads == self.thread_choice.threads:
                return  # the contexts run on it already
        for model in (self._target, self._drafter):
            if model is not None:
                model.set_threads(self.thread_choice.threads)

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()
            self.on_close = None
        if self._recent is not None:
            self._recent.close()
            self._recent = None
        for model in (self._drafter, self._target):
            if model is not None:
                model.free()
        self._drafter = self._target = None

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def context_size(self) -> int | None:
        return self._target.n_ctx if self._target is not None else self.n_ctx

    def count_tokens(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, think: bool = True
    ) -> int:
        """The model's own template and tokenizer, as `stream` renders the prompt."""
        if self._target is None:
            return estimate_tokens(messages, tools)
        text = render(self._template, messages, enable_thinking=think, tools=tools, source=self.model_path)
        return len(self._target.tokenize(text))

    def _verify_costs(self, longest: int, rounds: int = 3) -> list[float]:
        """How long a target pass of 1..longest tokens takes (all logits, as a verify pass).
        Not a straight line: kernels work in tiles."""
        timed = self._time_passes(range(1, longest + 1), rounds)
        return [timed[n] for n in range(1, longest + 1)]

    def _time_passes(
        self, lengths: Iterable[int], rounds: int, depth: int = 0, budget_s: float | None = None
    ) -> dict[int, float]:
        """The seconds of a target pass of each length (all logits, as a verify pass), after
        `depth` tokens of context. Lengths take turns round by round and each keeps its fastest
        round, so a burst of load elsewhere does not bend the shape. `budget_s`: no new pass
        once this much time went to them (the first round's two shortest always run: a big
        model on a CPU takes seconds a pass)."""
        target = self._target
        assert target is not None
        lengths = sorted(set(lengths))
        best: dict[int, float] = {}
        target.reset()
        started = time.perf_counter()
        try:
            # The context the passes follow, in pieces: a big model on a CPU takes seconds a
            # piece, and stops short of the depth asked at half the budget.
            while target.n_past < depth:
                piece = min(TIMING_PIECE, depth - target.n_past)
                target.decode([0] * piece, all_logits=False)
                if budget_s is not None and time.perf_counter() - started > budget_s / 2:
                    break
            depth = target.n_past
            spent = time.perf_counter() - started
            for round_ in range(rounds):
                for i, n in enumerate(lengths):
                    if budget_s is not None and spent > budget_s and (round_ or i >= 2):
                        return best
                    started = time.perf_counter()
                    target.decode([0] * n, all_logits=True)
                    took = time.perf_counter() - started
                    best[n] = min(best.get(n, took), took)
                    if not target.rollback(depth):  # a recurrent model out of snapshots: again
                        target.reset()
                        if depth:
                            target.decode([0] * depth, all_logits=False)
                    spent += time.perf_counter() - started  # the budget counts that too
            return best
        finally:
            target.reset()

    def _time_copies(self) -> PassCosts | None:
        """The pass costs a copy's length is weighed against (None: the lookup is off, or eager)."""
        if self.ngram is None or not self.ngram.weigh_copies or self._drafter is not None:
            return None  # chained before a draft model, a copy is weighed against its drafts instead
        longest = self.ngram.n_max + 1
        lengths = [n for n in COPY_TIMED_LENGTHS if n < longest] + [longest]
        depth = min(COPY_TIMING_DEPTH, self.n_ctx // 4)
        return PassCosts(self._time_passes(lengths, rounds=2, depth=depth, budget_s=COPY_TIMING_BUDGET_S))

    # -- generation ------------------------------------------------------------------

    def prompt_tokens(self, messages: list[dict[str, Any]], think: bool, reply_start: str = "") -> list[int]:
        """`reply_start`: text the assistant's reply is made to begin with (the model goes on from it)."""
        assert self._target is not None
        messages = self._ordered(messages)
        return self._target.tokenize(
            render(self._template, messages, enable_thinking=think, source=self.model_path) + reply_start
        )

    def _ordered(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Later system and developer messages where the template takes them (message_order)."""
        return normalise(messages, self.template_choice.rule) if self.template_choice else messages

    def text_of(self, tokens: list[int]) -> str:
        assert self._target is not None
        return b"".join(self._target.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def generate_tokens(
        self,
        prompt: list[int],
        sampling: Sampling,
        n_max: int | None = None,
        stats: Stats | None = None,
        save_at: int | None = None,
        lookup: bool | None = None,
    ) -> Iterator[list[int]]:
        """Yield tokens as they are decided (a list per step). The caches keep what they
        share with the prompt; a hybrid saves its state after `save_at` prompt tokens.
        `lookup`: try n-gram drafts from the context first (None: whenever settings exist)."""
        target = self._target
        assert target is not None
        stats = stats if stats is not None else Stats()
        rng = np.random.default_rng(sampling.seed)
        limit = sampling.max_tokens or (self.n_ctx - len(prompt))
        drafter = None if n_max == 0 else self._drafter  # 0: no drafting (as llama-server's request field)
        k, ngram_k, chained_past = self._step_lengths(target, n_max, drafter is not None)
        context = self._copy_context(target, prompt, n_max, lookup)
        history = History(target.n_vocab)
        logits = self._read_prompt(prompt, save_at, drafter, stats)
        cur = sample(distribution(logits, sampling, history.seen), rng)
        unread = [prompt[-1]] if drafter is not None else []  # tokens the drafter still has to read
        reply = _Decided(target, history, context, stats, limit, sampling, rng, self.copy_costs)
        try:
            while True:
                history.add([cur])
                reply.produced += 1
                yield [cur]
                if target.is_eog(cur) or reply.produced >= limit or self._cancel.is_set():
                    return
                space = min(limit - reply.produced, target.n_ctx - target.n_past - 2)
                copied = reply.copy_after(cur, min(ngram_k, space), chained_past)
                if copied:
                    verdict = reply.verify_copy(cur, copied)
                    kept = copied[: verdict.accepted]
                    if drafter is not None:
                        unread = [*unread, cur, *kept]  # the draft model read none of them
                elif drafter is None or min(k, space) < 1:
                    cur = reply.plain_step(cur)
                    reply.step_done()
                    continue
                else:
                    base = target.n_past
                    verdict, kept = reply.verify_model_draft(drafter, unread, cur, min(k, space), min(ngram_k, space))
                    unread = _drafter_unread(drafter, base, verdict, kept)
                decided, ended = reply.take(kept)
                if decided:
                    yield decided
                if ended:
                    return
                cur = verdict.next_token
                if reply.step_done():
                    return
        except GeneratorExit:
            raise
        except BaseException:
            self._forget()  # a step broken off midway leaves the caches unknown
            raise

    def _step_lengths(self, target: _Model, n_max: int | None, model_drafts: bool) -> tuple[int, int, int]:
        """How far a step drafts: the draft model's length, a copy's, and the length a copy
        must pass to go before the model's draft."""
        k = max(1, n_max or self.n_max)
        if target.rollback_limit is not None:
            k = min(k, target.rollback_limit)  # a verify pass can be cut back only this far
        ngram_k = self.ngram.n_max if self.ngram is not None else 0
        if target.rollback_limit is not None:
            ngram_k = min(ngram_k, target.rollback_limit)
        # Chained before the draft model, a copy goes first only when it is longer than the
        # model's draft; where the rollback cap holds both to the same length (a hybrid
        # target), a copy of that whole length goes first (it costs no drafter decodes).
        chained_past = min(k, ngram_k - 1) if model_drafts else 0
        return k, ngram_k, chained_past

    def _copy_context(
        self, target: _Model, prompt: list[int], n_max: int | None, lookup: bool | None
    ) -> PromptLookup | None:
        """The context copies are looked up in; None where this reply looks none up."""
        if self.ngram is None or n_max == 0 or lookup is False:
            return None
        return PromptLookup(self.ngram, prompt, self.copy_costs, target.is_number)

    def _read_prompt(self, prompt: list[int], save_at: int | None, drafter: _Model | None, stats: Stats) -> np.ndarray:
        """The prompt read into the caches (what they hold of it reused); the logits after it."""
        target = self._target
        assert target is not None
        started = time.monotonic()
        try:
            logits, stats.prompt_cached = target.load_prompt(prompt, save_at)
            if drafter is not None:
                # The drafter reads the last prompt token with the first token it drafts after.
                drafter.load_prompt(prompt[:-1], save_at)
        except BaseException:
            self._forget()
            raise
        assert logits is not None
        stats.prompt_tokens, stats.prompt_s = len(prompt) - stats.prompt_cached, time.monotonic() - started
        return logits

    def _forget(self) -> None:
        for model in (self._target, self._drafter):
            if model is not None:
                model.reset()

    def stream(
        self,
        messages: list[dict[str, Any]],
        think: bool = True,
        sampling: Sampling | None = None,
        n_max: int | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> Iterator[Event]:
        if self._target is None:
            yield Error("the in-process engine is not loaded", "open it again")
            return
        self._cancel.clear()
        if self._load is not None:
            self._follow_load()  # a build that started (or ended) since the last reply
        # Others' load before this reply and while it runs: a load that came mid-reply (a spike)
        # makes it slow for a reason that is not drafting's, and it is not judged.
        self._judge_load = self._judge_load or LoadWatch()
        busy_before = self._judge_load.busy()
        threads_before = self.thread_choice.threads if self.thread_choice is not None else 0
        sampling = sampling or self.presets.for_mode(think)
        plan = self._plan_drafting(messages, think, n_max)
        prompt_text, history_text = self._prompt_texts(self._ordered(messages), think, tools)
        out = _ReplyText(prompt_text.rstrip().endswith("<think>"), tools)
        stats = Stats(
            draft_asked=self._drafter is not None and plan.n_max != 0,
            copies_asked=self.ngram is not None and plan.n_max != 0,
            plain_turn=plan.plain_turn,
        )
        started = time.monotonic()
        try:
            prompt = self._target.tokenize(prompt_text)
            if len(prompt) >= self.n_ctx:
                yield Error(
                    f"the prompt has {len(prompt)} tokens, the context {self.n_ctx}",
                    "raise --ctx or shorten the chat",
                    overflow=True,
                )
                return
            save_at = self._save_point(prompt, prompt_text, history_text)
            # The steps are handed over unnamed: a cancel's early return closes them at once.
            reason, generated = yield from self._step_events(
                self.generate_tokens(prompt, sampling, plan.n_max, stats, save_at, plan.lookup),
                stats,
                out,
                started,
                sampling.max_tokens,
            )
            yield from out.flush()
            if out.calls.calls and reason == "stop":
                reason = "tool_calls"
            stats.generated_tokens = generated
            self._learn_lengths(think, stats)
            # A count that changed mid-reply followed a load that came or went: its speed is theirs.
            moved = self.thread_choice is not None and self.thread_choice.threads != threads_before
            stats.draft_note = self._draft_note(think, stats, plan, reason, busy_before, moved)
            yield End(reason, stats.copy())
        except EngineError as exc:
            yield Error(exc.cause, exc.fix, overflow=isinstance(exc, ContextFull))

    def _plan_drafting(self, messages: list[dict[str, Any]], think: bool, n_max: int | None) -> _ReplyDrafting:
        """How this reply drafts: not where a break-even or the kind of turn says plain
        decoding pays, at adaptive's length where it learns one; the lookup where it pays."""
        if self.break_even is not None and self._drafter is not None and not self.break_even.drafting(think):
            n_max = 0
        plain_turn = self.turn_drafting.plain_on(messages) if self.turn_drafting is not None else None
        if plain_turn is not None:
            n_max = 0  # this kind of turn decodes plainly here (a tune's measured choice)
        if n_max is None and self.adaptive is not None and self._drafter is not None:
            if self.adaptive.wants_calibration():
                self.adaptive.calibrated(self._verify_costs(self.adaptive.max_k + 1))
            n_max = self.adaptive.choose(think)
        judge = self.ngram_break_even if self.ngram is not None and n_max != 0 else None
        lookup = judge.drafting(think) if judge is not None else None
        return _ReplyDrafting(n_max, plain_turn, judge, lookup)

    def _prompt_texts(
        self, messages: list[dict[str, Any]], think: bool, tools: list[dict[str, Any]] | None
    ) -> tuple[str, str]:
        """The prompt, and its messages alone: where the next turn's prompt will branch off,
        before the generation prompt (a hybrid saves its state there)."""
        prompt_text = render(self._template, messages, enable_thinking=think, tools=tools, source=self.model_path)
        history_text = render(
            self._template,
            messages,
            enable_thinking=think,
            add_generation_prompt=False,
            tools=tools,
            source=self.model_path,
        )
        return prompt_text, history_text

    def _save_point(self, prompt: list[int], prompt_text: str, history_text: str) -> int | None:
        """How many prompt tokens the messages alone are, where they begin it token for token."""
        assert self._target is not None
        if not prompt_text.startswith(history_text):
            return None
        head = self._target.tokenize(history_text)
        return len(head) if prompt[: len(head)] == head else None

    def _step_events(
        self,
        steps: Iterator[list[int]],
        stats: Stats,
        out: _ReplyText,
        started: float,
        max_tokens: int | None,
    ) -> Generator[Event, None, tuple[EndReason, int]]:
        """Each step's tokens as text, the figures every STATS_INTERVAL_S; returns why the
        tokens ended and how many there were."""
        assert self._target is not None
        generated = 0
        seen_accepted = 0
        last_stats = 0.0
        last_look = time.monotonic()
        for tokens in steps:
            # A step's accepted drafts come as one list, counted in stats.accepted before it
            # is yielded; the target's own token (correction, bonus, plain) comes alone after.
            drafted = 1 if stats.accepted > seen_accepted else 0
            seen_accepted = stats.accepted
            for token in tokens:
                generated += 1
                if self._target.is_eog(token):
                    continue  # an end of generation has no text
                text = out.decode(self._target.piece(token))
                if text:
                    if stats.ttft_s is None:
                        stats.ttft_s = time.monotonic() - started
                    yield from out.feed(text, drafted)
            now = time.monotonic()
            if now - last_stats >= STATS_INTERVAL_S:
                last_stats = now
                yield StatsUpdate(stats.copy())
            if self._recent is not None and now - last_look >= LOOK_MID_REPLY_S:
                # A build that starts mid-reply takes a core the reply's threads wait on at
                # every step (27x slower on 2 cores): the count follows it between two steps.
                last_look = now
                self._follow_load()
            if self._cancel.is_set():
                return "cancelled", generated
        if max_tokens and generated >= max_tokens:
            return "length", generated
        return "stop", generated

    def _learn_lengths(self, think: bool, stats: Stats) -> None:
        """What adaptive learns from a reply: the draft model's own steps (the lookup's drafts
        are neither its guesses nor its cost)."""
        if self.adaptive is None or not stats.drafted - stats.ngram_drafted:
            return
        tested = [
            t - n for t, n in zip(stats.position_tested, _padded(stats.ngram_position_tested, stats), strict=True)
        ]
        kept = [t - n for t, n in zip(stats.position_kept, _padded(stats.ngram_position_kept, stats), strict=True)]
        self.adaptive.mode(think).add(
            tested,
            kept,
            stats.draft_s,
            stats.drafted - stats.ngram_drafted,
            stats.verify_s - stats.ngram_verify_s,
            stats.verify_steps - stats.ngram_steps,
        )

    def _draft_note(
        self,
        think: bool,
        stats: Stats,
        plan: _ReplyDrafting,
        reason: EndReason,
        busy_before: float,
        threads_moved: bool = False,
    ) -> str | None:
        """What the readout says about drafting in a finished reply (break_even.reply_note)."""
        assert self._judge_load is not None
        return reply_note(
            self.break_even if self._drafter is not None else None,
            plan.judge,
            think,
            stats.generated_tokens,
            stats.decode_s,
            drafter_asked=stats.draft_asked,
            # Against the replies without the lookup (the draft model alone, or plain).
            copies_used=bool(plan.lookup) if reason != "cancelled" else None,
            disturbed=disturbed(busy_before, self._judge_load.busy()) or threads_moved,
        )
