"""Per-device keys under the real MicroPython: the board's HMAC agrees with the host."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest
from edgeps.security.keys import derive_worker_key, new_master_key
from edgeps_worker import wire

from tests.conftest import run_micropython

SCRIPT = str(Path(__file__).parents[1] / "helpers" / "mpy" / "fw_keys.py")


def _board(
    micropython: str, master: bytes, wid: str, key: bytes, msg: bytes
) -> dict[str, bytes]:
    """What the board script printed, as name -> bytes."""
    proc = run_micropython(
        micropython, SCRIPT, master.hex(), wid, key.hex(), msg.hex(), timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    pairs = (line.split() for line in proc.stdout.splitlines() if line)
    return {name: bytes.fromhex(value) for name, value in pairs}


@pytest.mark.firmware
@pytest.mark.parametrize("wid", ["w00", "pi-2", "a" * 32])
def test_board_hmac_under_the_derived_key_matches_the_host(
    micropython: str, wid: str
) -> None:
    # Prepare
    master = new_master_key()
    key = derive_worker_key(master, wid)
    # longer than one SHA-256 block; argv items stay under the 255 characters
    # the unix port's argv handling survives
    msg = bytes(range(100))

    # Execute
    board = _board(micropython, master, wid, key, msg)

    # Assert: the board derives the same key and tags as CPython's hmac does
    label = b"edgeps-worker-key\x00" + wid.encode()
    assert board["derived"] == hmac.new(master, label, hashlib.sha256).digest()
    assert board["derived"] == key
    assert board["tag"] == hmac.new(key, msg, hashlib.sha256).digest()
    # the host accepts the board's signed HEARTBEAT under this worker's key only
    decoded = wire.decode(board["heartbeat"], key=key)
    assert (decoded.wid, decoded.tagged) == (wid, True)
    with pytest.raises(wire.WireError, match="tag mismatch"):
        wire.decode(board["heartbeat"], key=derive_worker_key(master, "w99"))
