"""The converter's read-ahead (app/hub/read_ahead.py): order kept, the next item read while
the current one is worked on, never more held than the budget allows, errors where they belong."""

from __future__ import annotations

import threading

import pytest

from app.hub.read_ahead import ahead, read_ahead


def test_every_item_arrives_in_order_with_its_values():
    items = [3, 1, 4, 1, 5]
    got = list(read_ahead(items, lambda n: n * 10, held=lambda n: n, size=lambda n: n, budget=100))
    assert got == [(3, 30), (1, 10), (4, 40), (1, 10), (5, 50)]
    assert list(read_ahead([], lambda n: n, held=lambda n: n, size=lambda n: n, budget=1)) == []


def test_the_next_item_is_read_while_the_current_one_is_worked_on():
    started = {i: threading.Event() for i in range(3)}

    def load(i: int) -> int:
        started[i].set()
        return i

    for i, _ in read_ahead([0, 1, 2], load, held=lambda n: 1, size=lambda n: 1, budget=2):
        if i < 2:
            # the worker reads the next one before this one is done (it would wait forever otherwise)
            assert started[i + 1].wait(timeout=10)


def test_nothing_is_read_ahead_beyond_the_budget():
    sizes = [10, 10, 30, 10, 5]
    assert ahead(sizes, sizes, 25) == [True, False, False, True]  # a+b 20; b+big 40; big+c 40; c+d 15
    copies = [2 * n for n in sizes]  # each needs a converted copy of its size beside it
    assert ahead(copies, sizes, 25) == [False, False, False, True]  # a, its copy and b: 30


def test_an_item_not_read_ahead_waits_until_the_one_before_is_done():
    sizes = {"a": 10, "b": 10, "big": 30, "c": 10, "d": 5}
    done: list[str] = []
    done_when_read: dict[str, list[str]] = {}

    def load(name: str) -> str:
        done_when_read[name] = list(done)
        return name

    for name, _ in read_ahead(list(sizes), load, held=sizes.__getitem__, size=sizes.__getitem__, budget=25):
        done.append(name)  # written: the converter lets go of it here
    assert done == list(sizes)
    assert done_when_read["big"] == ["a", "b"] and done_when_read["c"] == ["a", "b", "big"]  # over the budget


def test_an_error_in_a_read_is_raised_at_its_item():
    def load(i: int) -> int:
        if i == 2:
            raise ValueError("cut short")
        return i

    got = []
    with pytest.raises(ValueError, match="cut short"):
        for i, _ in read_ahead([0, 1, 2, 3], load, held=lambda n: 1, size=lambda n: 1, budget=10):
            got.append(i)
    assert got == [0, 1]
