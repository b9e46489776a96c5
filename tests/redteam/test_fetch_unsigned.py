"""A fetching client takes no unsigned model from a broker off loopback.

Observed before: a forged WELCOME + PARAMS answering ``edgeps worker --infer
--fetch`` without a key was written and predicted the attacker's class for
every row; ``serve`` refuses to run unkeyed off loopback, the fetching client
did not. The check reads the flags only, before any connection.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from edgeps.runtime.exposure import check_fetch_keys

from tests.redteam._held import held

# TEST-NET-1 (RFC 5737): never routed, so nothing answers there
OFF_LOOPBACK = "mqtt://192.0.2.1:1883"


def fetch(tmp_path: Path, broker: str, *extra: str) -> subprocess.CompletedProcess[str]:
    rows = tmp_path / "rows.csv"
    rows.write_text("1,2,3,0\n")
    cmd = [
        sys.executable, "-m", "edgeps", "worker", "--infer", "--fetch",
        "--broker", broker, "--job", "lab", "--id", "pi-9",
        "--model-file", str(tmp_path / "model.bin"), "--data", str(rows),
        "--release-timeout", "1", *extra,
    ]  # fmt: skip
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(cmd, -1, "", f"timed out: {exc}")


def test_fetch_without_a_key_off_loopback_is_refused(tmp_path: Path) -> None:
    done = fetch(tmp_path, OFF_LOOPBACK)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    seen = f"rc {done.returncode}, stderr {done.stderr[-500:]!r}"
    held(done.returncode == 2, "an unkeyed --fetch off loopback exits 2", seen)
    held(
        len(lines) == 1 and "forged model" in lines[0] and "192.0.2.1" in lines[0],
        "one line says why, naming the broker",
        seen,
    )
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "model.bin").exists()


def test_allow_unsigned_belongs_to_fetch(tmp_path: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("1,2,3,0\n")
    plain = subprocess.run(
        [sys.executable, "-m", "edgeps", "worker", "--infer", "--allow-unsigned",
         "--data", str(rows), "--model-file", str(tmp_path / "none.bin")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert plain.returncode == 2
    assert "--allow-unsigned applies to --fetch" in plain.stderr


@pytest.mark.parametrize(
    "broker, key, allow",
    [
        ("mqtt://127.0.0.1:1883", None, False),
        ("mqtt://localhost:1883", None, False),
        (OFF_LOOPBACK, "pi-9.key", False),
        (OFF_LOOPBACK, None, True),
    ],
)
def test_fetch_is_allowed_with_a_key_on_loopback_or_when_told(
    broker: str, key: str | None, allow: bool
) -> None:
    check_fetch_keys(broker, key, allow)


def test_any_node_off_loopback_of_a_cluster_needs_a_key() -> None:
    with pytest.raises(ValueError, match="forged model"):
        check_fetch_keys("mqtt://127.0.0.1:1883,mqtt://10.0.0.2:1883", None, False)
