"""Slow-link logic in virtual time: unit parsing, the token bucket, the link pipe."""

from __future__ import annotations

import random

import pytest
from edgeps.netem.shaping import MSS, LinkPipe, LinkShape, TokenBucket
from edgeps.netem.units import (
    format_rate,
    parse_duration,
    parse_loss,
    parse_rate,
)


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("250kbit", 250e3),
        ("1mbit", 1e6),
        ("1Mbit", 1e6),
        ("64kbps", 512e3),  # tc's spelling: kbps is kilobytes per second
        ("9600", 9600.0),
        ("1.5 mbit", 1.5e6),
        ("2gbit", 2e9),
    ],
)
def test_rates_parse_to_bits_per_second(text: str, bits: float) -> None:
    assert parse_rate(text) == pytest.approx(bits)


@pytest.mark.parametrize(
    ("text", "message"),
    [("fast", "number and a unit"), ("10furlongs", "unknown unit"), ("0kbit", "> 0")],
)
def test_bad_rates_say_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_rate(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20ms", 0.02), ("0.02s", 0.02), ("0.02", 0.02), ("500us", 5e-4), ("0", 0.0)],
)
def test_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_bad_durations_and_losses_say_why() -> None:
    with pytest.raises(ValueError, match="unknown unit"):
        parse_duration("20min")
    with pytest.raises(ValueError, match="number and a unit"):
        parse_duration("-1s")
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        parse_loss("1.5")
    with pytest.raises(ValueError, match="expected"):
        parse_loss("lots")
    assert parse_loss("1%") == pytest.approx(0.01)
    assert parse_loss("0.01") == pytest.approx(0.01)


def test_rates_print_short() -> None:
    assert format_rate(250e3) == "250kbit"
    assert format_rate(1e6) == "1mbit"
    assert format_rate(300.0) == "300bit"


def test_token_bucket_passes_a_burst_then_the_rate() -> None:
    # Prepare: 1000 bytes/s, 100 bytes deep
    bucket = TokenBucket(1000.0, 100.0)
    # Execute / Assert
    assert bucket.take(100, 0.0) == 0.0  # a full bucket passes a burst at once
    assert bucket.take(500, 0.0) == pytest.approx(0.5)  # then debt at the rate
    assert bucket.take(100, 0.2) == pytest.approx(0.6)  # queued behind the debt
    assert bucket.take(50, 10.0) == 10.0  # refilled (capped at the burst)
    assert bucket.take(100, 10.0) == pytest.approx(10.05)


def test_pipe_delivers_at_delay_plus_bytes_over_rate() -> None:
    # Prepare: 250 kbit/s, 20 ms one way, no loss
    pipe = LinkPipe(LinkShape(rate=250e3, delay=0.02), random.Random(0).random)
    n = 100_000
    # Execute
    segments = pipe.send(1.0, n)
    # Assert
    assert sum(size for _, size in segments) == n
    assert all(size <= MSS for _, size in segments)
    times = [t for t, _ in segments]
    assert times == sorted(times)
    expected = 1.0 + 0.02 + (n - MSS) * 8 / 250e3  # the first segment is the burst
    assert times[-1] == pytest.approx(expected)
    assert pipe.stats.bytes == n and pipe.stats.lost == 0


def test_unlimited_pipe_is_a_pure_delay() -> None:
    pipe = LinkPipe(LinkShape(delay=0.05), random.Random(0).random)
    assert pipe.arrival(2.0, 10_000) == pytest.approx(2.05)
    assert pipe.arrival(3.0, 0) == 3.0


def test_a_lost_segment_is_late_by_a_timeout_and_holds_those_behind_it() -> None:
    # Prepare: draws below the loss mark the first segment lost, the rest not
    draws = iter([0.0, 0.9, 0.9, 0.9])
    shape = LinkShape(rate=1e9, delay=0.01, loss=0.5)
    pipe = LinkPipe(shape, lambda: next(draws))
    # Execute
    segments = pipe.send(0.0, 4 * MSS)
    # Assert: nothing is dropped; the first is late, the others wait for it
    assert shape.retransmit_cost == pytest.approx(0.2 + 0.02)
    assert sum(size for _, size in segments) == 4 * MSS
    assert segments[0][0] == pytest.approx(0.01 + 0.22, abs=1e-4)
    assert all(t == segments[0][0] for t, _ in segments)
    assert pipe.stats.lost == 1


def test_loss_costs_what_its_rate_predicts() -> None:
    shape = LinkShape(rate=1e6, delay=0.02, loss=0.1)
    pipe = LinkPipe(shape, random.Random(4).random)
    for i in range(2000):
        pipe.send(float(i), MSS)  # one segment a second: no queueing
    assert 150 < pipe.stats.lost < 250


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="loss"):
        LinkShape(loss=1.0)
    with pytest.raises(ValueError, match="rate"):
        LinkShape(rate=-1.0)
    with pytest.raises(ValueError, match="rate"):
        TokenBucket(0.0, 10.0)
