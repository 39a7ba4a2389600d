"""Prompts whose answers copy from the context (a file rewritten, a function patched) and
one that copies nothing (a poem): what n-gram drafts chained before a drafter are for, and
where they must cost nothing. Shared by tests/engines/test_ngram_chain.py and
benchmarks/ngram_chain.py."""

from __future__ import annotations

from pathlib import Path


def shapes_file(n_classes: int = 6) -> str:
    """A small Python file of near-repeated classes (about 6 lines a class)."""
    lines: list[str] = []
    for i in range(n_classes):
        lines += [
            f"class Shape{i}:",
            "    def __init__(self, size):",
            f"        self.size = size * {i + 1}",
            "",
            "    def area(self):",
            f"        return self.size ** 2 + {i}",
            "",
        ]
    return "\n".join(lines)


def rewrite(n_classes: int = 6) -> list[dict]:
    """The whole file back with one class renamed: nearly all of it a copy."""
    return [
        {
            "role": "user",
            "content": "Repeat this file exactly, with the class Shape1 renamed to Square:\n\n```python\n"
            + shapes_file(n_classes)
            + "\n```",
        }
    ]


def edit(n_classes: int = 6) -> list[dict]:
    """A patch of one method: the old text quoted back, then the new."""
    return [
        {
            "role": "user",
            "content": "In this file:\n\n```python\n"
            + shapes_file(n_classes)
            + "\n```\n\nShow the class Shape2 exactly as it is, then the same class with area() "
            "returning the size cubed.",
        }
    ]


def other_files(classes: range = range(4, 10)) -> dict[str, list[dict]]:
    """An edit and a rewrite of files of each size: other prompts, so greedy decoding (one text
    a prompt) still gives several texts of each kind ("edit 4", "rewrite 4", ...)."""
    return {f"edit {n}": edit(n) for n in classes} | {f"rewrite {n}": rewrite(n) for n in classes}


def kind_of(prompt_name: str) -> str:
    """The kind an `other_files` prompt is of ("edit 4" -> "edit"); other names as they are."""
    return prompt_name.rstrip("0123456789 ")


NEW_TEXT = [{"role": "user", "content": "Write a short poem about the sea at night."}]

PROMPTS = {"rewrite": rewrite(), "edit": edit(), "new text": NEW_TEXT}


def bench_edits() -> dict[str, list[dict]]:
    """bench's edit prompts (what `dspine tune` times edits on): "bench edit 1", ..."""
    import json

    lines = (Path(__file__).resolve().parents[2] / "assets/prompts/edit.jsonl").read_text().splitlines()
    return {f"bench edit {i + 1}": json.loads(line)["messages"] for i, line in enumerate(lines)}


def only(prompts: dict[str, list[dict]], names: str) -> dict[str, list[dict]]:
    """The prompts a benchmark's `--prompts 'a,b'` names, in that order (all of them for "");
    ValueError naming the unknown ones and the ones there are."""
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    if unknown := set(wanted) - set(prompts):
        raise ValueError(f"no prompt named {', '.join(sorted(unknown))} (there are {', '.join(prompts)})")
    return {name: prompts[name] for name in wanted} if wanted else prompts
