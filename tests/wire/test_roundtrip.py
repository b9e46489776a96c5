"""Wire round trips, encoder argument checks and topic helpers (CPython)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable

import numpy as np
import pytest
from edgeps_worker import wire_host as wire


def _grad(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype("<f4")


def test_update_round_trip_keeps_every_field() -> None:
    # Prepare
    g = _grad(10)

    # Execute
    (buf,) = wire.encode_update("j", "w7", 3, 11, 4, 2, 0.125, 64, 0.75, g.tobytes())
    msg = wire.decode(buf)

    # Assert
    assert (msg.type, msg.job, msg.wid) == (wire.UPDATE, "j", "w7")
    assert (msg.session, msg.seq, msg.clock, msg.base_version) == (3, 11, 4, 2)
    assert (msg.compute_time, msg.samples, msg.loss) == (0.125, 64, 0.75)
    assert msg.dtype == wire.DTYPE_F32
    np.testing.assert_array_equal(np.frombuffer(msg.data, "<f4"), g)


def test_numpy_array_and_array_f_encode_like_their_bytes() -> None:
    # Prepare
    g = _grad(7)
    a = array("f", g.tolist())

    # Execute
    from_np = wire.encode_params("j", "w", 1, 2, 5, g)
    from_arr = wire.encode_params("j", "w", 1, 2, 5, a)

    # Assert
    assert from_np == from_arr == wire.encode_params("j", "w", 1, 2, 5, g.tobytes())


def test_nan_loss_survives_and_means_unknown() -> None:
    # Execute
    (buf,) = wire.encode_update("j", "w", 0, 1, 1, 0, 0.0, 1, float("nan"), b"")

    # Assert
    assert math.isnan(wire.decode(buf).loss)


def test_every_chunk_respects_max_chunk_and_reassembles() -> None:
    # Prepare
    g = _grad(1000, seed=1)

    # Execute
    chunks = wire.encode_update("job", "w1", 1, 2, 3, 4, 0.5, 10, 1.0, g, max_chunk=512)
    r = wire.Reassembler(max_bytes=8192, max_age=5, max_pending=4)
    results = [r.add(wire.decode(c), now=0.0) for c in chunks]

    # Assert
    assert len(chunks) > 1 and all(len(c) <= 512 for c in chunks)
    assert results[:-1] == [None] * (len(chunks) - 1)
    whole = results[-1]
    assert whole is not None and whole.chunk_count == 1 and whole.seq == 2
    np.testing.assert_array_equal(np.frombuffer(whole.data, "<f4"), g)


def test_hello_bye_heartbeat_reject_model_round_trip() -> None:
    # Execute
    hello = wire.decode(wire.encode_hello("j", "w", 9, 2**64 - 1, "mlp:8x4", 2048))
    bye = wire.decode(wire.encode_bye("j", "w", 9, "bye"))
    hb = wire.decode(wire.encode_heartbeat("j", "w", 9, 12))
    rej = wire.decode(wire.encode_reject("j", "w", 1, 2, 4, "stale"))
    model = wire.decode(wire.encode_model("j", 1, "done", "mlp:8x4", 40, 44))

    # Assert
    assert (hello.instance, hello.model, hello.max_chunk) == (9, "mlp:8x4", 2048)
    assert hello.nonce == 2**64 - 1 and hello.max_batch == 0
    assert hello.dtypes == 1 << wire.DTYPE_F32
    assert (bye.nonce, bye.reason) == (9, "bye")
    assert (hb.session, hb.clock) == (9, 12)
    assert (rej.seq, rej.reason) == (4, "stale")
    assert (model.state, model.version, model.n_params, model.wid) == (
        "done",
        40,
        44,
        "",
    )


def test_hmac_tag_is_checked_with_a_key_and_skipped_without() -> None:
    # Prepare
    key = b"board-secret"
    (buf,) = wire.encode_params("j", "w", 1, 2, 1, _grad(3), key=key)
    forged = bytearray(buf)
    forged[-20] ^= 1  # a payload bit

    # Execute
    ok = wire.decode(buf, key=key)
    unchecked = wire.decode(forged)

    # Assert
    assert ok.tagged and unchecked.tagged
    with pytest.raises(wire.WireError) as e:
        wire.decode(forged, key=key)
    assert e.value.reason == "hmac"
    with pytest.raises(wire.WireError) as e:
        wire.decode(buf, key=b"other")
    assert e.value.reason == "hmac"


def test_key_given_but_message_untagged_is_rejected() -> None:
    # Prepare
    buf = wire.encode_heartbeat("j", "w", 1, 1)

    # Execute / Assert
    with pytest.raises(wire.WireError) as e:
        wire.decode(buf, key=b"k")
    assert e.value.reason == "hmac"


@pytest.mark.parametrize(
    "call",
    [
        lambda: wire.encode_heartbeat("", "w", 1, 1),
        lambda: wire.encode_heartbeat("j", "w/x", 1, 1),
        lambda: wire.encode_heartbeat("j", "w" * 33, 1, 1),
        lambda: wire.encode_heartbeat("j", "w", -1, 1),
        lambda: wire.encode_heartbeat("j", "w", 1, 2**32),
        lambda: wire.encode_update("j", "w", 0, 1, 1, 0, -1.0, 1, 0.0, b""),
        lambda: wire.encode_update("j", "w", 0, 1, 1, 0, float("nan"), 1, 0.0, b""),
        lambda: wire.encode_params("j", "w", 1, 2, 1, b"abc"),  # not whole f32s
        lambda: wire.encode_params("j", "w", 1, 2, 1, b"abcd", dtype=9),
        lambda: wire.encode_params("j", "w", 1, 2, 1, b"abcd", max_chunk=38),
        lambda: wire.encode_model("j", 1, "paused", "m", 1, 1),
        lambda: wire.encode_bye("j", "w", 1, "x" * 3000),
        lambda: wire.encode_hello("j", "w", 1, 1, dtypes=(7,)),
    ],
)
def test_bad_encoder_arguments_raise_value_error(call: Callable[[], object]) -> None:
    # Execute / Assert
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: wire.encode_heartbeat("j", "w", 1.5, 1),
        lambda: wire.encode_heartbeat("j", "w", True, 1),
        lambda: wire.encode_params("j", "w", 1, 2, 1, 12345),
        lambda: wire.encode_bye("j", "w", 1, b"bytes"),
        lambda: wire.encode_update("j", "w", 0, 1, 1, 0, 0.0, 1, "x", b""),
    ],
)
def test_wrong_argument_types_raise_type_error(call: Callable[[], object]) -> None:
    # Execute / Assert
    with pytest.raises(TypeError):
        call()


def test_topics_build_and_parse() -> None:
    # Execute
    up = wire.topic_up("job-1", "w_2")

    # Assert
    assert up == "edgeps/job-1/up/w_2"
    assert wire.topic_down("job-1", "w_2") == "edgeps/job-1/down/w_2"
    assert wire.topic_model("job-1") == "edgeps/job-1/model"
    assert wire.topic_up_wildcard("job-1") == "edgeps/job-1/up/+"
    assert wire.parse_up_topic(up) == ("job-1", "w_2")
    assert wire.parse_up_topic(up.encode()) == ("job-1", "w_2")
    for bad in [
        "edgeps/j/down/w",
        "edgeps/j/up/",
        "x/j/up/w",
        "edgeps/j/up/w/x",
        b"\xff",
    ]:
        assert wire.parse_up_topic(bad) is None
    with pytest.raises(ValueError):
        wire.topic_up("j", "+")


def test_valid_id() -> None:
    # Assert
    assert wire.valid_id("A-z_09")
    assert not wire.valid_id("")
    assert not wire.valid_id("a" * 33)
    assert not wire.valid_id("é")
    assert not wire.valid_id(5)


def test_bytearray_key_and_empty_key() -> None:
    # Prepare
    key = bytearray(b"k" * 10)

    # Execute
    tagged = wire.encode_heartbeat("j", "w", 1, 1, key=key)
    plain = wire.encode_heartbeat("j", "w", 1, 1, key=b"")

    # Assert: an empty key means no HMAC on both sides
    assert wire.decode(tagged, key=bytes(key)).tagged
    assert not wire.decode(plain, key=b"").tagged
    assert len(tagged) == len(plain) + wire.HMAC_LEN
