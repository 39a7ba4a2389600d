"""Drafting per kind of turn (issue 47): copies from the context pay on an edit and cost on new
text on a CPU, so a tune may draft on edits only. What an edit turn is, and the in-process
engine drafting on one kind and decoding plainly on the other."""

from __future__ import annotations

from app.tui.figures import readout_line
from backends.events import End
from backends.inproc import InprocEngine
from backends.prompt_lookup import LookupSettings
from backends.sampling import Sampling
from backends.turn_kind import TurnDrafting, is_edit_turn
from tests.support.gguf_models import chat_model, write_model

FILE = "```python\n" + "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(4)) + "\n```"
EDIT = [{"role": "user", "content": f"Rename f1 to g1 in this file:\n\n{FILE}"}]
NEW = [{"role": "user", "content": "Write a short poem about the sea."}]


def test_an_edit_turn_holds_code_its_reply_will_copy():
    assert is_edit_turn(EDIT) and not is_edit_turn(NEW)
    assert not is_edit_turn([{"role": "user", "content": "```python\nx = 1\n```"}])  # too short to copy from
    read = [
        {"role": "user", "content": "fix the bug in calc.py"},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "content": "\n".join(f"{n}: line {n}" for n in range(1, 20))},
    ]
    assert is_edit_turn(read)  # a file a tool just read
    earlier = [*EDIT, {"role": "assistant", "content": "done"}, *NEW]
    assert not is_edit_turn(earlier)  # only the newest turn counts
    parts = [{"role": "user", "content": [{"type": "text", "text": EDIT[0]["content"]}]}]
    assert is_edit_turn(parts)
    assert TurnDrafting(new_text=False).drafts(EDIT) and not TurnDrafting(new_text=False).drafts(NEW)
    assert TurnDrafting(new_text=False).plain_on(NEW) == "new text"
    assert TurnDrafting(edit=False).plain_on(EDIT) == "an edit"
    assert TurnDrafting().plain_on(NEW) is None and TurnDrafting(new_text=False).plain_on(EDIT) is None


def test_a_follow_up_that_asks_for_a_change_to_code_in_the_conversation_is_an_edit():
    """Issue 68: "now rename the function to rev" after the model wrote the function was new
    text (only pasted code counted), so a tune's edits-only drafting did not draft its copy."""
    wrote = [
        {"role": "user", "content": "write a python function that reverses a linked list"},
        {"role": "assistant", "content": f"Here it is:\n\n{FILE}"},
    ]
    for asked in ("now rename the function to rev", "change x to y", "Keep everything else, add a docstring"):
        assert is_edit_turn([*wrote, {"role": "user", "content": asked}]), asked
    assert not is_edit_turn([*wrote, {"role": "user", "content": "thanks! what is a linked list for?"}])
    no_code = [NEW[0], {"role": "assistant", "content": "The sea, the sea."}]
    assert not is_edit_turn([*no_code, {"role": "user", "content": "change the last line"}])


def test_the_in_process_engine_drafts_on_edits_only_when_told(tmp_path):
    model = write_model(tmp_path / "m.gguf", chat_model(n_layer=1, n_embd=64))
    engine = InprocEngine(
        str(model), n_ctx=1024, ngram=LookupSettings(), turn_drafting=TurnDrafting(new_text=False, edit=True)
    ).load()
    try:
        ends = {}
        for name, messages in (("edit", EDIT), ("new", NEW)):
            for event in engine.stream(messages, think=False, sampling=Sampling(temperature=0.0, max_tokens=8)):
                if isinstance(event, End):
                    ends[name] = event
        assert ends["edit"].stats.copies_asked and not ends["new"].stats.copies_asked
        assert ends["new"].stats.drafted == 0
        # Said as a choice, not as a missing drafter ("n-gram on edits (no GPU) ... no drafter").
        assert ends["new"].stats.plain_turn == "new text" and ends["edit"].stats.plain_turn is None
        assert "no drafting on new text here" in ends["new"].stats.summary()
        assert "no drafter" not in ends["new"].stats.summary()
        assert "no drafting on new text here" in readout_line(ends["new"].stats)
    finally:
        engine.close()
