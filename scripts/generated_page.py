"""The write-or-`--check` command line every generated docs page shares."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable
from pathlib import Path


def generated_page_main(
    doc: str, page: Path, render: Callable[[], str], source: str, regenerate: str, argv: list[str] | None = None
) -> int:
    """Rewrite `page` from `render()`, or with --check only compare: exit 1 and the start of
    the diff when it is stale (`source` says what changed, `regenerate` how to mend it)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the page is stale")
    parser.add_argument("--path", type=Path, default=page, help=f"the page (default {page.parent.name}/{page.name})")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.path.read_text(encoding="utf-8") if args.path.is_file() else ""
        if current != text:
            print(f"{args.path} is stale: {source} changed. Run `{regenerate}` and commit it.")
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), "file", "now", lineterm="")
            print("\n".join(list(diff)[:40]))
            return 1
        print(f"{args.path} matches {source}")
        return 0
    args.path.write_text(text, encoding="utf-8")
    print(f"wrote {args.path}")
    return 0
