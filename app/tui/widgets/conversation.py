"""The scrolling conversation. Finished Markdown segments far from the viewport
sleep and wake as they come near (see MarkdownSegment), and whole messages
beyond that are parked out of the layout (see MessageView), so neither opening
a long chat nor each streamed update costs in proportion to its length."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.widget import Widget

from .markdown_segment import MarkdownSegment
from .message_view import MessageView

PLACE_WAIT_S = 0.02  # a new segment has no place on screen until the next layout
AWAKE_SCREENS = 1.0  # how far above and below the viewport segments stay awake, in screen heights


class Conversation(VerticalScroll):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._cull_pending = False
        self.following = True
        self._end_pending = False

    def on_mount(self) -> None:
        self.watch(self, "scroll_y", self._scrolled, init=False)

    def _scrolled(self, scroll_y: float) -> None:
        # The view follows new output until the user scrolls up, and again once they scroll
        # back to the end. Only scrolling changes this: content growing below a view that
        # follows moves the end, not scroll_y, and the next scroll_end catches up.
        self.following = scroll_y >= self.max_scroll_y - 1
        self.schedule_cull()

    def follow(self, to_the_end: bool = False) -> None:
        """New content arrived: keep the end in view if the user has not scrolled away
        (`to_the_end`: whether or not they had, as when they send a message)."""
        self.following = self.following or to_the_end
        self._keep_end()
        self.schedule_cull()

    def on_resize(self) -> None:
        self.schedule_cull()

    def watch_virtual_size(self) -> None:
        # The content's height changed, e.g. as streamed blocks finished mounting after the
        # reply's last update: keep following.
        self._keep_end()
        self.schedule_cull()

    def _keep_end(self) -> None:
        # After the next refresh, when the new end is known, and only if the user has not
        # scrolled away in the meantime.
        if self.following and not self._end_pending:
            self._end_pending = True
            self.call_after_refresh(self._to_end)

    def _to_end(self) -> None:
        self._end_pending = False
        if self.following:
            self.scroll_end(animate=False, immediate=True)

    def on_markdown_segment_placed(self) -> None:
        self.schedule_cull()

    async def show(self, views: list[MessageView]) -> None:
        """Replace the conversation with these finished messages."""
        await self.remove_children()
        await self.mount_all(views)
        self.follow(to_the_end=True)

    def schedule_cull(self, *_) -> None:
        """Look at which segments are near the viewport after the next refresh, when their
        places are known. Scrolling and new segments do this by themselves; follow() calls
        it when content grows, which moves the view without a scroll event."""
        if not self._cull_pending:
            self._cull_pending = True
            self.call_after_refresh(self.cull)

    async def cull(self) -> None:
        self._cull_pending = False
        height = self.size.height
        if not height:
            return
        if self._end_pending:  # about to jump to the end: what is near the viewport will change
            self.schedule_cull()
            return
        # In the conversation's own coordinates (screen regions of widgets out of view go
        # stale as it scrolls).
        top = self.scroll_y - AWAKE_SCREENS * height
        bottom = self.scroll_y + (1 + AWAKE_SCREENS) * height
        views = list(self.query_children(MessageView))
        # Waking changes heights (placeholders become real, or the width changed since a
        # segment slept): keep the first message in view where it was on screen.
        anchor = next((v for v in views if v.virtual_region.bottom > self.scroll_y), None)
        offset = self.scroll_y - anchor.virtual_region.y if anchor is not None else 0
        woke = unplaced = False
        segments: list[MarkdownSegment] = []
        for view in views:
            region = view.virtual_region
            if region and (region.bottom < top or (region.y > bottom and not self.following)):
                view.park()
            else:
                if view.parked:
                    view.unpark()
                    woke = True
                segments.extend(view.query(MarkdownSegment))
        for segment in segments:
            if not self._shown(segment):  # inside collapsed thinking
                continue
            span = self._span(segment)
            if span is None:  # not laid out yet
                unplaced = unplaced or segment.asleep
                continue
            y, end = span
            if end >= top and y <= bottom:
                if segment.asleep:
                    await segment.wake()
                    woke = True
            elif y < top or not self.following:
                # Below the viewport while following, a segment is about to come into view.
                await segment.sleep()
        if woke:
            self.call_after_refresh(self._keep_place, anchor, offset)
        if unplaced:
            self.set_timer(PLACE_WAIT_S, self.schedule_cull)

    def _span(self, widget: Widget) -> tuple[int, int] | None:
        """Where a widget lies in the scrollable content: (top, bottom) lines."""
        height = widget.outer_size.height
        if not height:
            return None
        y, node = 0, widget
        while node is not self:
            y += node.virtual_region.y
            parent = node.parent
            if not isinstance(parent, Widget):
                return None
            node = parent
            if node is not self:
                y += node.styles.gutter.top
        return y, y + height

    @property
    def drawn(self) -> bool:
        """Every shown segment in the viewport is awake (tests wait for this)."""
        if self._cull_pending or self._end_pending:
            return False
        for segment in self.query(MarkdownSegment):
            if segment.asleep and self._shown(segment):
                span = self._span(segment)
                if span is None or (span[1] > self.scroll_y and span[0] < self.scroll_y + self.size.height):
                    return False
        return True

    def _shown(self, widget: Widget) -> bool:
        node: DOMNode | None = widget
        while node is not self and isinstance(node, Widget):
            if not node.display:
                return False
            node = node.parent
        return True

    def _keep_place(self, anchor: MessageView | None, offset: float) -> None:
        if self.following:
            self._to_end()
        elif anchor is not None and anchor.is_mounted:
            self.scroll_to(y=anchor.virtual_region.y + offset, animate=False, immediate=True)
