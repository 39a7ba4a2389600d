"""The chat's side of an agent session, for tests without Textual: what the session said
and asked (answered with a fixed answer), and an `emit` that saves the chat as the TUI does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from app.agent.session import Compacted, Question, ReplyEnded, ToolFinished

if TYPE_CHECKING:
    from app.chat.store import ChatStore


class Recorder:
    def __init__(self) -> None:
        self.events: list = []
        self.questions: list[Question] = []
        self.answer = "yes"

    async def emit(self, event) -> None:
        self.events.append(event)

    async def ask(self, question: Question):
        self.questions.append(question)
        return self.answer

    def of(self, kind):
        return [e for e in self.events if isinstance(e, kind)]

    def finished(self) -> list[ToolFinished]:
        return self.of(ToolFinished)


def saving(recorder: Recorder, store: ChatStore, chat_id: int) -> Callable[[object], Awaitable[None]]:
    """An `emit` that records, then saves what the chat saves, as the TUI does."""

    async def emit(event) -> None:
        await recorder.emit(event)
        if isinstance(event, Compacted):
            store.save_context(chat_id, event.history, event.compaction.summary)
        elif isinstance(event, ReplyEnded):
            reply = store.add_message(chat_id, "assistant", event.answer)
            if event.tool_calls:
                store.set_tool_calls(reply, [c.as_message_part() for c in event.tool_calls])
        elif isinstance(event, ToolFinished):
            store.add_tool_result(chat_id, event.call.as_message_part(), event.result, event.decision)

    return emit
