"""The board application (edgeps_worker.app) on CPython: growing incarnations."""

from __future__ import annotations

import pytest
from edgeps_worker import app


@pytest.fixture
def board_main():
    return app


def test_incarnation_grows_and_is_saved(board_main, tmp_path):
    path = str(tmp_path / "inc.txt")
    first = board_main.next_incarnation(path)
    second = board_main.next_incarnation(path)
    assert 0 < first < second <= 0xFFFFFFFF
    assert (tmp_path / "inc.txt").read_text() == str(second)


def test_incarnation_counts_past_a_saved_value_from_the_future(board_main, tmp_path):
    # a value saved by a run whose clock ran ahead still wins: never go back
    path = tmp_path / "inc.txt"
    path.write_text("4000000000")
    assert board_main.next_incarnation(str(path)) == 4000000001


def test_unwritable_incarnation_file_is_not_fatal(board_main, tmp_path):
    inc = board_main.next_incarnation(str(tmp_path / "missing-dir" / "inc.txt"))
    assert inc > 0


def test_a_missing_sensor_module_is_a_clear_error(board_main, tmp_path):
    import json

    cfg = tmp_path / "cfg.json"
    cfg.write_text(
        json.dumps(
            {"job": "j", "worker_id": "w", "model": "logistic:4",
             "broker_host": "127.0.0.1", "sensor": "no_such_sensor_module",
             "incarnation_file": str(tmp_path / "inc.txt")}
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
