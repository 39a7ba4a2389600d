"""How many copies of a hybrid target's recurrent state an engine keeps to take
rejected drafts back, and the one draft length an engine is launched with. Pure.

A Gated-DeltaNet block's state cannot be cut back like a KV cache, so llama.cpp
keeps snapshots of it (`n_rs_seq`), one per token of the last batch: the state is
allocated n_seq x (1 + n_rs_seq) times. For Qwen3.8-27B one copy is about 157 MB,
so every step of draft length costs that much GPU memory. `dspine fit` counts the
copies with these functions and the engines launch with the length they return,
so the plan and the running server agree.

    llama-server  n_rs_seq = --spec-draft-n-max for the kinds it snapshots for
                  (draft-mtp, -eagle3, -dflash, -dspark, and -dspine with dspine's
                  patch: `DrafterKind.snapshots`), 0 for draft-simple and n-grams;
                  one sequence per slot.
    in process    n_rs_seq = n_max + 1 on the target whatever the drafter (a verify
                  pass of 1 + n_max tokens can be cut back to any kept length), and
                  two sequences: the conversation and the saved prompt state.
"""

from __future__ import annotations

from .drafters import KINDS

# The in-process engine's target context on a recurrent model: SEQ_MAIN and SEQ_SAVED.
INPROC_TARGET_SEQUENCES = 2
# Its draft length when nothing else says (and without a drafter: the snapshots it keeps anyway).
INPROC_DEFAULT_N_MAX = 4


def inproc_target_snapshots(n_max: int) -> int:
    """n_rs_seq of the in-process target: a verify pass of 1 + n_max tokens, cut back anywhere."""
    return n_max + 1


def server_snapshots(kind: str | None, n_max: int) -> int:
    """n_rs_seq llama-server gives the target when drafting with `kind` at `n_max`."""
    found = KINDS.get(kind or "")
    return n_max if found is not None and found.snapshots else 0


def target_snapshots(kind: str | None, n_max: int, hybrid_target: bool, in_process: bool = False) -> int:
    """Recurrent-state snapshots beside the live state, per sequence; 0 on a model without one."""
    if not hybrid_target:
        return 0
    return inproc_target_snapshots(n_max) if in_process else server_snapshots(kind, n_max)


def costs_state_rows(kind: str | None, hybrid_target: bool, in_process: bool = False) -> bool:
    """Whether each step of draft length is one more copy of the target's recurrent state."""
    return hybrid_target and (in_process or server_snapshots(kind, 1) > 0)


def launch_draft_length(
    kind: str | None,
    hybrid_target: bool,
    *,
    in_process: bool = False,
    asked: int | None = None,
    longest: int | None = None,
    memory_cap: int | None = None,
) -> int:
    """The draft length an engine is launched with (llama-server's --spec-draft-n-max, the
    in-process engine's n_max): the longest a request may then ask for.

    `asked`: a length the user fixed (--n-max): taken as it is (the plan counted it).
    `longest`: what adaptive drafting would like to range over (backends.adaptive.MAX_K).
    `memory_cap`: the longest the fit plan affords (one state copy a step).
    Where a step costs a state copy, it is at most the kind's own length and the plan's cap
    (an adaptive length then ranges up to it); elsewhere a longer launch costs a few logit
    rows, nothing more."""
    if asked:
        return asked
    if kind is None and not in_process:
        return 0
    found = KINDS.get(kind or "")
    own = found.n_max if found is not None else INPROC_DEFAULT_N_MAX
    length = longest or own
    if costs_state_rows(kind, hybrid_target, in_process):
        length = min(length, own, memory_cap or length)
    return max(length, 1)
