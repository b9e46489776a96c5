"""Link impairments: seeded delays, QoS1 drops turned into resends, QoS0 losses."""

from __future__ import annotations

import pytest
from edgeps.netem.impair import ImpairedTransport, LinkProfile


class RecordingTransport:
    """A transport that keeps what it was asked to publish."""

    def __init__(self) -> None:
        self.connected = False
        self.published: list[tuple[str, bytes, int]] = []
        self.closed = 0

    def connect(self, will_topic: str, will_payload: bytes) -> None:
        self.connected = True

    def subscribe(self, topic: str, qos: int = 1) -> None:
        pass

    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> None:
        self.published.append((topic, bytes(payload), qos))

    def poll(self, timeout_ms: int) -> tuple[str, bytes] | None:
        return ("down", b"x")

    def close(self) -> None:
        self.closed += 1
        self.connected = False


class SleepLog:
    """Records requested sleeps instead of sleeping."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def _impaired(link: LinkProfile, seed: int = 7):
    inner = RecordingTransport()
    sleep = SleepLog()
    return ImpairedTransport(inner, link, seed=seed, sleep=sleep), inner, sleep


def test_fixed_delay_applies_to_every_publish() -> None:
    # Prepare
    t, inner, sleep = _impaired(LinkProfile(delay=0.03))
    # Execute
    for i in range(5):
        t.publish("up", bytes([i]), qos=1)
    # Assert
    assert sleep.calls == pytest.approx([0.03] * 5)
    assert [p[1] for p in inner.published] == [bytes([i]) for i in range(5)]


def test_jitter_is_seeded_and_never_shortens_the_delay() -> None:
    # Prepare
    link = LinkProfile(delay=0.01, jitter=0.02)
    a, _, sa = _impaired(link, seed=3)
    b, _, sb = _impaired(link, seed=3)
    c, _, sc = _impaired(link, seed=4)
    # Execute
    for _ in range(200):
        a.publish("up", b"m")
        b.publish("up", b"m")
        c.publish("up", b"m")
    # Assert
    assert sa.calls == sb.calls
    assert sa.calls != sc.calls
    assert min(sa.calls) >= 0.01
    mean_extra = sum(sa.calls) / len(sa.calls) - 0.01
    assert 0.015 < mean_extra < 0.025  # exponential with mean 0.02


def test_qos1_loss_becomes_retransmission_and_nothing_is_lost() -> None:
    # Prepare
    link = LinkProfile(loss=0.3, retransmit_after=0.5)
    t, inner, sleep = _impaired(link, seed=11)
    payloads = [i.to_bytes(2, "little") for i in range(1000)]
    # Execute
    for p in payloads:
        t.publish("up", p, qos=1)
    # Assert
    assert [p[1] for p in inner.published] == payloads
    assert t.stats.dropped == 0
    # each retransmission costs one interval: the delays add up exactly
    assert sum(sleep.calls) == pytest.approx(0.5 * t.stats.retransmits)
    # geometric: expected retries per message = p / (1 - p) = 0.43
    assert 300 < t.stats.retransmits < 560


def test_qos0_loss_drops_messages_at_the_configured_rate() -> None:
    # Prepare
    t, inner, _ = _impaired(LinkProfile(loss=0.25), seed=5)
    # Execute
    for i in range(2000):
        t.publish("up", i.to_bytes(2, "little"), qos=0)
    # Assert
    assert len(inner.published) + t.stats.dropped == 2000
    assert 400 < t.stats.dropped < 600
    assert t.stats.retransmits == 0


def test_perfect_link_passes_straight_through() -> None:
    # Prepare
    t, inner, sleep = _impaired(LinkProfile())
    # Execute
    t.connect("will", b"bye")
    t.publish("up", b"a", qos=1, retain=True)
    got = t.poll(10)
    t.close()
    # Assert
    assert LinkProfile().is_perfect
    assert sleep.calls == []
    assert inner.published == [("up", b"a", 1)]
    assert got == ("down", b"x")
    assert inner.closed == 1 and not t.connected


def test_abort_falls_back_to_close_without_abort_support() -> None:
    # Prepare
    t, inner, _ = _impaired(LinkProfile())
    t.connect("will", b"")
    # Execute
    t.abort()
    # Assert
    assert inner.closed == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delay": -0.1},
        {"jitter": float("nan")},
        {"loss": 1.0},
        {"loss": -0.01},
        {"retransmit_after": float("inf")},
        {"max_retransmits": -1},
        {"delay": "1"},
    ],
)
def test_bad_link_profiles_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LinkProfile(**kwargs)  # type: ignore[arg-type]
