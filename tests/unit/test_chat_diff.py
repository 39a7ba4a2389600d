"""/diff's text: the chat's applied changes, one diff a file from before its first change to now."""

from __future__ import annotations

from app.agent.changes import Changes, net_diffs


def test_a_file_changed_twice_is_one_diff_and_an_undone_one_is_none(tmp_path):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    changes = Changes(tmp_path)
    assert net_diffs(changes.applied) == []
    changes.apply(changes.propose_edit("calc.py", "a - b", "a + b"))
    changes.apply(changes.propose_edit("calc.py", "def add", "def plus"))
    changes.apply(changes.propose_write("new.txt", "hello\n"))
    diffs = net_diffs(changes.applied)
    assert diffs == [
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n-def add(a, b):\n-    return a - b\n"
        "+def plus(a, b):\n+    return a + b\n",
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n",
    ]
    changes.undo()  # new.txt removed: no longer a change
    assert len(net_diffs(changes.applied)) == 1


def test_a_file_changed_back_shows_nothing(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    changes = Changes(tmp_path)
    changes.apply(changes.propose_edit("a.txt", "one", "two"))
    changes.apply(changes.propose_edit("a.txt", "two", "one"))
    assert net_diffs(changes.applied) == []
