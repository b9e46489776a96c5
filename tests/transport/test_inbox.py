"""Inbox: bounded in count and bytes, a blocked taker is woken by a put."""

from __future__ import annotations

import threading
import time

import pytest
from edgeps.transport.inbox import Inbox


def test_bounded_in_count_and_bytes_and_in_order() -> None:
    box = Inbox(3, 10)
    assert box.put(("a", b"1234"))
    assert box.put(("b", b"1234"))
    assert not box.put(("c", b"123"))  # 11 bytes
    assert box.put(("c", b"12"))
    assert not box.put(("d", b""))  # 3 messages
    assert box.qsize() == 3
    assert [box.get(None) for _ in range(4)] == [
        ("a", b"1234"),
        ("b", b"1234"),
        ("c", b"12"),
        None,
    ]
    assert box.put(("e", b"1234567890"))  # every byte was given back


def test_a_waiting_taker_gets_what_is_put_and_a_timeout_is_bounded() -> None:
    box = Inbox(10, 100)
    t0 = time.monotonic()
    assert box.get(0.05) is None
    assert time.monotonic() - t0 >= 0.04
    got: list[tuple[str, bytes] | None] = []
    taker = threading.Thread(target=lambda: got.append(box.get(10.0)))
    taker.start()
    time.sleep(0.05)
    assert box.put(("x", b"y"))
    taker.join(10)
    assert got == [("x", b"y")]


def test_clear_empties_and_frees_the_bytes() -> None:
    box = Inbox(5, 4)
    assert box.put(("a", b"1234"))
    box.clear()
    assert box.qsize() == 0 and box.oldest_age() == 0.0
    assert box.put(("b", b"1234"))


@pytest.mark.parametrize("size,max_bytes", [(0, 1), (1, 0)])
def test_refuses_empty_bounds(size: int, max_bytes: int) -> None:
    with pytest.raises(ValueError):
        Inbox(size, max_bytes)
