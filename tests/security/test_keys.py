"""Per-device keys: derivation, key files, compatibility, `edgeps keys`."""

from __future__ import annotations

import hashlib
import hmac
import logging
import stat
from pathlib import Path

import pytest
from edgeps.cli import main
from edgeps.runtime.connection_flags import read_key
from edgeps.runtime.job import read_hmac_key
from edgeps.security.keys import (
    KeyFileError,
    derive_worker_key,
    format_key_file,
    load_key_file,
    read_key_file,
    write_key_file,
)

MASTER = bytes(range(32))


def test_derivation_matches_an_independent_hmac() -> None:
    # Prepare: the documented construction, spelled out with the standard library
    want = hmac.new(MASTER, b"edgeps-worker-key\0" + b"w07", hashlib.sha256).digest()

    # Execute
    got = derive_worker_key(MASTER, "w07")

    # Assert
    assert got == want
    assert len(got) == 32
    assert derive_worker_key(MASTER, "w08") != got
    assert derive_worker_key(bytes(32), "w07") != got


@pytest.mark.parametrize("bad", ["", "w/0", "a" * 33, "wé", "w 1"])
def test_derivation_refuses_a_bad_worker_id(bad: str) -> None:
    with pytest.raises(ValueError, match="worker id"):
        derive_worker_key(MASTER, bad)


def test_key_file_round_trip_is_mode_0600(tmp_path: Path) -> None:
    # Prepare
    path = tmp_path / "w07.key"
    key = derive_worker_key(MASTER, "w07")

    # Execute
    write_key_file(path, key, worker_id="w07")
    loaded = load_key_file(path)

    # Assert
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (loaded.key, loaded.kind, loaded.worker_id) == (key, "worker", "w07")
    assert path.read_text().splitlines()[1] == key.hex()


def test_writing_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    # Prepare
    path = tmp_path / "master.key"
    write_key_file(path, MASTER)

    # Execute / Assert
    with pytest.raises(FileExistsError, match="--force"):
        write_key_file(path, bytes(32))
    assert read_key_file(path) == MASTER
    path.chmod(0o644)
    write_key_file(path, bytes(32), force=True)
    assert read_key_file(path) == bytes(32)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "content",
    [b"s3cret\n", b"  spaced secret \r\n", b"\x00\xffbinary", b"a" * 64, b"ab" * 32],
)
def test_files_without_a_header_read_as_hmac_key_file_reads_them(
    tmp_path: Path, content: bytes
) -> None:
    # Prepare
    path = tmp_path / "shared.key"
    path.write_bytes(content)
    path.chmod(0o600)

    # Execute
    ours = load_key_file(path)

    # Assert: the same bytes as serve's and worker's --hmac-key-file today
    assert ours.kind == "raw"
    assert ours.key == read_hmac_key(str(path)) == read_key(str(path))


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "is empty"),
        (b" \n\t\n", "is empty"),
        (b"# edgeps-key master\nzz" + b"0" * 62 + b"\n", "valid hex"),
        (b"# edgeps-key master\n" + b"0" * 63 + b"\n", "valid hex"),
        (b"# edgeps-key master\n" + b"00" * 16 + b"\n", "16-byte key, want 32"),
        (b"# edgeps-key master\n", "one line of hex"),
        (b"# edgeps-key master\n" + b"00" * 32 + b"\n" + b"00" * 32, "found 2"),
        (b"# edgeps-key sideways\n" + b"00" * 32, "bad header"),
        (b"# edgeps-key worker w/1\n" + b"00" * 32, "bad header"),
        (b"# edgeps-key master\n\xff" + b"00" * 32, "not ASCII"),
    ],
)
def test_unusable_key_files_say_why(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    # Prepare
    path = tmp_path / "bad.key"
    path.write_bytes(content)
    path.chmod(0o600)

    # Execute / Assert
    with pytest.raises(KeyFileError, match=reason):
        read_key_file(path)


def test_a_missing_key_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="nope.key does not exist"):
        read_key_file(tmp_path / "nope.key")


def test_a_key_file_others_can_read_gives_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Prepare
    path = tmp_path / "open.key"
    path.write_text(format_key_file(MASTER))
    path.chmod(0o644)

    # Execute
    with caplog.at_level(logging.WARNING, logger="edgeps.security.keys"):
        key = read_key_file(path)
        path.chmod(0o600)
        read_key_file(path)

    # Assert: still usable, one warning (for the 0644 read only)
    assert key == MASTER
    assert [r.getMessage() for r in caplog.records] == [
        f"the key file {path} is readable by other users (mode 644): chmod 600 {path}"
    ]


def test_cli_new_then_derive_one_and_a_fleet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prepare
    master_path = tmp_path / "master.key"

    # Execute
    rc_new = main(["keys", "new", "--out", str(master_path)])
    rc_again = main(["keys", "new", "--out", str(master_path)])
    master = load_key_file(master_path)
    rc_one = main(
        ["keys", "derive", "--master", str(master_path), "--worker", "w00"]
        + ["--out", str(tmp_path / "w00.key")]
    )
    rc_all = main(
        ["keys", "derive", "--master", str(master_path), "--all", "w00,w01,pi-2"]
        + ["--out-dir", str(tmp_path / "fleet")]
    )
    rc_worker_as_master = main(
        ["keys", "derive", "--master", str(tmp_path / "w00.key"), "--worker", "x"]
        + ["--out", str(tmp_path / "x.key")]
    )

    # Assert
    assert (rc_new, rc_again, rc_one, rc_all, rc_worker_as_master) == (0, 2, 0, 0, 2)
    assert "--force" in capsys.readouterr().err
    assert master.kind == "master" and len(master.key) == 32
    assert stat.S_IMODE(master_path.stat().st_mode) == 0o600
    assert read_key_file(tmp_path / "w00.key") == derive_worker_key(master.key, "w00")
    for wid in ("w00", "w01", "pi-2"):
        got = load_key_file(tmp_path / "fleet" / f"{wid}.key")
        assert (got.key, got.worker_id) == (derive_worker_key(master.key, wid), wid)
    assert not (tmp_path / "x.key").exists()


def test_two_master_keys_differ(tmp_path: Path) -> None:
    # Execute
    for name in ("a.key", "b.key"):
        assert main(["keys", "new", "--out", str(tmp_path / name)]) == 0

    # Assert
    assert read_key_file(tmp_path / "a.key") != read_key_file(tmp_path / "b.key")


def test_cli_derive_refuses_a_bad_fleet_without_writing(tmp_path: Path) -> None:
    # Prepare
    master_path = tmp_path / "master.key"
    write_key_file(master_path, MASTER)
    out = tmp_path / "fleet"

    # Execute
    rc_repeat = main(
        ["keys", "derive", "--master", str(master_path), "--all", "w0,w1,w0"]
        + ["--out-dir", str(out)]
    )
    rc_bad = main(
        ["keys", "derive", "--master", str(master_path), "--all", "w0,w#1"]
        + ["--out-dir", str(out)]
    )
    rc_mixed = main(
        ["keys", "derive", "--master", str(master_path), "--worker", "w0"]
        + ["--out-dir", str(out)]
    )

    # Assert
    assert (rc_repeat, rc_bad, rc_mixed) == (2, 2, 2)
    assert not out.exists()
