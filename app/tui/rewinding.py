"""/rewind (and Esc Esc): the chat goes back to before an earlier prompt, the conversation,
the files, or both; the prompt comes back into the input to edit and send again.

The files come from the chat's own records of what it applied (the store keeps them, so a
resumed chat can go back too); the conversation from the store's transcript (a rewind past
a compaction gets the messages back as they were). A file changed outside the chat since
is named and left alone unless the user says to put it back anyway.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..agent.changes import Change
from ..agent.rewind import OtherProject, changed_since, plan, put_back
from ..terminal_text import one_line
from .screens.consent import ConsentScreen
from .screens.rewind import Prompt, Rewind, RewindScreen

if TYPE_CHECKING:
    from ..agent.project import Project
    from ..agent.toolbox import Toolbox
    from ..chat.store import Chat, ChatStore
    from .widgets.prompt_area import PromptArea


class ChatApp(Protocol):
    """What a rewind needs of the chat (app.py's ChatApp): named here, so this module does not
    import the app that imports it."""

    @property
    def chat(self) -> Chat | None: ...
    @property
    def prompt_id(self) -> int | None: ...
    @property
    def project(self) -> Project | None: ...
    @property
    def store(self) -> ChatStore: ...
    @property
    def toolbox(self) -> Toolbox | None: ...
    @property
    def streaming(self) -> bool: ...
    @property
    def prompt_area(self) -> PromptArea: ...
    @property
    def notify(self) -> Callable[..., None]: ...
    @property
    def push_screen_wait(self) -> Callable[..., Awaitable[Any]]: ...
    @property
    def show_chat(self) -> Callable[[], Awaitable[None]]: ...
    @property
    def ask(self) -> Callable[[ConsentScreen], Awaitable[Any]]: ...


def record(app: ChatApp, applied: list[Change]) -> None:
    """The changes the tools applied since the last call, kept under the prompt they answered."""
    while applied:
        change = applied.pop(0)
        if app.chat is not None and app.prompt_id is not None:
            root = str(app.project.root.resolve()) if app.project is not None else ""
            app.store.add_change(app.chat.id, app.prompt_id, change.name, change.before, change.after, root)


def prompts(app: ChatApp) -> list[Prompt]:
    assert app.chat is not None
    changes = app.store.changes(app.chat.id)
    return [
        Prompt(m.id, m.content, len({c.name for c in changed_since(changes, m.id)}))
        for m in reversed(app.store.messages(app.chat.id))
        if m.role == "user"
    ]


async def rewind(app: ChatApp) -> None:
    if app.streaming:
        app.notify("a reply is still streaming: Esc stops it, then /rewind", severity="warning")
        return
    if app.chat is None:
        return
    earlier = prompts(app)
    if not earlier:
        app.notify("no earlier prompt in this chat to go back to")
        return
    chosen = await app.push_screen_wait(RewindScreen(earlier))
    if chosen is None:
        return
    said = []
    if chosen.what in ("both", "files"):
        said.append(await _files(app, chosen))
    if chosen.what in ("both", "conversation"):
        app.store.cut(app.chat.id, chosen.prompt.id)
        # What the chat changed at or after the prompt is no longer under any prompt of it.
        app.store.drop_changes(app.chat.id, chosen.prompt.id)
        await app.show_chat()
        app.prompt_area.load_text(chosen.prompt.text)
        said.append("the conversation is back to before that prompt, which is in the input to edit and send")
    app.notify("; ".join(s for s in said if s), timeout=15, markup=False)


async def _files(app: ChatApp, chosen: Rewind) -> str:
    assert app.chat is not None
    if app.project is None or app.toolbox is None:
        return "this chat has no project files to put back"
    root = app.project.root
    try:
        files = plan(root, app.store.changes(app.chat.id), chosen.prompt.id, app.chat.project)
    except OtherProject as exc:
        return str(exc)
    if not files:
        return "no file was changed since that prompt"
    outside = [f for f in files if f.changed_outside and not f.already_back]
    anyway = False
    if outside:
        names = "\n".join(f"- {one_line(f.name)}" for f in outside)
        answer = await app.ask(
            ConsentScreen(
                f"{len(outside)} file{'s' if len(outside) != 1 else ''} changed outside this chat since "
                "(or between its edits). "
                "Put them back anyway?",
                f"{names}\n\ny: put them back as they were before that prompt (what they hold now is lost)\n"
                "n: leave them as they are",
                None,
            )
        )
        anyway = answer == "yes"
    done, left_alone = put_back(root, files, anyway)
    app.toolbox.changes.forget(set(done))
    app.store.drop_changes(app.chat.id, chosen.prompt.id, set(done))
    text = f"put back {len(done)} file{'s' if len(done) != 1 else ''}: {', '.join(done)}" if done else ""
    if left_alone:
        app.notify("left alone:\n" + "\n".join(left_alone), severity="warning", timeout=20, markup=False)
    return text
