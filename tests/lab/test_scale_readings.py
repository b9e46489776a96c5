"""The scale bench's readings of /proc: serve's CPU by thread, the load average."""

from __future__ import annotations

import os
import threading
import time

from edgeps.lab.bench.scale_run import load_average, split_threads, thread_seconds


def test_split_threads_parts_the_main_thread_from_the_others() -> None:
    before = {10: 1.0, 11: 2.0}
    after = {10: 3.0, 11: 2.5, 12: 0.5}  # a thread started in the window
    assert split_threads(10, before, after, 2.0) == {"main": 1.0, "others": 0.5}
    assert split_threads(10, before, after, 0.0) == {}


def test_thread_seconds_reads_each_thread_of_this_process() -> None:
    stop = threading.Event()

    def spin() -> None:
        end = time.monotonic() + 5
        while not stop.is_set() and time.monotonic() < end:
            pass

    before = thread_seconds(os.getpid())
    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.3)
    after = thread_seconds(os.getpid())
    stop.set()
    t.join(10)
    assert os.getpid() in before and os.getpid() in after
    assert len(after) > len(before)  # the spinning thread has its own entry
    parts = split_threads(os.getpid(), before, after, 0.3)
    assert parts["others"] > 0.0  # it burnt CPU; the main thread mostly slept
    assert thread_seconds(-1) == {}  # no such process: nothing, no error


def test_load_average_is_a_number_on_linux() -> None:
    value = load_average()
    assert value is not None and value >= 0.0
