"""Every relative link in the README and docs/ leads somewhere, and the README shows the chat."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^ {0,4}```.*?^ {0,4}```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def prose(text: str) -> str:
    """The text without code: a link written inside a code block or span is not a link."""
    return CODE.sub("", FENCE.sub("", text))


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text(encoding="utf-8")))


def anchors(page: Path) -> set[str]:
    """The ids the forge (GitHub) gives the page's headings."""
    seen: dict[str, int] = {}
    ids = set()
    for title in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else f"{slug}-{count}")
    return ids


def test_the_link_parser_finds_links_and_skips_code():
    text = "see [a](a.md) and ![b](img/b.svg) but not `[c](c.md)`\n```\n[d](d.md)\n```\n"
    assert LINK.findall(prose(text)) == ["a.md", "img/b.svg"]
    page = ROOT / "docs" / "serve.md"
    assert "dspine-serve-and-web-pages-the-host-and-origin-rules" in anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... not checked here
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with id #{anchor} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_shows_the_chat_screenshot():
    assert "docs/images/chat.svg" in links(ROOT / "README.md")
    svg = (ROOT / "docs" / "images" / "chat.svg").read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<svg") and "dspine" in svg


def test_every_docs_page_is_listed_in_the_index():
    listed = {Path(target.partition("#")[0]).name for target in links(ROOT / "docs" / "index.md")}
    pages = {page.name for page in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert pages <= listed, f"not in docs/index.md: {sorted(pages - listed)}"


def test_the_readme_stays_short_and_gives_the_test_command():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 220
    assert "\nbash scripts/test.sh\n" in text and "bash scripts/test.sh tests/unit" in text


# A path into the checkout, written in the docs: `tests/unit/test_fit.py`, `benchmarks/startup.py`.
NAMED_FILE = re.compile(
    r"(?<![\w./-])((?:app|backends|tests|benchmarks|scripts|installers|assets|docs|\.ci)/[\w./-]*"
    r"\.(?:py|sh|toml|jsonl|patch|ps1|tcss|md|svg))"
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_the_docs_name_exists(page):
    # Code moves (tests regrouped by layer, modules split); the docs must follow.
    named = set(NAMED_FILE.findall(page.read_text(encoding="utf-8")))
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"{page.relative_to(ROOT)} names files that do not exist: {missing}"
