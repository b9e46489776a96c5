"""ReleaseFrames: the same bytes as the wire module's encode_release, faster."""

from __future__ import annotations

import pytest
from edgeps.runtime.release_frames import ReleaseFrames
from edgeps.security.keys import derive_worker_key
from edgeps_worker import wire_host as wire
from hypothesis import given
from hypothesis import strategies as st

ids = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
    min_size=1,
    max_size=32,
)


@given(
    job=ids,
    wid=ids,
    run=st.integers(0, (1 << 64) - 1),
    session=st.integers(0, (1 << 64) - 1),
    version=st.integers(0, (1 << 32) - 1),
    seq=st.integers(0, (1 << 32) - 1),
    batch=st.integers(0, (1 << 16) - 1),
    digest=st.binary(min_size=16, max_size=16),
    signed=st.booleans(),
)
def test_each_release_is_byte_for_byte_the_wire_modules(
    job: str,
    wid: str,
    run: int,
    session: int,
    version: int,
    seq: int,
    batch: int,
    digest: bytes,
    signed: bool,
) -> None:
    key = derive_worker_key(b"m" * 32, wid) if signed else None

    fast = ReleaseFrames(job, run, version, digest).encode(
        wid, session, seq, batch, key
    )

    want = wire.encode_release(
        job, wid, run, session, version, digest, seq=seq, batch=batch, key=key
    )
    assert fast == bytes(want)
    if key is not None:
        msg = wire.decode(fast, key)
        assert (msg.session, msg.seq, msg.batch) == (session, seq, batch)


def test_many_workers_of_one_round_each_verify_with_their_own_key() -> None:
    frames = ReleaseFrames("job", 5, 9, b"d" * 16)
    for i in range(20):  # more keys than the wire module's pad cache holds
        wid = f"w{i:03d}"
        key = derive_worker_key(b"m" * 32, wid)
        msg = wire.decode(frames.encode(wid, 100 + i, i, 0, key), key)
        assert (msg.wid, msg.session, msg.version) == (wid, 100 + i, 9)
        with pytest.raises(wire.WireError):
            wire.decode(frames.encode(wid, 100 + i, i, 0, key), b"x" * 32)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("bad id", 1, 0, 0), ValueError),
        (("w", -1, 0, 0), ValueError),
        (("w", 1 << 64, 0, 0), ValueError),
        (("w", 1, 1 << 32, 0), ValueError),
        (("w", 1, 0, 1 << 16), ValueError),
        (("w", 1.5, 0, 0), TypeError),
        (("w", True, 0, 0), TypeError),
    ],
)
def test_bad_fields_are_refused_as_the_wire_module_does(
    args: tuple[object, ...], error: type[Exception]
) -> None:
    frames = ReleaseFrames("job", 5, 9, b"d" * 16)
    with pytest.raises(error):
        frames.encode(*args)  # type: ignore[arg-type]
    wid, session, seq, batch = args
    with pytest.raises(error):
        wire.encode_release("job", wid, 5, session, 9, b"d" * 16, seq=seq, batch=batch)


@pytest.mark.parametrize(
    ("job", "run", "version", "digest", "error"),
    [
        ("job", 1, 1, b"short", ValueError),
        ("bad job", 1, 1, b"d" * 16, ValueError),
        ("job", -1, 1, b"d" * 16, ValueError),
        ("job", 1, 1 << 32, b"d" * 16, ValueError),
        ("job", 1, "1", b"d" * 16, TypeError),
    ],
)
def test_bad_round_fields_are_refused(
    job: str, run: int, version: int, digest: bytes, error: type[Exception]
) -> None:
    with pytest.raises(error):
        ReleaseFrames(job, run, version, digest)
