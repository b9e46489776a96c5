"""`serve --lan`: the job directory it writes and the config serve then runs with."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from edgeps.runtime.config import ServeConfig
from edgeps.runtime.exposure import check_keys
from edgeps.runtime.lan import prepare_lan
from edgeps.security.keys import derive_worker_key, read_key_file


def lan_config(tmp_path: Path, **kw: object) -> ServeConfig:
    base: dict[str, object] = {
        "job": "lab", "lan": True, "boards": "w00,pi-1",
        "job_dir": str(tmp_path / "lab"), "listen": "0.0.0.0:1883",
    }  # fmt: skip
    base.update(kw)
    return ServeConfig(**base)  # type: ignore[arg-type]


def test_a_lan_job_gets_credentials_acls_and_keys(tmp_path: Path) -> None:
    # Execute: the decision only; nothing is started or bound
    cfg, lan = prepare_lan(lan_config(tmp_path))
    # Assert: serve connects as its own user and signs with the master key
    assert lan is not None
    d = tmp_path / "lab"
    assert cfg.username == "edgeps-host"
    assert cfg.password_file == str(d / "broker/credentials/edgeps-host.password")
    assert cfg.hmac_key_file == str(d / "master.key")
    check_keys(cfg)  # off loopback, and keyed: it may start
    master = read_key_file(d / "master.key")
    for wid in ("w00", "pi-1"):
        assert read_key_file(lan.key_of(wid)) == derive_worker_key(master, wid)
        assert lan.password_of(wid).is_file()
        assert not stat.S_IMODE(os.stat(lan.password_of(wid)).st_mode) & 0o077
    conf = (d / "broker/mosquitto.conf").read_text().splitlines()
    assert "allow_anonymous false" in conf and "listener 1883 0.0.0.0" in conf
    acl = (d / "broker/acl").read_text()
    assert "user pi-1\ntopic write edgeps/lab/up/pi-1\n" in acl
    assert lan.address.host == "127.0.0.1" and lan.address.port == 1883
    text = "\n".join(lan.instructions())
    assert "pi-1" in text and "master.key stays on this host" in text


def test_a_second_run_keeps_the_boards_credentials(tmp_path: Path) -> None:
    _, first = prepare_lan(lan_config(tmp_path))
    assert first is not None
    before = first.password_of("w00").read_text()
    _, again = prepare_lan(lan_config(tmp_path))
    assert again is not None and again.reused
    assert again.password_of("w00").read_text() == before
    _, grown = prepare_lan(lan_config(tmp_path, boards="w00,pi-1,w02"))
    assert grown is not None and not grown.reused and grown.password_of("w02").is_file()


def test_listen_implies_lan_and_a_loopback_listener_needs_no_wildcard(
    tmp_path: Path,
) -> None:
    cfg, lan = prepare_lan(lan_config(tmp_path, lan=False, listen="127.0.0.1:1999"))
    assert lan is not None and lan.board_url == "mqtt://127.0.0.1:1999"
    assert cfg.hmac_key_file is not None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"broker": "amqtt"}, "--broker auto or mosquitto"),
        ({"broker": "mqtt://127.0.0.1:1883"}, "--broker auto or mosquitto"),
        ({"boards": None}, "--boards"),
        ({"username": "me"}, "drop --username"),
    ],
)
def test_lan_refuses_what_it_cannot_honour(
    tmp_path: Path, change: dict[str, object], words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        prepare_lan(lan_config(tmp_path, **change))


def test_without_lan_the_config_is_untouched(tmp_path: Path) -> None:
    cfg = ServeConfig(job="lab")
    assert prepare_lan(cfg) == (cfg, None)
