"""The energy model's arithmetic against hand-computed cases."""

from __future__ import annotations

import pytest
from edgeps.sim.energy import (
    ESP32,
    RASPBERRY_PI,
    BoardMeter,
    BoardPower,
    BoardTime,
    board_joules,
    board_power,
)

FLAT = BoardPower("flat", 2.0, tx_a=1.0, rx_a=0.5, cpu_a=0.25, idle_a=0.1,
                  sleep_a=0.01, link_rate=1000.0)  # fmt: skip


def test_each_state_costs_volts_x_amps_x_seconds() -> None:
    # 1000 bytes up at 1000 bit/s = 8 s TX; 500 down = 4 s RX; 10 s compute;
    # 100 s alive leaves 78 s idle
    t = BoardTime(alive=100.0, compute=10.0, bytes_up=1000, bytes_down=500)
    want = 2.0 * (1.0 * 8 + 0.5 * 4 + 0.25 * 10 + 0.1 * 78)
    assert board_joules(FLAT, t) == pytest.approx(want)


def test_sleeping_at_the_barrier_moves_held_time_from_idle_to_sleep() -> None:
    t = BoardTime(alive=100.0, compute=10.0, held=50.0)
    awake = board_joules(FLAT, t)
    asleep = board_joules(FLAT, t, sleep_at_barrier=True)
    assert awake == pytest.approx(2.0 * (0.25 * 10 + 0.1 * 90))
    assert asleep == pytest.approx(2.0 * (0.25 * 10 + 0.1 * 40 + 0.01 * 50))


def test_the_links_rate_sets_the_radio_time() -> None:
    t = BoardTime(alive=10.0, bytes_up=1000)
    # 8000 bits at 4000 bit/s = 2 s TX, 8 s idle
    assert board_joules(FLAT, t, link_rate=4000.0) == pytest.approx(
        2.0 * (1.0 * 2 + 0.1 * 8)
    )


def test_an_esp32_sending_a_kilobyte_at_one_megabit() -> None:
    # 8 ms at 240 mA, 3.3 V: 6.336 mJ
    t = BoardTime(alive=0.008, bytes_up=1000)
    assert board_joules(ESP32, t) == pytest.approx(3.3 * 0.240 * 0.008)


def test_a_pi_gains_nothing_from_sleep_it_does_not_have() -> None:
    t = BoardTime(alive=60.0, compute=6.0, held=30.0)
    plain = board_joules(RASPBERRY_PI, t)
    assert board_joules(RASPBERRY_PI, t, sleep_at_barrier=True) == pytest.approx(plain)
    assert plain == pytest.approx(5.0 * (1.28 * 6 + 0.54 * 54))


def test_the_meter_counts_bytes_and_holds() -> None:
    meter = BoardMeter({"w": 100}, {"w": 40})
    meter.sent_up("w")
    meter.hold("w", 1.0)
    assert meter.held_until("w", 3.0) == pytest.approx(2.0)
    meter.sent_down("w", 4.0)
    meter.sent_down("w", 9.0)  # not held: nothing added
    assert (meter.up["w"], meter.down["w"]) == (100, 80)
    assert meter.held["w"] == pytest.approx(3.0)
    meter.hold("w", 10.0)
    meter.end_hold("w", 10.5)  # it went down: the hold ends, nothing sent
    assert meter.held_until("w", 20.0) == pytest.approx(3.5)
    assert meter.down["w"] == 80


def test_unknown_boards_and_bad_figures_are_refused() -> None:
    assert board_power("esp32") is ESP32
    with pytest.raises(ValueError, match="unknown board"):
        board_power("arduino")
    with pytest.raises(ValueError):
        BoardPower("x", 3.3, 0.1, 0.1, 0.1, 0.1, sleep_a=0.2, link_rate=1.0)
