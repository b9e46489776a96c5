"""Joules a board spends on a job: radio, CPU and idle time at a board's power draw.

Shared by the simulator (``edgeps.sim.energy`` counts its boards) and the
emulator (``edgeps.emulate.usage`` measures its sensors).

A board's time splits into sending (bytes up x 8 / link rate), receiving
(bytes down x 8 / link rate), computing, and the rest, waiting with its
radio associated. With ``sleep_at_barrier`` the time it is held at the
barrier is spent asleep instead. Energy = supply volts x sum(current x time).
The radio's current during TX and RX is the whole module's (the CPU runs on
it), so those seconds are not counted again as compute. Not modelled: the
wake-up a sleeping board needs to hear its release (a timer, or the access
point's DTIM beacon), the (re)connection, and the radio's duty cycle inside
a message (a packet's airtime at the PHY rate is shorter than the link rate
the message crosses at; the link rate is what the board is awake for).

ESP32 figures, as commonly quoted from Espressif's ESP32 datasheet v4.x
(section "RF Power-Consumption Specifications" and table "Power Consumption
by Power Modes"), not looked up for this model: TX ~240 mA at 3.3 V for
802.11b (1 Mbps, 19.5 dBm), RX ~100 mA (802.11b/g/n), CPU at 240 MHz in
modem-sleep ~30-50 mA (50 taken), light sleep ~0.8 mA. The waiting current,
30 mA, is our assumption: Wi-Fi modem-sleep with the CPU idle, between the
datasheet's modem-sleep and light-sleep figures. The default link rate is
the 1 Mbit/s the TX figure is quoted at.

Raspberry Pi 4 Model B figures, as commonly quoted from independent
measurements (the Raspberry Pi datasheet gives only the supply, 5 V 3 A):
idle ~2.7 W, all cores busy ~6.4 W; Wi-Fi traffic taken as ~0.5 W over idle
(our assumption). A Pi has no light sleep: held at the barrier it idles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BoardPower:
    """A board's supply and its current in each state (amps)."""

    name: str
    volts: float
    tx_a: float  # sending
    rx_a: float  # receiving
    cpu_a: float  # computing
    idle_a: float  # waiting, radio associated
    sleep_a: float  # held at the barrier, asleep (light sleep)
    link_rate: float  # bits/s a message crosses at when the link sets none

    def __post_init__(self) -> None:
        values = (self.volts, self.tx_a, self.rx_a, self.cpu_a, self.idle_a)
        if not all(math.isfinite(v) and v > 0 for v in (*values, self.link_rate)):
            raise ValueError(f"{self.name}: volts, currents and link rate must be > 0")
        if not (math.isfinite(self.sleep_a) and 0 <= self.sleep_a <= self.idle_a):
            raise ValueError(f"{self.name}: sleep current must be in [0, idle]")


ESP32 = BoardPower(
    "esp32", 3.3, tx_a=0.240, rx_a=0.100, cpu_a=0.050, idle_a=0.030,
    sleep_a=0.0008, link_rate=1e6,
)  # fmt: skip
RASPBERRY_PI = BoardPower(
    "pi", 5.0, tx_a=0.64, rx_a=0.64, cpu_a=1.28, idle_a=0.54, sleep_a=0.54,
    link_rate=20e6,
)  # fmt: skip
BOARDS = {b.name: b for b in (ESP32, RASPBERRY_PI)}


@dataclass
class BoardTime:
    """What one board did: seconds alive, computing and held, bytes each way."""

    alive: float = 0.0  # seconds alive
    compute: float = 0.0  # seconds computing
    held: float = 0.0  # seconds held at the barrier
    bytes_up: int = 0
    bytes_down: int = 0


def board_joules(
    power: BoardPower,
    t: BoardTime,
    *,
    link_rate: float | None = None,
    sleep_at_barrier: bool = False,
) -> float:
    """Joules ``power``'s board spends on ``t`` (``link_rate`` None or 0: its own)."""
    rate = link_rate if link_rate else power.link_rate
    tx = 8.0 * t.bytes_up / rate
    rx = 8.0 * t.bytes_down / rate
    asleep = t.held if sleep_at_barrier else 0.0
    idle = max(0.0, t.alive - t.compute - tx - rx - asleep)
    amp_seconds = (
        power.tx_a * tx
        + power.rx_a * rx
        + power.cpu_a * t.compute
        + power.idle_a * idle
        + power.sleep_a * asleep
    )
    return power.volts * amp_seconds


def board_power(name: str) -> BoardPower:
    """The power model of a board by name (esp32, pi)."""
    try:
        return BOARDS[name]
    except KeyError:
        raise ValueError(f"unknown board {name!r}; known: {sorted(BOARDS)}") from None
