"""The board application (edgeps_worker.app) on CPython: ids, keys, config errors."""

from __future__ import annotations

import pytest
from edgeps_worker import app


@pytest.fixture
def board_main():
    return app


def test_instance_ids_and_link_nonces_are_random_64_bit():
    from edgeps_worker import clock

    drawn = {clock.random_u64() for _ in range(64)}
    assert len(drawn) == 64 and all(0 < n < 1 << 64 for n in drawn)


def test_the_board_key_is_its_own_derived_key_in_hex(board_main, tmp_path):
    from edgeps.security.keys import derive_worker_key
    from edgeps_worker import config

    base = {"job": "j", "worker_id": "w", "model": "logistic:4",
            "broker_host": "h", "sensor": "s"}  # fmt: skip
    key = derive_worker_key(b"m" * 32, "w")
    assert config.validate(dict(base, hmac_key=key.hex()))["hmac_key"] == key.hex()
    for bad in ("shared-secret", key.hex()[:-1] + "g", key.hex() + "00"):
        with pytest.raises(ValueError, match="hmac_key must be the 64 hex"):
            config.validate(dict(base, hmac_key=bad))


def test_a_missing_sensor_module_is_a_clear_error(board_main, tmp_path):
    import json

    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        json.dumps(
            {"job": "j", "worker_id": "w", "model": "logistic:4",
             "broker_host": "127.0.0.1", "sensor": "no_such_sensor_module"}
        )
    )  # fmt: skip
    assert board_main.main(["main.py", str(cfg)]) == 2


def test_a_password_needs_a_username(board_main, tmp_path):
    from edgeps_worker import config

    base = {"job": "j", "worker_id": "w", "model": "logistic:4",
            "broker_host": "h", "sensor": "s"}  # fmt: skip
    with pytest.raises(ValueError, match="a password needs a username"):
        config.validate(dict(base, password="pw"))
    cfg = config.validate(dict(base, username="u", password="pw"))
    assert (cfg["username"], cfg["password"]) == ("u", "pw")
    assert (cfg["tls_ca"], cfg["tls_hostname"]) == ("", "")
