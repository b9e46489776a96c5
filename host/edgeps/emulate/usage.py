"""What an emulated sensor spent: its bytes each way and its time, for the energy model.

A `UsageMeter` watches one sensor's messages where its MQTT client sends and
receives them (below the emulated link delay, so a time is when the bytes
really left or arrived) and splits each life into:

- computing: from the release the sensor computes on (PARAMS on its own down
  topic, or a RELEASE naming a shared copy) to the UPDATE it then sends;
- waiting: from that UPDATE to the next release, i.e. held at the barrier,
  the round trip and the host's queue included (a board cannot tell them
  apart; the simulator counts only the PS's hold);
- the rest of its alive time (joining, idle between messages).

Bytes are MQTT payload bytes of every message the sensor published (HELLO,
UPDATE, HEARTBEAT, BYE) or received (WELCOME, PARAMS, shared copies it is
subscribed to, RELEASE, MODEL, STOP): what the simulator counts for UPDATEs
and PARAMS, without MQTT's own headers and acknowledgements. Joules are the
energy model's (`edgeps.workloads.energy`) for these counts at the sensor's
link rate; with ``sleep_at_barrier`` the waiting time is spent asleep.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from edgeps.workloads.energy import BoardTime, board_joules, board_power
from edgeps.workloads.scenarios import WorkerProfile

# message types (edgeps_worker.wire): byte 3 of every message
_UPDATE, _PARAMS, _RELEASE = 2, 3, 10
_WID_LEN = 6  # byte 6: the worker id's length; 0 in a shared PARAMS


@dataclass
class Usage:
    """One sensor's totals over all its lives; seconds and payload bytes."""

    alive: float = 0.0
    compute: float = 0.0
    waiting: float = 0.0  # from an UPDATE sent to the next release received
    bytes_up: int = 0
    bytes_down: int = 0
    messages_up: int = 0
    messages_down: int = 0


def _kind(payload: bytes) -> int:
    return payload[3] if len(payload) > _WID_LEN and payload[:2] == b"EP" else 0


class UsageMeter:
    """Counts one sensor's usage as its messages go by; times are the caller's."""

    def __init__(self) -> None:
        self.usage = Usage()
        self._life: float | None = None  # when the current life began
        self._computing: float | None = None  # since the release it computes on
        self._waiting: float | None = None  # since its last UPDATE left

    def life_starts(self, now: float) -> None:
        self.life_ends(now)
        self._life = now

    def life_ends(self, now: float) -> None:
        """A life ends (stop, crash): its open spans end ``now``."""
        u = self.usage
        if self._life is not None:
            u.alive += max(0.0, now - self._life)
        if self._computing is not None:
            u.compute += max(0.0, now - self._computing)
        if self._waiting is not None:
            u.waiting += max(0.0, now - self._waiting)
        self._life = self._computing = self._waiting = None

    def sent(self, payload: bytes, now: float) -> None:
        u = self.usage
        u.bytes_up += len(payload)
        u.messages_up += 1
        if _kind(payload) != _UPDATE:
            return
        if self._computing is not None:
            u.compute += max(0.0, now - self._computing)
            self._computing = None
        if self._waiting is None:
            self._waiting = now  # a chunked UPDATE waits from its first chunk

    def received(self, payload: bytes, now: float) -> None:
        u = self.usage
        u.bytes_down += len(payload)
        u.messages_down += 1
        kind = _kind(payload)
        own_params = kind == _PARAMS and payload[_WID_LEN] > 0
        if not (own_params or kind == _RELEASE):
            return
        if self._waiting is not None:
            u.waiting += max(0.0, now - self._waiting)
            self._waiting = None
        if self._computing is None:
            self._computing = now

    def so_far(self, now: float) -> Usage:
        """The totals with the open spans counted up to ``now`` (nothing ends)."""
        u = Usage(**asdict(self.usage))
        if self._life is not None:
            u.alive += max(0.0, now - self._life)
        if self._computing is not None:
            u.compute += max(0.0, now - self._computing)
        if self._waiting is not None:
            u.waiting += max(0.0, now - self._waiting)
        return u


def usage_report(
    usage: Usage,
    profile: WorkerProfile,
    *,
    board: str = "esp32",
    sleep_at_barrier: bool = False,
) -> dict[str, Any]:
    """The usage with the joules ``board`` spends on it at the sensor's link rate."""
    t = BoardTime(
        alive=usage.alive,
        compute=usage.compute,
        held=usage.waiting,
        bytes_up=usage.bytes_up,
        bytes_down=usage.bytes_down,
    )
    joules = board_joules(
        board_power(board),
        t,
        link_rate=profile.link_rate,
        sleep_at_barrier=sleep_at_barrier,
    )
    out: dict[str, Any] = {k: round(v, 4) if isinstance(v, float) else v
                           for k, v in asdict(usage).items()}  # fmt: skip
    out.update(board=board, sleep_at_barrier=sleep_at_barrier, joules=round(joules, 5))
    return out


class MeteredLink:
    """A worker transport that tells a `UsageMeter` what crosses it.

    Wraps the thread engine's MQTT link (under the emulated link delay, so the
    meter sees when bytes really leave); every other member is the inner link's.
    """

    def __init__(self, inner: Any, meter: UsageMeter, clock: Any) -> None:
        self.inner = inner
        self.meter = meter
        self.clock = clock

    @property
    def connected(self) -> bool:
        return bool(self.inner.connected)

    def connect(self, will_topic: str, will_payload: bytes) -> None:
        self.inner.connect(will_topic, will_payload)

    def subscribe(self, topic: str, qos: int = 1) -> None:
        self.inner.subscribe(topic, qos)

    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> None:
        self.meter.sent(payload, self.clock())  # the compute ends as it leaves
        self.inner.publish(topic, payload, qos, retain)

    def poll(self, timeout_ms: int) -> tuple[str, bytes] | None:
        got: tuple[str, bytes] | None = self.inner.poll(timeout_ms)
        if got is not None and got[1] is not None:
            self.meter.received(got[1], self.clock())
        return got

    def close(self) -> None:
        self.inner.close()

    def abort(self) -> None:
        abort = getattr(self.inner, "abort", None)
        if abort is not None:
            abort()
        else:
            self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
