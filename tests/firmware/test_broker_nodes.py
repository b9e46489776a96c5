"""A board config naming the nodes of a broker cluster: parsed and checked by
the one validator, tried in turn by the client, and on the real MicroPython
binary a board whose first node is down trains through the second."""

from __future__ import annotations

import errno

import pytest
from edgeps_worker import config
from edgeps_worker.mqtt import MQTTClient

from tests.conftest import free_port
from tests.firmware.test_mqtt_fake_link import FakeBrokerLink
from tests.firmware.test_train_with_serve import (
    run_board_with_serve,
    start_serve,
    write_board_data,
)
from tests.helpers.fw_host import write_worker_config


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("10.0.0.5", "10.0.0.5"),
        ("10.0.0.5:1884", (("10.0.0.5", 1884),)),
        ("a,b", (("a", 1883), ("b", 1883))),
        (" a:1 , b:2 ", (("a", 1), ("b", 2))),
    ],
)
def test_broker_host_is_one_host_or_the_nodes_of_a_cluster(text, want) -> None:
    assert config.broker_nodes(text, 1883) == want


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "every entry"),
        ("a,,b", "every entry"),
        (":5", "every entry"),
        ("a:", "port must be in"),
        ("a:x", "port must be in"),
        ("a:0", "port must be in"),
        ("a:65536", "port must be in"),
    ],
)
def test_a_bad_node_list_is_a_config_error_naming_it(text, why) -> None:
    raw = {"job": "j", "worker_id": "w", "model": "linear:4", "broker_host": text,
           "data": "d.bin"}  # fmt: skip
    with pytest.raises(ValueError, match=why):
        config.validate(raw)


def test_a_bad_port_type_is_reported_next_to_the_node_list_check() -> None:
    raw = {"job": "j", "worker_id": "w", "model": "linear:4", "broker_host": "a,b",
           "broker_port": "1883", "data": "d.bin"}  # fmt: skip
    with pytest.raises(ValueError, match="broker_port must be int"):
        config.validate(raw)


def test_a_failed_connect_moves_on_to_the_next_node() -> None:
    # Prepare: node a refuses connections, node b is a broker
    tried: list[tuple[str, int]] = []
    link = FakeBrokerLink()

    def opener(host: str, port: int, timeout_ms: int) -> FakeBrokerLink:
        tried.append((host, port))
        if host == "a":
            raise OSError(errno.ECONNREFUSED, "refused")
        return link

    nodes = (("a", 1883), ("b", 1884))
    c = MQTTClient("c1", nodes, opener=opener)  # type: ignore[arg-type]

    # Execute: the first connect fails on a, the next goes to b
    with pytest.raises(OSError):
        c.connect("w/t", b"bye")
    c.connect("w/t", b"bye")
    # b stays first while it works: a later reconnect goes to b again
    c.close_link()
    c.connect("w/t", b"bye")

    # Assert
    assert tried == [("a", 1883), ("b", 1884), ("b", 1884)]
    assert c.connected


@pytest.mark.integration
@pytest.mark.firmware
def test_a_board_whose_first_broker_node_is_down_trains_through_the_next(
    micropython, mosquitto, tmp_path
) -> None:
    # Prepare: nothing listens on the first node's port
    write_board_data(tmp_path, 0)
    dead = free_port()
    nodes = f"127.0.0.1:{dead},127.0.0.1:{mosquitto.port}"
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="digits", model="mlp:64-32-10", batch=16,
        max_iterations=0, verbose=True, broker_host=nodes,
    )  # fmt: skip
    serve = start_serve(mosquitto.port, "digits", "asp", "0.8")
    # Execute
    worker, summary = run_board_with_serve(micropython, cfg, tmp_path, serve)

    # Assert: it trained to the host's target through the live node
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert "stopped: done" in worker.stdout
    assert summary["stop_reason"] == "target_accuracy", summary["_stderr"]
    assert summary["workers"]["mpy-1"]["rejected"] == 0
