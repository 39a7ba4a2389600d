"""What a client may put in one request, pure: the window a slot really holds and the
point at which a client should compact so that a reply still fits.

llama-server splits its context between the slots (`-c` / `--parallel`) and caps each
slot at the model's trained context; one request sees one slot. A client that believes
in a bigger window never compacts in time and the session ends in an overflow."""

from __future__ import annotations

from dataclasses import dataclass

REPLY_MIN, REPLY_MAX = 512, 16384
# Clients count tokens with their own estimate (often about four characters a token), not
# the model's tokenizer: a tenth of the window absorbs the difference.
MARGIN_SHARE = 10


@dataclass(frozen=True)
class Window:
    context: int  # tokens one slot holds, prompt and reply together
    reply: int  # tokens kept free for one reply
    compact_at: int  # prompt tokens at which a client should compact

    @property
    def compact_share(self) -> float:
        """compact_at as a share of the window (for tools that take a fraction)."""
        return self.compact_at / self.context


def slot_context(n_ctx: int, parallel: int, n_ctx_train: int = 0) -> int:
    """The context one request gets: the shared context over the slots, capped at the
    model's trained context (llama-server caps it there)."""
    per_slot = n_ctx // max(parallel, 1)
    return min(per_slot, n_ctx_train) if n_ctx_train > 0 else per_slot


def budget(context: int) -> Window:
    """An eighth of the window for the reply (512 to 16K tokens), a tenth as margin for
    the client's token estimate; compaction at what is left (about 77%)."""
    reply = max(REPLY_MIN, min(REPLY_MAX, context // 8))
    reply = min(reply, context // 2)
    compact_at = max(context - reply - context // MARGIN_SHARE, 0)
    return Window(context, reply, compact_at)
