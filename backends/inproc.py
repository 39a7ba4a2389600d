"""In-process engine on llama-cpp-python's low-level API: plain decoding, and
dspine's own draft/verify loop with a draft GGUF.

Each step the drafter proposes k tokens one by one; the target checks
[last, *draft] in one batch; the matching prefix plus one target token is
kept (greedy), or rejection sampling decides (speculative.py); both KV caches
are rolled back past what was kept. Hybrid targets (qwen35: Gated DeltaNet +
attention) roll back through recurrent-state snapshots (`n_rs_seq`).
"""

from __future__ import annotations

import codecs
import ctypes
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psutil

from .adaptive import AdaptiveDraft
from .base import EngineError, check_model_file, check_same_vocabulary
from .chat_template import render
from .events import STATS_INTERVAL_S, End, Error, Event, StatsUpdate
from .gguf_header import read_local
from .sampling import Sampling, preset
from .speculative import accept_greedy, accept_sampled, distribution, sample
from .stats import Stats
from .thinking import ThinkSplitter


def _count_positions(stats: Stats, drafted: int, accepted: int) -> None:
    """Position i was tested when every draft token before it was kept."""
    while len(stats.position_tested) < drafted:
        stats.position_tested.append(0)
        stats.position_kept.append(0)
    for i in range(min(accepted + 1, drafted)):
        stats.position_tested[i] += 1
    for i in range(accepted):
        stats.position_kept[i] += 1


def _llama():
    import llama_cpp

    return llama_cpp


_BACKEND_READY = threading.Lock()
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
    """One model and its context, with just what the loop needs."""

    def __init__(self, path: str, n_ctx: int, gpu_layers: int, n_batch: int, rollback: int) -> None:
        llama = _llama()
        _init_backend()
        params = llama.llama_model_default_params()
        params.n_gpu_layers = gpu_layers
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
        cparams.n_seq_max = 1
        # llama.cpp's library default is 4 threads; llama-server uses the physical cores.
        threads = psutil.cpu_count(logical=False) or os.cpu_count() or 4
        cparams.n_threads = cparams.n_threads_batch = threads
        if self.recurrent:
            cparams.n_rs_seq = rollback  # snapshots to roll a rejected draft back
        self.ctx = llama.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            llama.llama_model_free(self.model)
            raise EngineError(f"llama.cpp could not create a context of {n_ctx} tokens for {path}", "try a smaller --ctx")
        self.n_ctx = llama.llama_n_ctx(self.ctx)
        self.memory = llama.llama_get_memory(self.ctx)
        self.batch = llama.llama_batch_init(n_batch, 0, 1)
        self.n_batch = n_batch
        self.n_past = 0

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

    def decode(self, tokens: list[int], all_logits: bool) -> np.ndarray:
        """Feed tokens at n_past; return logits of every position (all_logits) or the last."""
        llama = _llama()
        rows = []
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            last_chunk = start + self.n_batch >= len(tokens)
            batch = self.batch
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = self.n_past + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = all_logits or (last_chunk and i == len(chunk) - 1)
            if llama.llama_decode(self.ctx, batch) != 0:
                raise EngineError("llama.cpp failed to decode (the context may be full)", "start a new chat or raise --ctx")
            self.n_past += len(chunk)
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
        ok = bool(_llama().llama_memory_seq_rm(self.memory, 0, n_keep, -1))
        if ok:
            self.n_past = n_keep
        return ok

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
        self.n_past = 0

    def free(self) -> None:
        llama = _llama()
        if self.ctx:
            llama.llama_batch_free(self.batch)
            llama.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            llama.llama_model_free(self.model)
            self.model = None


@dataclass
class InprocEngine:
    model_path: str
    draft_path: str | None = None
    n_ctx: int = 4096
    gpu_layers: int = 999
    n_max: int = 4
    adaptive: AdaptiveDraft | None = None  # learns the draft length per think mode when given
    on_close: Callable[[], None] | None = None  # e.g. save what `adaptive` learned
    name: str = "inproc"
    _target: _Model | None = field(default=None, init=False, repr=False)
    _drafter: _Model | None = field(default=None, init=False, repr=False)
    _template: str | None = field(default=None, init=False, repr=False)
    _cancel: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    notes: list[str] = field(default_factory=list, init=False)

    @property
    def drafter(self) -> str | None:
        return "draft" if self._drafter is not None else None

    def load(self) -> "InprocEngine":
        target = check_model_file(self.model_path, "model")
        if self.draft_path:
            check_same_vocabulary(target, check_model_file(self.draft_path, "drafter"))
        self._template = read_local(target).get("tokenizer.chat_template")
        n_batch = max(512, self.n_max + 1)
        self._target = _Model(self.model_path, self.n_ctx, self.gpu_layers, n_batch, rollback=self.n_max + 1)
        if self.draft_path:
            self._drafter = _Model(self.draft_path, self.n_ctx, self.gpu_layers, n_batch, rollback=self.n_max + 1)
            stuck = [m for m in (self._target, self._drafter) if not m.can_roll_back()]
            if stuck:
                # Speculation needs to take rejected drafts back; without that, plain decoding.
                self._drafter.free()
                self._drafter = None
                self.notes.append(
                    "this llama.cpp cannot roll back the "
                    + ("target" if stuck[0] is self._target else "drafter")
                    + "'s state (a recurrent model without snapshots): running without the drafter"
                )
        return self

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()
            self.on_close = None
        for model in (self._drafter, self._target):
            if model is not None:
                model.free()
        self._drafter = self._target = None

    def cancel(self) -> None:
        self._cancel.set()

    def _verify_costs(self, longest: int, rounds: int = 3) -> list[float]:
        """How long a target pass of 1..longest tokens takes (all logits, as a verify pass).
        Not a straight line: kernels work in tiles. Lengths take turns round by round and
        each keeps its fastest round, so a burst of load elsewhere does not bend the shape."""
        target = self._target
        assert target is not None
        best = [float("inf")] * longest
        for _ in range(rounds):
            for n in range(1, longest + 1):
                target.reset()
                started = time.perf_counter()
                target.decode([0] * n, all_logits=True)
                best[n - 1] = min(best[n - 1], time.perf_counter() - started)
        target.reset()
        return best

    # -- generation ------------------------------------------------------------------

    def prompt_tokens(self, messages: list[dict[str, Any]], think: bool) -> list[int]:
        assert self._target is not None
        return self._target.tokenize(render(self._template, messages, enable_thinking=think))

    def generate_tokens(
        self, prompt: list[int], sampling: Sampling, n_max: int | None = None, stats: Stats | None = None
    ) -> Iterator[list[int]]:
        """Yield tokens as they are decided (a list per step). The contexts start fresh."""
        target = self._target
        assert target is not None
        stats = stats if stats is not None else Stats()
        rng = np.random.default_rng(sampling.seed)
        limit = sampling.max_tokens or (self.n_ctx - len(prompt))
        k = max(1, n_max or self.n_max)
        drafter = self._drafter
        for model in (target, drafter):
            if model is not None:
                model.reset()
        seen = np.zeros(target.n_vocab, dtype=bool)

        def probs_of(logits: np.ndarray) -> np.ndarray:
            return distribution(logits, sampling, seen if sampling.presence_penalty else None)

        started = time.monotonic()
        logits = target.decode(prompt, all_logits=False)[-1]
        stats.prompt_tokens, stats.prompt_s = len(prompt), time.monotonic() - started
        if drafter is not None:
            drafter.decode(prompt[:-1], all_logits=False) if len(prompt) > 1 else None
        cur = sample(probs_of(logits), rng)
        pending_draft = [prompt[-1]] if drafter is not None else []  # tokens the drafter still has to read
        decode_started = time.monotonic()
        produced = 0
        while True:
            seen[cur] = True
            produced += 1
            yield [cur]
            if target.is_eog(cur) or produced >= limit or self._cancel.is_set():
                return
            room = min(k, limit - produced, target.n_ctx - target.n_past - 2)
            if drafter is None or room < 1:
                logits = target.decode([cur], all_logits=False)[-1]
                stats.verify_steps += 1
                cur = sample(probs_of(logits), rng)
                stats.generated_tokens, stats.decode_s = produced, time.monotonic() - decode_started
                continue
            # Draft `room` tokens, one at a time, remembering the drafter's distributions.
            draft, draft_probs = [], []
            feed = pending_draft + [cur]
            drafting = time.monotonic()
            for _ in range(room):
                d_logits = drafter.decode(feed, all_logits=False)[-1]
                q = probs_of(d_logits)
                token = sample(q, rng)
                draft.append(token)
                draft_probs.append(q)
                feed = [token]
            verifying = time.monotonic()
            stats.draft_s += verifying - drafting
            base = target.n_past
            verify = target.decode([cur, *draft], all_logits=True)
            stats.verify_s += time.monotonic() - verifying
            stats.verify_steps += 1
            stats.drafted += len(draft)
            if sampling.greedy:
                verdict = accept_greedy(draft, verify)
            else:
                verdict = accept_sampled(draft, draft_probs, [probs_of(row) for row in verify], rng)
            stats.accepted += verdict.accepted
            _count_positions(stats, len(draft), verdict.accepted)
            keep = base + 1 + verdict.accepted  # cur and the accepted drafts
            if not target.rollback(keep):
                raise EngineError(
                    "this target cannot roll back a rejected draft (a recurrent model without snapshots)",
                    "use --draft none for this model",
                )
            # The drafter read cur and draft[:-1]; keep what was accepted, catch up on the rest next step.
            drafter_keep = min(keep, drafter.n_past)
            if not drafter.rollback(drafter_keep):
                raise EngineError("the drafter cannot roll back its draft", "use another drafter or --draft none")
            pending_draft = draft[: verdict.accepted][drafter.n_past - base - 1 :] if verdict.accepted else []
            for token in draft[: verdict.accepted]:
                seen[token] = True
                produced += 1
                if target.is_eog(token):
                    yield [token]
                    return
            if verdict.accepted:
                yield draft[: verdict.accepted]
            cur = verdict.next_token
            stats.generated_tokens, stats.decode_s = produced, time.monotonic() - decode_started
            if produced >= limit:
                return

    def stream(
        self,
        messages: list[dict[str, Any]],
        think: bool = True,
        sampling: Sampling | None = None,
        n_max: int | None = None,
    ) -> Iterator[Event]:
        if self._target is None:
            yield Error("the in-process engine is not loaded", "open it again")
            return
        self._cancel.clear()
        sampling = sampling or preset(think)
        if n_max is None and self.adaptive is not None and self._drafter is not None:
            if self.adaptive.wants_calibration():
                self.adaptive.calibrated(self._verify_costs(self.adaptive.max_k + 1))
            n_max = self.adaptive.choose(think)
        prompt_text = render(self._template, messages, enable_thinking=think)
        splitter = ThinkSplitter(inside=prompt_text.rstrip().endswith("<think>"))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        stats = Stats()
        started = time.monotonic()
        last_stats = 0.0
        reason = "stop"
        try:
            prompt = self._target.tokenize(prompt_text)
            if len(prompt) >= self.n_ctx:
                yield Error(f"the prompt has {len(prompt)} tokens, the context {self.n_ctx}", "raise --ctx or shorten the chat")
                return
            generated = 0
            for tokens in self.generate_tokens(prompt, sampling, n_max, stats):
                for token in tokens:
                    generated += 1
                    if self._target.is_eog(token):
                        reason = "stop"
                        continue
                    text = decoder.decode(self._target.piece(token))
                    if text:
                        if stats.ttft_s is None:
                            stats.ttft_s = time.monotonic() - started
                        yield from splitter.feed(text)
                now = time.monotonic()
                if now - last_stats >= STATS_INTERVAL_S:
                    last_stats = now
                    yield StatsUpdate(stats.copy())
                if self._cancel.is_set():
                    reason = "cancelled"
                    break
            else:
                if sampling.max_tokens and generated >= sampling.max_tokens:
                    reason = "length"
            tail = decoder.decode(b"", final=True)
            if tail:
                yield from splitter.feed(tail)
            yield from splitter.flush()
            stats.generated_tokens = generated
            if self.adaptive is not None and stats.drafted:
                self.adaptive.mode(think).add(
                    stats.position_tested, stats.position_kept, stats.draft_s, stats.drafted, stats.verify_s,
                    stats.verify_steps,
                )
            yield End(reason, stats.copy())
        except EngineError as exc:
            yield Error(exc.cause, exc.fix)
