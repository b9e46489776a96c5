"""The simulator's board meter; the energy model is `edgeps.workloads.energy`.

The model's names are re-exported here, where the simulator's users found
them first.
"""

from __future__ import annotations

from edgeps.workloads.energy import (
    BOARDS,
    ESP32,
    RASPBERRY_PI,
    BoardPower,
    BoardTime,
    board_joules,
    board_power,
)

__all__ = [
    "BOARDS",
    "ESP32",
    "RASPBERRY_PI",
    "BoardMeter",
    "BoardPower",
    "BoardTime",
    "board_joules",
    "board_power",
]


class BoardMeter:
    """Counts each simulated board's bytes and held time as the run goes.

    Bytes are counted once per message sent (an UPDATE up, a PARAMS down),
    at the sizes the wire gives them; QoS 1 repeats are not counted.
    """

    def __init__(self, update_bytes: dict[str, int], params_bytes: dict[str, int]):
        self._up_size, self._down_size = update_bytes, params_bytes
        self.up = dict.fromkeys(update_bytes, 0)
        self.down = dict.fromkeys(update_bytes, 0)
        self.held = dict.fromkeys(update_bytes, 0.0)
        self._since: dict[str, float] = {}

    def sent_up(self, wid: str) -> None:
        self.up[wid] += self._up_size[wid]

    def sent_down(self, wid: str, now: float) -> None:
        self.down[wid] += self._down_size[wid]
        self.end_hold(wid, now)

    def end_hold(self, wid: str, now: float) -> None:
        """The board is released, or went down: its hold ends ``now``."""
        since = self._since.pop(wid, None)
        if since is not None:
            self.held[wid] += now - since

    def hold(self, wid: str, now: float) -> None:
        self._since.setdefault(wid, now)

    def held_until(self, wid: str, now: float) -> float:
        """Seconds held so far, the current hold included."""
        since = self._since.get(wid)
        return self.held[wid] + (0.0 if since is None else now - since)
