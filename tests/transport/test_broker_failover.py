"""A broker given as the nodes of a cluster: parsing, and links that fail over."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from edgeps.runtime.connection_flags import connection_options
from edgeps.transport.broker import BrokerAddress, open_broker, parse_broker_urls
from edgeps.transport.host_link import HostLink
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink

from tests.conftest import free_port, start_mosquitto


def test_a_list_of_urls_is_the_nodes_of_one_broker_in_order() -> None:
    nodes = parse_broker_urls("mqtt://a:1884, mqtt://b")

    assert nodes == (BrokerAddress("a", 1884), BrokerAddress("b", 1883))
    assert ConnectionOptions("mqtt://a:1884,mqtt://b").address == nodes[0]
    assert parse_broker_urls("mqtts://h") == (BrokerAddress("h", 8883, True),)


@pytest.mark.parametrize(
    "bad",
    ["mqtt://a,mqtts://b", "mqtt://a:1,mqtt://a:1", "mqtt://a,", "mqtt://a,b:1"],
)
def test_bad_node_lists_are_value_errors(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_broker_urls(bad)
    with pytest.raises(ValueError):
        ConnectionOptions(bad).check()


def test_an_external_cluster_handle_keeps_every_node() -> None:
    handle = open_broker("mqtt://10.0.0.5:1884,mqtt://10.0.0.6:1884")

    assert handle.kind == "external" and handle.proc is None
    assert handle.address == BrokerAddress("10.0.0.5", 1884)
    assert handle.url == "mqtt://10.0.0.5:1884,mqtt://10.0.0.6:1884"
    # what serve hands its link: the same list
    assert ConnectionOptions(handle.url).addresses == (
        BrokerAddress("10.0.0.5", 1884),
        BrokerAddress("10.0.0.6", 1884),
    )


def test_next_node_cycles_through_the_list() -> None:
    link = MqttLink(ConnectionOptions("mqtt://a:1,mqtt://b:2"), "w")

    assert link.address.host == "a"
    assert link.next_node().host == "b"
    assert link.next_node().host == "a"


def test_tls_options_need_every_node_to_be_mqtts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mqtts"):
        ConnectionOptions("mqtt://a,mqtt://b", tls_insecure=True).check()
    ConnectionOptions("mqtts://a,mqtts://b", tls_insecure=True).check()


def test_connection_flags_take_a_node_list() -> None:
    import argparse

    from edgeps.runtime.connection_flags import add_connection_flags

    parser = argparse.ArgumentParser()
    add_connection_flags(parser)
    opts = connection_options(parser.parse_args(["--broker", "mqtt://a,mqtt://b"]))

    assert [a.host for a in opts.addresses] == ["a", "b"]


def _wait(cond: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


@pytest.mark.integration
def test_worker_link_skips_a_dead_node(tmp_path: Path) -> None:
    # Prepare: the first node listed is down (nothing listens on its port)
    broker = start_mosquitto(tmp_path)
    dead = free_port()
    link = MqttLink(
        ConnectionOptions(f"mqtt://127.0.0.1:{dead},{broker.url}"),
        "w00",
        connect_timeout=5.0,
    )
    try:
        # Execute
        link.connect("edgeps/j/up/w00", b"bye")
        link.subscribe("edgeps/j/down/w00")
        link.publish("edgeps/j/down/w00", b"hi")
        got = link.poll(5000)
    finally:
        link.close()
        broker.stop()

    # Assert: the live node took the link and stays the current one
    assert link.address.port == broker.port
    assert got == ("edgeps/j/down/w00", b"hi")


@pytest.mark.integration
def test_worker_link_names_every_node_when_none_answers() -> None:
    ports = [free_port(), free_port()]
    link = MqttLink(
        ConnectionOptions(",".join(f"mqtt://127.0.0.1:{p}" for p in ports)),
        "w00",
        connect_timeout=2.0,
    )

    with pytest.raises(ConnectionError) as err:
        link.connect()

    assert all(str(p) in str(err.value) for p in ports)


@pytest.mark.integration
def test_host_link_fails_over_when_its_node_dies(tmp_path: Path) -> None:
    # Prepare: two independent brokers stand for two nodes of one cluster
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = start_mosquitto(tmp_path / "a")
    b = start_mosquitto(tmp_path / "b")
    link = HostLink(
        ConnectionOptions(f"{a.url},{b.url}"),
        client_id="edgeps-host-j",
        subscriptions=[("edgeps/j/up/+", 1)],
    )
    try:
        link.start(timeout=10)
        first = link.address.port

        # Execute: node A goes away (killed by pid)
        a.proc.kill()
        a.proc.wait(10)
        moved = _wait(lambda: link.connected and link.address.port == b.port, 30)
        # a publish to the new node reaches the renewed subscription
        probe = MqttLink(ConnectionOptions(b.url), "probe", connect_timeout=5.0)
        probe.connect()
        probe.publish("edgeps/j/up/w00", b"push")
        probe.close()
        got = link.get(5.0)
    finally:
        link.stop()
        a.stop()
        b.stop()

    # Assert
    assert first == a.port
    assert moved
    assert link.connects >= 2
    assert got == ("edgeps/j/up/w00", b"push")
