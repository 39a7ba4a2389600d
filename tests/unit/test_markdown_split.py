"""Cutting a growing Markdown text into segments that render as the whole would."""

from __future__ import annotations

import random

from markdown_it import MarkdownIt

from app.tui.markdown_split import split_all, split_point

DOCUMENT = """Intro with **bold** and `code`.

# Heading

Setext heading
--------------

- item one

- item two, loose
  continued

1. first
2. second

   still the second

3. third

```python
def f(x):

    return x + 1
```

~~~
tilde fence

```
not a close
~~~

> quote line
> more

| a | b |
|---|---|
| 1 | 2 |

    indented code

    more indented code

Tail paragraph with a [link](http://x).

Last words.
"""


def blocks(text: str) -> list[tuple[str, str]]:
    """Top-level blocks as (type, attributes that show): enough to see a list split or renumbered."""
    tokens = MarkdownIt("gfm-like").parse(text)
    return [(t.type, str(t.attrs.get("start", ""))) for t in tokens if t.level == 0 and t.nesting >= 0]


def test_every_segment_renders_as_its_part_of_the_whole():
    whole = blocks(DOCUMENT)
    for min_lines in (1, 2, 3, 5, 8, 200):
        pieces = split_all(DOCUMENT, min_lines)
        assert "".join(pieces) == DOCUMENT
        assert [b for piece in pieces for b in blocks(piece)] == whole, min_lines
    assert len(split_all(DOCUMENT, 1)) >= 9  # it does cut
    assert split_all(DOCUMENT, 200) == [DOCUMENT]


def test_cuts_skip_fences_lists_and_indented_lines():
    assert split_point("```\na\n\nb\n```\n", 1) is None
    assert split_point("- a\n\n- b\n", 1) is None
    assert split_point("1. a\n\n2. b\n", 1) is None
    assert split_point("para\n\n    code\n", 1) is None
    assert split_point("para\n\nnext\n", 1) == len("para\n\n")
    assert split_point("para\n\n", 1) is None  # the next line has not begun
    assert split_point("para\n\nnext", 1) is None  # nor ended
    assert split_point("a\n\nb\n\nc\n", 3) == len("a\n\nb\n\n")  # at least min_lines before


def test_streamed_cuts_are_as_safe_as_cuts_of_the_whole():
    # How the chat cuts while streaming: as soon as a cut appears, even inside text already
    # shown (the segment is then drawn again without its last partial line).
    whole = blocks(DOCUMENT)
    for seed in range(20):
        rng = random.Random(seed)
        segments, at = [""], 0
        while at < len(DOCUMENT):
            chunk = DOCUMENT[at : at + rng.randint(1, 12)]
            at += len(chunk)
            combined = segments[-1] + chunk
            cut = split_point(combined, 3)
            if cut is None:
                segments[-1] = combined
            else:
                segments[-1:] = [combined[:cut], combined[cut:]]
        assert "".join(segments) == DOCUMENT
        assert len(segments) > 2
        assert [b for piece in segments for b in blocks(piece)] == whole, seed
