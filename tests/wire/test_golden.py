"""Golden bytes of every wire message, on CPython and under the real MicroPython."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from edgeps_worker import wire_host as wire

from tests.conftest import run_micropython

VECTORS_PATH = Path(__file__).parents[1] / "helpers" / "mpy" / "wire_vectors.json"
RELEASE_PATH = (
    Path(__file__).parents[1] / "helpers" / "mpy" / "wire_vectors_release.json"
)
VECTORS: list[dict[str, Any]] = [
    v
    for path in (VECTORS_PATH, RELEASE_PATH)
    for v in json.loads(path.read_text())["vectors"]
]


def _call(v: dict[str, Any]) -> list[bytes]:
    kwargs = dict(v["kwargs"])
    if "data_f32" in v:
        kwargs["data"] = struct.pack(f"<{len(v['data_f32'])}f", *v["data_f32"])
    if "data_hex" in v:
        kwargs["data"] = bytes.fromhex(v["data_hex"])
    if "key" in v:
        kwargs["key"] = bytes.fromhex(v["key"])
    if "digest" in v:
        kwargs["digest"] = bytes.fromhex(v["digest"])
    out = getattr(wire, v["call"])(*v["args"], **kwargs)
    return out if isinstance(out, list) else [out]


def _plain(x: Any) -> Any:
    """Tuples as lists, as JSON holds them (HELLO's moments, WELCOME's card)."""
    return [_plain(i) for i in x] if isinstance(x, (tuple, list)) else x


def _want(v: dict[str, Any]) -> list[bytes]:
    return [bytes.fromhex("".join(h for _, h in chunk)) for chunk in v["chunks"]]


def test_every_message_type_has_a_vector() -> None:
    # Prepare / Execute
    types = {wire.decode(_want(v)[0]).type for v in VECTORS}

    # Assert
    assert types == set(wire.TYPE_NAMES)


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_encoder_produces_golden_bytes(v: dict[str, Any]) -> None:
    # Execute
    got = _call(v)

    # Assert
    assert [c.hex() for c in got] == [c.hex() for c in _want(v)]


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_decoder_reads_golden_fields(v: dict[str, Any]) -> None:
    # Prepare
    key_hex = v.get("key", v.get("decode_key"))
    key = bytes.fromhex(key_hex) if key_hex else None

    # Execute
    msg = wire.decode(_want(v)[0], key=key)

    # Assert
    assert {k: _plain(getattr(msg, k)) for k in v["fields"]} == v["fields"]
    assert getattr(msg, "digest", b"").hex() == v.get("digest", "")


def test_hmac_matches_the_standard_library() -> None:
    # Prepare
    import hashlib
    import hmac

    key, data = b"k" * 70, b"header and body" * 9

    # Execute
    ours = wire.hmac_sha256(key, data)

    # Assert: keys longer than a block are hashed first, as RFC 2104 says
    assert ours == hmac.new(key, data, hashlib.sha256).digest()


@pytest.mark.firmware
def test_golden_vectors_under_micropython(micropython: str) -> None:
    # Execute
    script = str(Path(__file__).parents[1] / "helpers" / "mpy" / "wire_golden.py")
    proc = run_micropython(
        micropython, script, str(VECTORS_PATH), str(RELEASE_PATH), timeout=60
    )

    # Assert
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("ok ") == len(VECTORS) + 2
    assert "ok into_array" in proc.stdout and "ok shared_release" in proc.stdout


@pytest.mark.firmware
def test_bad_input_raises_only_wire_error_under_micropython(micropython: str) -> None:
    # Execute
    script = str(Path(__file__).parents[1] / "helpers" / "mpy" / "wire_reject.py")
    proc = run_micropython(micropython, script, timeout=120)

    # Assert
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "other 0" in proc.stdout and "size reason size" in proc.stdout
