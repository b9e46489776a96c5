"""How the mosquitto `serve --broker auto` starts is sized for thousands of sensors.

One connection, the host's, receives every sensor's updates; the limits that
matter are mosquitto's per-client ones for that connection. Each setting
below comes with why it has its value; `mosquitto_lines` is what goes into
the generated ``mosquitto.conf`` (mosquitto 2.x), `fd_limit` what the child
process gets as its open-files limit.

Measured with ``python tools/broker_load.py`` (host/BENCHMARKS.md, "Broker settings
under load").
"""

from __future__ import annotations

import contextlib
import resource
from dataclasses import dataclass

DEFAULT_SENSORS = 2000  # what the auto broker is sized for
HOST_QUEUE_BYTES = 256 << 20  # = HostLink's inbox bound (queue_bytes)
SPARE_FDS = 256  # listeners, logs, the host and monitoring clients


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    why: str


def settings(sensors: int = DEFAULT_SENSORS, *, private: bool = True) -> list[Setting]:
    """The mosquitto settings for a job of up to ``sensors`` sensors.

    ``private``: for the broker serve starts itself (no persistence); a
    broker `edgeps broker-config` writes has its own persistence lines.
    """
    if sensors < 1:
        raise ValueError("sensors must be >= 1")
    queued = max(10000, 100 * sensors)
    found = [
        Setting(
            "max_queued_messages",
            str(queued),
            "per client: QoS 1 messages held for a client beyond its inflight "
            "window before mosquitto drops them ('Outgoing messages are being "
            "dropped'). Only the host's connection ever has a backlog: a BSP "
            "round releases every sensor at once and their chunked updates "
            "arrive together, so room for 100 messages per sensor "
            f"({queued} for {sensors}) absorbs such a burst",
        ),
        Setting(
            "max_queued_bytes",
            str(HOST_QUEUE_BYTES),
            "per client: the same backlog bounded in payload bytes (256 MiB, "
            "the host's own inbox bound), so the message count above cannot "
            "grow the broker's memory without limit",
        ),
        Setting(
            "max_inflight_messages",
            "1000",
            "per client: QoS 1 messages sent to a client and not yet "
            "acknowledged; the host acknowledges as it reads, and a wider "
            "window keeps its socket full instead of waiting one PUBACK round "
            "trip per 100 messages. Sensors have 1-2 messages in flight",
        ),
        Setting(
            "max_connections",
            "-1",
            "no cap on connections on the listener; the real cap is the open "
            "files limit, which the broker process gets raised (fd_limit)",
        ),
        Setting(
            "sys_interval",
            "2",
            "seconds between $SYS updates: serve reads the broker's dropped "
            "and queued message counters from $SYS for its summary",
        ),
        Setting(
            "set_tcp_nodelay",
            "true",
            "no Nagle delay: a small PUBACK or release must not wait ~40 ms "
            "for a delayed ACK",
        ),
        Setting(
            "message_size_limit",
            str(16 << 20),
            "a bound above any one edgeps message (a chunk is at most 1 MiB); "
            "the host rejects oversized messages itself and counts them",
        ),
    ]
    if private:
        found.append(
            Setting(
                "persistence",
                "false",
                "a private broker lives as long as serve; serve republishes its "
                "retained MODEL whenever its link comes back",
            )
        )
    return found


def mosquitto_lines(
    sensors: int = DEFAULT_SENSORS, *, private: bool = True
) -> list[str]:
    """The settings as ``mosquitto.conf`` lines, each after its reason."""
    out: list[str] = []
    for s in settings(sensors, private=private):
        out.append(f"# {s.why}")
        out.append(f"{s.name} {s.value}")
    return out


def fd_limit(sensors: int = DEFAULT_SENSORS) -> tuple[int, int]:
    """(soft, hard) open-files limit for the broker: one fd per connection + spare.

    The soft limit is raised as far as the hard limit allows (a non-root
    process cannot go past it; 1024 is a common soft default, which caps a
    broker at about 1000 sensors).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = sensors + SPARE_FDS
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    return max(soft, want), hard


def raise_fd_limit(sensors: int = DEFAULT_SENSORS) -> int:
    """Apply `fd_limit` to this process (a broker started next inherits it).

    Returns the soft limit now in force; a refusal leaves the old one.
    """
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, fd_limit(sensors))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
