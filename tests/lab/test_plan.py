"""`edgeps plan`: wire sizes, per-tier arithmetic, calibration storage."""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from pathlib import Path

import pytest
from edgeps.cli import main
from edgeps.lab.plan import calibrate as plan_calibrate
from edgeps.lab.plan.capacity import (
    PUBACK,
    Calibration,
    PlanInput,
    message_sizes,
    parse_per_second,
    plan,
    release_bytes,
)
from edgeps.lab.plan.costs import beats_per_s
from edgeps_worker import wire

# simple round costs, so every expected figure below is easy to check by hand
CAL = Calibration(host_fixed_us=100.0, host_per_param_us=0.0,
                  broker_us_per_msg=10.0, core_us_per_update=20.0)  # fmt: skip


def _inp(**kw: object) -> PlanInput:
    base: dict[str, object] = dict(
        sensors=1000, model="linear:63", n_params=64, rate=2.0, link_bps=250_000.0
    )
    base.update(kw)
    return PlanInput(**base)  # type: ignore[arg-type]


def _publish_len(topic: str, payload: int) -> int:
    """An MQTT 3.1.1 QoS 1 PUBLISH: type byte, varint length, topic, pid, payload."""
    rest = 2 + len(topic) + 2 + payload
    varint = 1 if rest < 128 else 2 if rest < 16384 else 3
    return 1 + varint + rest


@pytest.mark.parametrize(
    ("text", "per_s"),
    [
        ("1/s", 1.0),
        ("2/min", 2 / 60),
        ("1/10s", 0.1),
        ("0.5", 0.5),
        ("30/h", 30 / 3600),
    ],
)
def test_rates_read_as_updates_per_second(text: str, per_s: float) -> None:
    assert parse_per_second(text) == pytest.approx(per_s)


@pytest.mark.parametrize("bad", ["", "0/s", "1/day", "fast", "-1/s"])
def test_bad_rates_are_value_errors(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_per_second(bad)


@pytest.mark.parametrize(
    ("compress", "data"),
    [
        ("f32", 4 * 64),
        ("f16", 2 * 64),
        ("int8", 64 + 4),  # one block: its f32 scale, then 64 int8
        ("topk:0.25", 8 * 16),
    ],  # fmt: skip
)
def test_an_update_costs_its_wire_header_and_data_in_one_publish(
    compress: str, data: int
) -> None:
    # Prepare: a model small enough for one chunk
    wid = "s000001"
    head = wire.PREFIX_LEN + len("sim") + len(wid)
    head += struct.calcsize(wire.FIELDS[wire.UPDATE][0])

    # Execute
    sizes = message_sizes(_inp(compress=compress), wid)

    # Assert: the bytes of PROTOCOL.md's layout inside one PUBLISH
    assert sizes.update_packets == 1
    assert sizes.update_bytes == _publish_len(wire.topic_up("sim", wid), head + data)


def test_a_large_update_is_split_in_board_chunks() -> None:
    sizes = message_sizes(_inp(n_params=10_000, model="linear:9999", chunk=4096))

    # 40,000 data bytes in chunks of a little under 4,096
    assert sizes.update_packets == sizes.params_packets == math.ceil(40_000 / 4000)
    assert 40_000 < sizes.update_bytes < 40_000 + 100 * sizes.update_packets


def test_direct_plan_charges_every_update_to_the_host_and_the_broker() -> None:
    # Prepare
    inp = _inp()
    sz = message_sizes(inp)

    # Execute
    p = plan(inp, CAL)

    # Assert: 1000 sensors x 2/s = 2000 updates/s at 100 us = 0.2 cores
    host, broker = p.tier("host"), p.tier("central broker")
    assert host.cpu_cores == pytest.approx(0.2)
    assert host.need == 1 and not p.warnings
    packets = sz.update_packets + sz.params_packets
    # a sensor pushing twice a second never goes a heartbeat period quiet
    assert broker.msgs_in == pytest.approx(2000 * packets)
    assert broker.cpu_cores == pytest.approx(2000 * packets * 10e-6)
    up = 2 * (sz.update_bytes + PUBACK * sz.params_packets)
    assert p.link["up_bytes_per_s"] == pytest.approx(up)
    assert p.link["up_utilisation"] == pytest.approx(8 * up / 250_000)


def test_relays_divide_the_central_load_by_their_fan_in() -> None:
    # Prepare: 10 relays of 100 boards, each folding a whole round upstream
    p = plan(_inp(relays=10), CAL)

    # Assert: the host sees 10 workers at 2 pushes/s
    assert p.tier("host").cpu_cores == pytest.approx(20 * 100e-6)
    relay = p.tier("relay")
    assert relay.count == 10
    # 100 boards x 2/s in, plus its own 2 pushes/s upstream
    assert relay.cpu_cores == pytest.approx((200 + 2) * 100e-6)
    folded = plan(_inp(relays=10, fan_in=10), CAL)
    assert folded.tier("host").cpu_cores == pytest.approx(10 * 20 * 100e-6)


def test_overloads_name_how_many_hosts_relays_and_brokers_the_load_needs() -> None:
    # 100,000 sensors at 1/s: 100,000 updates/s at 100 us = 10 cores
    p = plan(_inp(sensors=100_000, rate=1.0), CAL)

    assert p.tier("host").need == math.ceil(10 / 0.7)
    assert any("relay tier" in w for w in p.warnings)
    assert p.tier("central broker").need >= math.ceil(100_001 / 20_000)
    relayed = plan(_inp(sensors=100_000, rate=1.0, relays=100), CAL)
    assert relayed.tier("host").need == 1
    assert relayed.tier("relay").cpu_cores == pytest.approx(1001 * 100e-6)


def test_a_link_too_slow_for_the_rate_is_reported_with_the_rate_that_fits() -> None:
    p = plan(_inp(n_params=10_000, model="linear:9999", link_bps=64_000.0), CAL)

    assert p.link["up_utilisation"] > 1
    assert p.link["max_rate_per_s"] < 2
    assert any("sensor link" in w for w in p.warnings)


@pytest.mark.parametrize(
    "kw",
    [
        {"sensors": 0},
        {"rate": 0.0},
        {"relays": -1},
        {"compress": "zip"},
        {"compress": "topk:2"},
        {"utilisation": 1.5},
        {"fan_in": 0},
    ],  # fmt: skip
)
def test_bad_inputs_are_value_errors(kw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        plan(_inp(**kw), CAL)


def test_host_cost_splits_into_fixed_and_per_parameter_parts() -> None:
    fixed, per_param = plan_calibrate.fit([(100, 150.0), (1100, 250.0)])

    assert (fixed, per_param) == pytest.approx((140.0, 0.1))
    assert plan_calibrate.fit([(64, 80.0)]) == (80.0, 0.0)


def test_a_job_s_cost_at_no_load_is_paid_once_per_process() -> None:
    # Prepare: 0.05 cores of ticks and metrics in serve, 0.01 in mosquitto
    idle = dataclasses.replace(CAL, host_idle_cores=0.05, broker_idle_cores=0.01)

    # Execute
    p = plan(_inp(), idle)

    # Assert: 2000 updates/s at 100 us, plus serve's own idle cost
    assert p.tier("host").cpu_cores == pytest.approx(0.05 + 0.2)
    base = plan(_inp(), CAL).tier("central broker").cpu_cores
    assert p.tier("central broker").cpu_cores == pytest.approx(base + 0.01)


def test_job_costs_split_into_no_load_and_per_update_parts() -> None:
    # two jobs: 0.1 cores at 400 updates/s, 0.18 at 800 (0.02 + 200 us each)
    idle, per = plan_calibrate._split([(400.0, 0.1), (800.0, 0.18)])

    assert (idle, per) == pytest.approx((0.02, 200e-6))
    assert plan_calibrate._split([(500.0, 0.1)]) == pytest.approx((0.0, 200e-6))


def test_a_stored_calibration_is_what_the_plan_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prepare
    path = tmp_path / "cal.json"
    plan_calibrate.save(CAL, path)

    # Execute
    argv = ["plan", "--sensors", "1000", "--model", "linear:63", "--rate", "2/s",
            "--calibration", str(path), "--json"]  # fmt: skip
    assert main(argv) == 0

    # Assert
    out = json.loads(capsys.readouterr().out)
    assert out["calibration"]["host_fixed_us"] == 100.0
    host = next(t for t in out["tiers"] if t["name"] == "host")
    assert host["cpu_cores"] == pytest.approx(0.2)
    assert plan_calibrate.load(path) == CAL


def test_an_unreadable_calibration_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text('{"host_fixed_us": -1}')

    assert plan_calibrate.load(path) is None
    assert plan_calibrate.load(tmp_path / "missing.json") is None


@pytest.mark.integration
def test_calibration_measures_a_real_broker_and_coordinator() -> None:
    # a small model and few messages: a few seconds on a private mosquitto
    cal = plan_calibrate.calibrate(64, messages=300, job_sensors=())

    assert cal.host_fixed_us > 0 and cal.broker_us_per_msg > 0
    assert cal.core_us_per_update > 0
    assert cal.n_params == (64, 16_384)
    assert cal.source.startswith("calibrated")


@pytest.mark.integration
def test_a_real_job_is_measured_while_updates_flow() -> None:
    from edgeps.lab.plan.job import measure_job

    # serve + 4 emulated sensors on a private mosquitto, a 3 s window
    job = measure_job(4, window=3.0, model="softmax:33x6")

    assert job["updates_per_s"] > 0
    assert job["serve_cores"] is not None and job["serve_cores"] > 0
    assert job["broker_cores"] is not None and job["broker_cores"] > 0


@pytest.mark.integration
def test_a_real_job_at_a_set_rate_runs_the_loop_emulator() -> None:
    from edgeps.lab.plan.job import measure_job

    # 6 loop-emulated sensors computing 0.5 s per update, a 3 s window
    job = measure_job(6, window=3.0, model="softmax:33x6", rate=2.0)

    assert job["rate"] == 2.0
    assert job["updates_per_s"] > 0
    assert job["serve_cores"] is not None and job["serve_cores"] > 0


@pytest.mark.parametrize(
    ("rate", "beats"),
    [(2.0, 0.0), (0.2, 0.0), (0.1, 0.1), (1 / 12, 2 / 12), (0.0, 0.2)],
)
def test_a_sensor_beats_only_in_gaps_longer_than_a_heartbeat(
    rate: float, beats: float
) -> None:
    # a 5 s heartbeat: a 10 s gap carries one beat, a 12 s gap two, none
    # when it pushes at least every 5 s, and one per period when it never pushes
    assert beats_per_s(rate, 5.0) == pytest.approx(beats)


def test_slow_sensors_heartbeats_reach_the_broker() -> None:
    # 1000 sensors pushing once in 12 s beat twice between pushes
    p = plan(_inp(rate=1 / 12), CAL)
    sz = message_sizes(_inp(rate=1 / 12))
    packets = sz.update_packets + sz.params_packets
    updates = 1000 / 12
    want = updates * packets + 1000 * 2 / 12
    assert p.tier("central broker").msgs_in == pytest.approx(want)
    assert p.tier("host").msgs_in == pytest.approx(
        updates * sz.update_packets + 1000 * 2 / 12
    )


def test_a_round_released_together_costs_the_host_one_params_copy() -> None:
    # 1000 workers in one round: UPDATEs in, one shared PARAMS and a RELEASE each out
    p = plan(_inp(), CAL)
    sz, rb = message_sizes(_inp()), p.round_bytes
    one = 1000 * (sz.update_bytes + release_bytes()) + sz.params_bytes
    assert rb["host_link_one_publish_per_round"] == one
    assert rb["host_link_per_round"] == 1000 * (sz.update_bytes + sz.params_bytes)
    assert 0 < release_bytes() < sz.params_bytes
