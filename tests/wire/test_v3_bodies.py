"""Protocol v3: HELLO's moments, WELCOME's local rounds and card, UPDATE's steps."""

from __future__ import annotations

import math
import struct

import pytest
from edgeps_worker import wire_host as wire

JOB, WID = "job1", "w1"


def _welcome(**kw: object) -> bytearray:
    return wire.encode_welcome(JOB, WID, 5, 6, 7, 9, "mlp:2-2-2", **kw)


def test_a_welcome_carries_local_rounds_scaler_and_classes() -> None:
    # Execute
    msg = wire.decode(
        _welcome(local_steps=8, local_epochs=0.5, local_time=2.0, lr=0.25,
                 scale=([1.0, -2.0], [0.5, 4.0]), classes=["low", "high"])
    )  # fmt: skip

    # Assert
    assert (msg.local_steps, msg.local_epochs, msg.local_time, msg.lr) == (
        8,
        0.5,
        2.0,
        0.25,
    )
    assert msg.model == "mlp:2-2-2"
    assert msg.scale == ((1.0, -2.0), (0.5, 4.0))
    assert msg.classes == ("low", "high")


def test_a_plain_welcome_asks_for_one_gradient_per_push() -> None:
    # Execute
    msg = wire.decode(_welcome())

    # Assert: version 2's behaviour: H 1, no card
    assert (msg.local_steps, msg.local_epochs, msg.local_time) == (1, 0.0, 0.0)
    assert msg.scale is None and msg.classes is None and msg.model == "mlp:2-2-2"


def test_a_hello_carries_its_data_moments() -> None:
    # Execute
    msg = wire.decode(
        wire.encode_hello(JOB, WID, 1, 2, "m", moments=(40, [0.5, 3.0], [1.0, 9.0]))
    )

    # Assert
    assert msg.moments == (40, (0.5, 3.0), (1.0, 9.0)) and msg.model == "m"
    assert wire.decode(wire.encode_hello(JOB, WID, 1, 2, "m")).moments is None


def test_an_update_says_how_many_steps_its_body_stands_for() -> None:
    # Execute
    one = wire.decode(
        wire.encode_update(JOB, WID, 1, 1, 1, 0, 0.1, 8, 0.5, b"\0" * 8)[0]
    )
    eight = wire.decode(
        wire.encode_update(JOB, WID, 1, 1, 1, 0, 0.1, 8, 0.5, b"\0" * 8, steps=8)[0]
    )

    # Assert
    assert (one.steps, eight.steps) == (1, 8)


def _patched_welcome(offset: int, fmt: str, value: object) -> bytes:
    """A plain WELCOME with one field of its body head overwritten (unsigned)."""
    buf = bytearray(_welcome())
    head = len(buf) - len("mlp:2-2-2") - wire.WELCOME_HEAD_LEN
    struct.pack_into(fmt, buf, head + offset, value)
    return bytes(buf)


@pytest.mark.parametrize(
    ("buf", "reason"),
    [
        (_patched_welcome(14, "<H", 1), "length"),  # a scaler the body lacks
        (_patched_welcome(16, "<H", 200), "length"),  # spec longer than the body
        (_patched_welcome(10, "<f", math.nan), "value"),  # lr
        (_patched_welcome(2, "<f", -1.0), "value"),  # local_epochs
        (_patched_welcome(6, "<f", math.inf), "value"),  # local_time
    ],
)
def test_a_malformed_welcome_body_is_a_wire_error(buf: bytes, reason: str) -> None:
    with pytest.raises(wire.WireError) as e:
        wire.decode(buf)
    assert e.value.reason == reason


def test_a_welcome_body_without_its_head_is_a_wire_error() -> None:
    # Prepare: a WELCOME whose body is 3 bytes
    buf = bytearray(_welcome())
    cut = len(buf) - (wire.WELCOME_HEAD_LEN + len("mlp:2-2-2") - 3)
    buf = buf[:cut]
    struct.pack_into("<I", buf, 8, 3)

    # Execute / Assert
    with pytest.raises(wire.WireError, match="length"):
        wire.decode(bytes(buf))


@pytest.mark.parametrize(
    ("moments", "reason"),
    [((3, [math.nan], [1.0]), "value"), ((3, [0.0], [-1.0]), "value")],
)
def test_bad_hello_moments_are_a_wire_error(moments: tuple, reason: str) -> None:
    # Prepare: packed by hand (the encoder packs whatever it is given)
    buf = wire.encode_hello(JOB, WID, 1, 2, "m", moments=moments)

    # Execute / Assert
    with pytest.raises(wire.WireError) as e:
        wire.decode(bytes(buf))
    assert e.value.reason == reason


@pytest.mark.parametrize(
    "kw",
    [
        {"classes": ["a\nb", "c"]},
        {"classes": ["", "c"]},
        {"scale": ([1.0], [1.0, 2.0])},
        {"lr": math.nan},
        {"local_steps": 1 << 16},
    ],
)
def test_the_encoder_refuses_a_welcome_it_cannot_say(kw: dict) -> None:
    with pytest.raises((ValueError, TypeError)):
        _welcome(**kw)
