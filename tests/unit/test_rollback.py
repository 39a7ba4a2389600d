"""The one draft length engines launch with, and the recurrent-state copies it costs."""

from backends.drafters import KINDS
from backends.rollback import costs_state_rows, launch_draft_length, target_snapshots


def test_the_kinds_llama_server_snapshots_for():
    # need_n_rs_seq in the pinned common/common.h: draft-mtp, -eagle3, -dflash, -dspark (and dspine's patch).
    assert {k.name for k in KINDS.values() if k.snapshots} == {"dspine", "dflash", "dspark", "mtp"}
    assert target_snapshots("dflash", 7, hybrid_target=True) == 7
    assert target_snapshots("mtp", 2, hybrid_target=True) == 2
    assert target_snapshots("draft", 3, hybrid_target=True) == 0  # draft-simple keeps none
    assert target_snapshots("dflash", 7, hybrid_target=False) == 0  # nothing to snapshot
    # The in-process engine snapshots a whole verify pass, whatever the drafter.
    assert target_snapshots("draft", 3, hybrid_target=True, in_process=True) == 4
    assert target_snapshots(None, 4, hybrid_target=True, in_process=True) == 5


def test_launch_length_is_bounded_where_a_step_costs_a_state_copy():
    # Adaptive drafting would range to 16; on a hybrid target DFlash launches at its own 7.
    assert launch_draft_length("dflash", True, longest=16) == 7
    assert launch_draft_length("dspine", True, longest=16) == 15
    assert launch_draft_length("dspine", True, longest=16, memory_cap=9) == 9
    assert launch_draft_length("mtp", True) == 2
    # Where no state is copied, adaptive ranges as far as it likes (a few logit rows).
    assert launch_draft_length("dflash", False, longest=16) == 16
    assert launch_draft_length("draft", True, longest=16, memory_cap=2) == 16
    # A length the user fixed is taken as it is; no drafter, no length.
    assert launch_draft_length("dflash", True, asked=12, memory_cap=3) == 12
    assert launch_draft_length(None, True) == 0
    # In process: its default 4 without anything else, bounded by the drafter's 3 on a hybrid.
    assert launch_draft_length(None, True, in_process=True) == 4
    assert launch_draft_length("draft", True, in_process=True, longest=16) == 3
    assert costs_state_rows("draft", True, in_process=True) and not costs_state_rows("draft", True)
