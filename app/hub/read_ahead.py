"""Read the next tensor while the current one is converted and written, within a memory bound.

The converter reads a checkpoint tensor by tensor and writes each to the GGUF. Done one
after the other, the disk sits idle while the file is written and the other way round;
reading the next tensor in a second thread (file reads and writes release the GIL) lets
the two overlap, so a conversion takes about as long as the slower of reading and writing,
not their sum.

The bound: the next tensor is read ahead only while what the current one holds (its
values, and a converted copy where it needs one) plus the next one's bytes stays within
`budget`; otherwise the next read waits until the current tensor is written. At most one
tensor is ever read ahead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Loaded = TypeVar("Loaded")


def ahead(held: Sequence[int], sizes: Sequence[int], budget: int) -> list[bool]:
    """For each item but the last: whether the next one is read while this one is held."""
    return [held[i] + sizes[i + 1] <= budget for i in range(len(sizes) - 1)]


def read_ahead(
    items: Sequence[Item],
    load: Callable[[Item], Loaded],
    held: Callable[[Item], int],
    size: Callable[[Item], int],
    budget: int,
) -> Iterator[tuple[Item, Loaded]]:
    """(item, load(item)) in order, loading the next item in a worker while the caller works
    on the current one where `ahead` allows it (held(current) + size(next) <= budget). An
    error in a load is raised where that item would have been yielded."""
    if not items:
        return
    early = ahead([held(item) for item in items], [size(item) for item in items], budget)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dspine-read-ahead") as worker:
        pending: Future[Loaded] | None = worker.submit(load, items[0])
        for index, item in enumerate(items):
            assert pending is not None
            values = pending.result()
            pending = None
            last = index + 1 == len(items)
            if not last and early[index]:
                pending = worker.submit(load, items[index + 1])
            yield item, values
            del values  # the caller is done with it: the next read may use the memory
            if not last and pending is None:
                pending = worker.submit(load, items[index + 1])
