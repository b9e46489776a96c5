"""An emulated sensor's usage: bytes each way, computing and waiting time, joules."""

from __future__ import annotations

import pytest
from edgeps.emulate.usage import MeteredLink, Usage, UsageMeter, usage_report
from edgeps.workloads.energy import ESP32, BoardTime, board_joules
from edgeps.workloads.scenarios import WorkerProfile
from edgeps_worker import wire
from edgeps_worker import wire_host as wh


def _update(size: int = 40) -> bytes:
    (chunk,) = wh.encode_update("j", "w1", 1, 1, 1, 0, 0.1, 32, 0.5, b"\0" * size)
    return bytes(chunk)


def _own_params() -> bytes:
    (chunk,) = wh.encode_params("j", "w1", 5, 7, 2, b"\0" * 40)
    return bytes(chunk)


def _shared_params() -> bytes:
    (chunk,) = wh.encode_shared_params("j", 5, 2, b"\0" * 40)
    return bytes(chunk)


def _release() -> bytes:
    return bytes(wh.encode_release("j", "w1", 5, 7, 2, b"\1" * 16))


def test_message_kinds_are_read_from_the_header() -> None:
    # the meter peeks at the header: check its guesses against the real decoder
    assert wire.decode(_update()).type == wire.UPDATE
    own, shared = wire.decode(_own_params()), wire.decode(_shared_params())
    assert own.type == wire.PARAMS and own.wid == "w1"
    assert shared.type == wire.PARAMS and shared.wid == ""
    assert wire.decode(_release()).type == 10


def test_compute_runs_from_a_release_to_the_update_and_waiting_back() -> None:
    # Prepare: a life at t=0; its first release at 1, its UPDATE at 1.5,
    # the next release at 4 (a shared copy at 3.5 is no release of its own)
    m = UsageMeter()
    m.life_starts(0.0)

    # Execute
    m.received(_own_params(), 1.0)
    m.sent(_update(), 1.5)
    m.received(_shared_params(), 3.5)
    m.received(_release(), 4.0)
    m.sent(_update(), 4.25)
    m.life_ends(5.0)

    # Assert: computing 0.5 + 0.25 s, waiting 2.5 + 0.75 (open at the end)
    u = m.usage
    assert u.alive == pytest.approx(5.0)
    assert u.compute == pytest.approx(0.75)
    assert u.waiting == pytest.approx(3.25)
    assert u.bytes_up == 2 * len(_update())
    assert u.bytes_down == len(_own_params()) + len(_shared_params()) + len(_release())
    assert (u.messages_up, u.messages_down) == (2, 3)


def test_lives_add_up_and_a_crash_closes_the_open_spans() -> None:
    m = UsageMeter()
    m.life_starts(0.0)
    m.received(_own_params(), 1.0)
    m.life_ends(3.0)  # crashed while computing
    m.life_ends(4.0)  # a second end counts nothing
    m.life_starts(10.0)
    m.sent(b"not a wire message", 11.0)

    assert m.so_far(12.0).alive == pytest.approx(5.0)
    assert m.usage.alive == pytest.approx(3.0)  # so_far ends nothing
    assert m.usage.compute == pytest.approx(2.0)
    assert m.usage.bytes_up == len(b"not a wire message")


def test_the_report_is_the_energy_model_of_the_usage() -> None:
    u = Usage(alive=10.0, compute=2.0, waiting=6.0, bytes_up=5000, bytes_down=20000)
    slow = WorkerProfile(link_rate=250e3)

    awake = usage_report(u, slow)
    asleep = usage_report(u, slow, sleep_at_barrier=True)
    default_rate = usage_report(u, WorkerProfile())

    t = BoardTime(alive=10.0, compute=2.0, held=6.0, bytes_up=5000, bytes_down=20000)
    assert awake["joules"] == pytest.approx(board_joules(ESP32, t, link_rate=250e3))
    assert asleep["joules"] == pytest.approx(
        board_joules(ESP32, t, link_rate=250e3, sleep_at_barrier=True), rel=1e-4
    )
    assert asleep["joules"] < awake["joules"]
    # no link rate of its own: the board's (1 Mbit/s), so less radio time
    assert default_rate["joules"] < awake["joules"]
    assert awake["bytes_up"] == 5000 and awake["board"] == "esp32"
    with pytest.raises(ValueError):
        usage_report(u, slow, board="toaster")


class FakeLink:
    """A transport that hands back one queued message per poll."""

    def __init__(self, inbox: list[tuple[str, bytes]]) -> None:
        self.inbox = inbox
        self.sent: list[bytes] = []
        self.connected = True
        self.aborted = False

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False):
        self.sent.append(payload)

    def poll(self, timeout_ms: int) -> tuple[str, bytes] | None:
        return self.inbox.pop(0) if self.inbox else None

    def abort(self) -> None:
        self.aborted = True


def test_the_metered_link_counts_what_crosses_it_and_passes_it_on() -> None:
    clock = iter([1.0, 2.0]).__next__
    inner = FakeLink([("edgeps/j/down/w1", _own_params())])
    meter = UsageMeter()
    meter.life_starts(0.0)
    link = MeteredLink(inner, meter, clock)

    assert link.poll(10) == ("edgeps/j/down/w1", _own_params())
    assert link.poll(10) is None
    link.publish("edgeps/j/up/w1", _update())
    link.abort()

    assert inner.sent == [_update()] and inner.aborted
    assert meter.usage.compute == pytest.approx(1.0)
    assert meter.usage.bytes_down == len(_own_params())
    assert link.connected
