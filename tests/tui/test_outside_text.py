"""Text from a model, a project, an MCP server or a file name is never Textual markup
(issue 51, high 1): a `[@click=...]` in a tool's arguments made the folded tool line a
button, and one click overwrote a file with a screenshot. Every place such text reaches
the screen is walked here with hostile text, and the rendered screen is searched for
what markup would have made of it: an action on a click, or the text's brackets gone."""

from __future__ import annotations

import subprocess

import pytest
from rich.console import Console
from textual.app import App, ComposeResult
from textual.widgets import Markdown

from app.agent.project import open_project
from app.tui.app import ChatApp
from app.tui.screens.consent import ConsentScreen
from app.tui.slash_commands import SlashCommand, help_markdown
from app.tui.widgets.compaction_note import CompactionNote
from app.tui.widgets.markdown_segment import MarkdownSegment
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.tool_line import ToolLine
from tests.support.pilot import send, until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call

VICTIM = "../victim.txt"
HOSTILE = f"[@click=app.screenshot('{VICTIM}')]README.md[/]"
SWITCH = "[@click=app.cycle_mode]x[/]"


def clicks_on_screen(app) -> list[str]:
    """Every click action a mouse could trigger on the screen as drawn now."""
    update = app.screen._compositor.render_update(full=True)
    found = []
    for line in update.strips:
        for strip in line:
            for segment in strip:
                meta = segment.style.meta if segment.style else {}
                if "@click" in meta:
                    found.append(str(meta["@click"]))
    return found


def screen_text(app) -> str:
    update = app.screen._compositor.render_update(full=True)
    return update.render_segments(Console(force_terminal=True, color_system=None, legacy_windows=False))


def hostile_actions(actions: list[str]) -> list[str]:
    return [a for a in actions if "screenshot" in a or "cycle_mode" in a]


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "home" / "repo"
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README.md").write_text("hello\n")
    return root


async def test_a_tool_line_shows_the_models_markup_as_text_and_a_click_runs_nothing(repo, store):
    engine = ScriptedEngine(turns=[[call("read_file", path=HOSTILE)], ["Done."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test(size=(140, 40)) as pilot:
        await send(pilot, "read it")
        await until(pilot, lambda: not app.streaming and len(engine.calls) == 2, what="the second turn")
        await pilot.pause()
        line = app.query_one(ToolLine)
        assert "[@click=app.screenshot(" in screen_text(app)  # shown as written
        assert not hostile_actions(clicks_on_screen(app))
        mode = app.mode
        # Where "README.md" stood when the title was parsed as markup: "▶ ⚙ read_file README.md".
        await pilot.click(line.query_one("CollapsibleTitle"), offset=(17, 0))
        await pilot.pause()
        assert not (repo.parent / "victim.txt").exists() and app.mode == mode


def hostile_widgets() -> list:
    tool = f"mcp__srv__{SWITCH}"
    return [
        ToolLine("read_file", f'{{"path": "{HOSTILE}"}}', result=HOSTILE, decision=SWITCH),
        ToolLine(tool, '{"a": "[b]bold[/b]"}'),
        MessageView("assistant", text="plain", figures=f"drafter {HOSTILE}"),
        MessageView("user", text=HOSTILE),
        CompactionNote(f"✂ {HOSTILE}", HOSTILE),
    ]


class Walk(App):
    def compose(self) -> ComposeResult:
        yield from hostile_widgets()


async def test_every_widget_that_shows_outside_text_shows_it_as_text():
    app = Walk()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert not hostile_actions(clicks_on_screen(app))
        text = screen_text(app)
        assert text.count("[@click=app.screenshot(") >= 3  # tool title, prompt, figures, note
        assert "mcp__srv__[@click=app.cycle_mode]x[/]" in text


async def test_the_consent_keys_line_shows_an_mcp_tool_name_as_text():
    screen = ConsentScreen("Call the tool?", "{}", f"always srv's {SWITCH}", arm_s=0.01)

    class Asking(App):
        def on_mount(self) -> None:
            self.push_screen(screen)

    app = Asking()
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: screen.armed, what="the question to arm")
        await pilot.pause()
        assert "[@click=app.cycle_mode]x[/]" in screen_text(app)
        assert not hostile_actions(clicks_on_screen(app))


def test_help_keeps_a_command_files_argument_hint_inside_one_code_span():
    from markdown_it import MarkdownIt

    hint = "`x` [link](file:///etc/passwd) **bold** ``"
    text = help_markdown([SlashCommand("/review", hint, "reviews", None, custom=True)])
    line = next(line for line in text.splitlines() if "/review" in line)
    tokens = MarkdownIt().parseInline(line)[0].children
    codes = [t for t in tokens if t.type == "code_inline"]
    assert len(codes) == 1 and hint in codes[0].content
    assert not [t for t in tokens if t.type == "link_open"]


async def test_a_link_in_a_reply_opens_only_a_web_page(monkeypatch):
    opened: list[str] = []

    class One(App):
        def compose(self) -> ComposeResult:
            yield MarkdownSegment("[a](file:///etc/passwd) [b](https://example.org)")

    app = One()
    monkeypatch.setattr(app, "open_url", lambda url, **_: opened.append(url))
    async with app.run_test() as pilot:
        segment = app.query_one(MarkdownSegment)
        segment.post_message(Markdown.LinkClicked(segment, "file:///etc/passwd"))
        segment.post_message(Markdown.LinkClicked(segment, "https://example.org"))
        await until(pilot, lambda: opened, what="the web link to open")
        await pilot.pause()
        assert opened == ["https://example.org"]
