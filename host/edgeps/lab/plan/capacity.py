"""Capacity planner: messages/s, bytes/s, CPU and machine counts per tier.

Pure arithmetic over measured inputs; `edgeps plan` (``edgeps.commands.plan``)
prints it and ``edgeps.lab.plan.calibrate`` measures the per-update costs.

Tiers. Every sensor board pushes ``rate`` updates/s over its own link and
gets one PARAMS back per update (the current protocol answers every push
with a release on the board's own topic). Without relays all boards talk to
the central broker and one host. With K relays (``edgeps relay``) each relay
serves S/K boards through a site broker and is one worker upstream: it folds
``fan_in`` of its boards' gradients into one update, so the central broker
and host see K workers at ``rate * (S/K) / fan_in`` updates/s each.

Sizes. A message costs the bytes of the MQTT PUBLISH packets that carry it
(``edgeps.sim.links.message_bytes``: the real wire chunks at the board's
chunk size, each in the board client's own PUBLISH encoding) plus a 4-byte
PUBACK per packet the other way (QoS 1). ``--compress`` sets the bytes per
parameter of UPDATE by the wire's layouts (``wire.encoded_len``: f32 4,
f16 2, int8 1 plus a 4-byte scale per 128, topk:F F x 8: a u32 index and an
f32 value per kept entry); PARAMS stay f32. TCP/IP headers are not
counted (about 40 bytes per 1,460-byte segment).

Costs (``Calibration`` in ``edgeps.lab.plan.costs``, measured by
``edgeps.lab.plan.calibrate``). Serve's cores follow the curve measured by
real jobs at a few loads (``edgeps.lab.plan.curve``: the cost per update falls
as the load rises), plus ``host_per_param_us`` per update and parameter beyond the
jobs' model; without jobs, ``host_idle_cores`` plus ``host_fixed_us +
host_per_param_us * n`` per applied update and its release. The core's cost per
event does not grow with the number of workers (``bench core``), so it is
per update, not per worker. A relay is charged like a host for each board
update it handles plus each update it pushes upstream. A broker's cores
follow its measured curve over publishes/s in (each delivered on), else
``broker_idle_cores`` plus ``broker_us_per_msg`` per message. Processes are planned at
``utilisation`` of one core each (serve, a relay and mosquitto are each one
busy thread).

The PS / P2P / ring analysis (Alqahtani and Demirbas, "Performance Analysis
and Comparison of Distributed Machine Learning Systems", 2019), per
synchronous round of N workers and a model of M bytes: a single PS moves
2 N M through its own link (N gradients in, N models out), peer-to-peer
moves about 2 M (N - 1) / N per worker, ring all-reduce the same per worker
in 2 (N - 1) steps, so only the PS's traffic grows with N. An edgeps host
is that single PS (``round_bytes``): the host's broker link carries N
UPDATEs in and N PARAMS out. Where MQTT differs: (1) the broker, not the
host, fans messages out, so a release published once on a shared topic
would cost the host M instead of N M while the broker still delivers N M
(``broadcast``; the current protocol publishes per board); (2) the broker
tier scales out (bridges, clusters) while a PS link does not; (3) boards
never reach each other (a star through the broker), so P2P and ring do not
apply; (4) a relay tier is a PS of PSs: the central host moves 2 K M per
round instead of 2 N M.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from edgeps.lab.plan.costs import DEFAULT_CALIBRATION, Calibration, beats_per_s

__all__ = ["DEFAULT_CALIBRATION", "Calibration", "PlanInput", "plan"]

PUBACK = 4  # bytes of an MQTT 3.1.1 PUBACK
BOARD_CHUNK = 4096  # the board's default max_chunk (edgeps_worker.wire)
HEARTBEAT_S = 5.0  # the board's default heartbeat interval
_COMPRESS = re.compile(r"^(f32|f16|int8|topk:(0?\.\d+|1(\.0*)?))$")


@dataclass(frozen=True)
class PlanInput:
    sensors: int
    model: str
    n_params: int
    rate: float  # updates/s per sensor
    link_bps: float  # each sensor link, bits/s each way
    relays: int = 0
    compress: str = "f32"
    fan_in: int | None = None  # gradients a relay folds per upstream push
    chunk: int = BOARD_CHUNK
    heartbeat_s: float = HEARTBEAT_S
    utilisation: float = 0.7  # share of a core (or broker) a plan may use
    broker_connections: int = 20_000  # client connections per broker node

    def check(self) -> None:
        if self.sensors < 1 or self.n_params < 1:
            raise ValueError("sensors and the model size must be >= 1")
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"rate must be > 0, got {self.rate!r}")
        if not self.link_bps > 0:
            raise ValueError("link rate must be > 0")
        if not 0 <= self.relays <= self.sensors:
            raise ValueError("relays must be between 0 and the number of sensors")
        if self.fan_in is not None and self.fan_in < 1:
            raise ValueError("fan-in must be >= 1")
        if not 0 < self.utilisation <= 1:
            raise ValueError("utilisation must be in (0, 1]")
        if not _COMPRESS.match(self.compress):
            raise ValueError(
                f"compress must be f32, f16, int8 or topk:F, got {self.compress!r}"
            )
        if self.chunk < 256 or self.heartbeat_s <= 0 or self.broker_connections < 1:
            raise ValueError("chunk >= 256, heartbeat > 0, connections >= 1")


def parse_per_second(text: str) -> float:
    """Updates per second from "1/s", "2/min", "1/10s", "0.5" or "30/h"."""
    t = text.strip().lower().replace(" ", "")
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)(?:/(\d+(?:\.\d*)?)?(s|min|h))?", t)
    if not m:
        raise ValueError(f"bad rate {text!r}: expected e.g. 1/s, 2/min, 1/10s")
    count, every, unit = float(m.group(1)), m.group(2), m.group(3) or "s"
    seconds = (float(every) if every else 1.0) * {"s": 1, "min": 60, "h": 3600}[unit]
    if count <= 0 or seconds <= 0:
        raise ValueError(f"bad rate {text!r}: must be > 0")
    return count / seconds


def _wire_code(compress: str, n: int) -> tuple[int, int]:
    """The UPDATE code of ``compress`` and its k (TOPK's entries, as serve sets it)."""
    from edgeps_worker import wire

    if compress.startswith("topk:"):
        return wire.DTYPE_TOPK, max(1, round(float(compress[5:]) * n))
    codes = {"f32": wire.DTYPE_F32, "f16": wire.DTYPE_F16, "int8": wire.DTYPE_I8}
    return codes[compress], 0


def bytes_per_param(compress: str) -> float:
    if compress.startswith("topk:"):
        return 8.0 * float(compress[5:])
    return {"f32": 4.0, "f16": 2.0, "int8": 1.0}[compress]


@dataclass(frozen=True)
class Sizes:
    """One update and one release on a board's link (f32 sizes from the wire)."""

    update_bytes: int
    update_packets: int
    params_bytes: int
    params_packets: int
    heartbeat_bytes: int


def message_sizes(inp: PlanInput, wid: str = "s000001") -> Sizes:
    """Bytes and PUBLISH packets of one UPDATE and one PARAMS, from the wire.

    The UPDATE carries ``wire.encoded_len`` bytes of its code (I8's block
    scales and TOPK's index + value records included), framed by the real
    encoder; PARAMS are f32 (``edgeps.sim.links.message_bytes``).
    """
    from edgeps_worker import mqtt_packets, wire, wire_host

    from edgeps.sim.links import SIM_JOB, message_bytes

    f32 = message_bytes(wid, inp.n_params, inp.model, inp.chunk)
    code, k = _wire_code(inp.compress, inp.n_params)
    data, dtype = bytes(wire.encoded_len(code, inp.n_params, k)), code
    topic = wire.topic_up(SIM_JOB, wid)
    chunks = wire_host.encode_update(
        SIM_JOB, wid, 1, 1, 1, 1, 0.0, 32, 0.0, data, dtype=dtype, max_chunk=inp.chunk
    )
    packets = [mqtt_packets.publish_packet(topic, c, qos=1, pid=1) for c in chunks]
    params_packets = math.ceil(
        4 * inp.n_params / _room(inp.chunk, wire.FIELDS[wire.PARAMS][0], wid)
    )
    return Sizes(
        sum(len(p) for p in packets),
        len(packets),
        f32["params"],
        max(1, params_packets),
        f32["heartbeat"],
    )


def release_bytes(wid: str = "s000001") -> int:
    """One RELEASE (type 10) naming a shared PARAMS copy, as the PS sends it."""
    from edgeps_worker import wire_host

    from edgeps.sim.links import SIM_JOB

    return len(wire_host.encode_release(SIM_JOB, wid, 1, 1, 1, bytes(16)))


def _room(chunk: int, fmt: str, wid: str) -> int:
    """Data bytes per chunk: the chunk minus its prefix, ids and fixed fields."""
    import struct

    from edgeps_worker import wire

    from edgeps.sim.links import SIM_JOB

    head = wire.PREFIX_LEN + len(SIM_JOB) + len(wid) + struct.calcsize(fmt)
    return chunk - head - (chunk - head) % 4


@dataclass
class Tier:
    name: str
    count: int  # machines/processes of this tier in the plan
    msgs_in: float  # MQTT packets/s into one of them (publishes)
    msgs_out: float  # ... and out of it (publishes or deliveries)
    bytes_per_s: float  # bytes/s through one of them, in + out
    cpu_cores: float  # CPU of one of them, in cores
    need: int = 1  # how many the load needs at the planned utilisation
    note: str = ""


@dataclass
class Plan:
    inp: PlanInput
    sizes: Sizes
    calibration: Calibration
    link: dict[str, float]
    tiers: list[Tier] = field(default_factory=list)
    round_bytes: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def tier(self, name: str) -> Tier:
        return next(t for t in self.tiers if t.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": asdict(self.inp),
            "sizes": asdict(self.sizes),
            "calibration": self.calibration.to_dict(),
            "link": self.link,
            "tiers": [asdict(t) for t in self.tiers],
            "round_bytes": self.round_bytes,
            "warnings": self.warnings,
        }


def _need(load: float, capacity: float) -> int:
    return max(1, math.ceil(load / capacity - 1e-9)) if capacity > 0 else 1


def _link(inp: PlanInput, sz: Sizes) -> dict[str, float]:
    """One sensor's link: bytes/s each way, utilisation, the rate that fits."""
    r, hb = inp.rate, beats_per_s(inp.rate, inp.heartbeat_s)
    up_one = sz.update_bytes + PUBACK * sz.params_packets
    down_one = sz.params_bytes + PUBACK * sz.update_packets
    up = r * up_one + hb * sz.heartbeat_bytes
    down = r * down_one + hb * PUBACK
    return {
        "up_bytes_per_s": up,
        "down_bytes_per_s": down,
        "up_utilisation": 8 * up / inp.link_bps,
        "down_utilisation": 8 * down / inp.link_bps,
        "update_transfer_s": 8 * sz.update_bytes / inp.link_bps,
        "max_rate_per_s": inp.link_bps / 8 / max(up_one, down_one),
    }


def plan(inp: PlanInput, cal: Calibration) -> Plan:
    """The load at every tier and how many of each the load needs."""
    inp.check()
    sz = message_sizes(inp)
    s, r, util = inp.sensors, inp.rate, inp.utilisation
    hb = beats_per_s(r, inp.heartbeat_s)  # each sensor's
    out = Plan(inp, sz, cal, _link(inp, sz))
    link = out.link
    if max(link["up_utilisation"], link["down_utilisation"]) > 1:
        busiest = max(link["up_utilisation"], link["down_utilisation"])
        out.warnings.append(
            f"a sensor link would carry {busiest:.0%}"
            f" of its {inp.link_bps / 1e3:g} kbit/s: at most "
            f"{link['max_rate_per_s']:.3g} updates/s per sensor fit (compress, or "
            "a lower rate)"
        )
    n = inp.n_params
    host_cap = cal.host_capacity(util, n)  # updates/s within one process
    broker_cap = cal.broker_capacity(util)  # publishes/s in within one
    up_p, down_p = sz.update_packets, sz.params_packets
    both = sz.update_bytes + sz.params_bytes
    out.tiers.append(
        Tier(
            "sensor link",
            s,
            r * up_p + hb,
            r * down_p,
            link["up_bytes_per_s"] + link["down_bytes_per_s"],
            0.0,
            1,
            "each sensor",
        )  # fmt: skip
    )
    workers = s
    updates = s * r  # updates/s the host applies
    if inp.relays:
        k = workers = inp.relays
        boards = math.ceil(s / k)
        fan_in = min(boards, inp.fan_in or boards)
        upstream = r * boards / fan_in  # one relay's pushes/s upstream
        updates = k * upstream
        handled = r * boards + upstream  # updates a relay takes in or sends
        relay_cpu = cal.host_cores(handled, n)
        # the site broker: boards' updates to the relay, releases back, beats
        site_in = r * boards * (up_p + down_p) + boards * hb
        site_cpu = cal.broker_cores(site_in)
        out.tiers.append(
            Tier(
                "site broker",
                k,
                site_in,
                site_in,
                r * boards * both * 2,
                site_cpu,
                _need(site_in, broker_cap),
                f"{boards} boards and their relay",
            )  # fmt: skip
        )
        out.tiers.append(
            Tier(
                "relay",
                k,
                r * boards * up_p + upstream * down_p,
                r * boards * down_p + upstream * up_p,
                handled * both,
                relay_cpu,
                _need(handled, host_cap),
                f"folds {fan_in} gradients into each of its {upstream:.3g} "
                "upstream pushes/s",
            )  # fmt: skip
        )
        if relay_cpu > util:
            most = host_cap / (r * (1 + 1 / fan_in))
            out.warnings.append(
                f"a relay would need {relay_cpu:.2f} cores: about {most:.0f} boards "
                f"per relay fit, so at least {math.ceil(s / most)} relays"
            )
    # the central broker: updates in and on to the host, releases in and out;
    # a relay upstream beats at its own push rate
    beats = workers * beats_per_s(updates / workers, inp.heartbeat_s)
    central_in = updates * (up_p + down_p) + beats
    central_cpu = cal.broker_cores(central_in)
    broker_need = max(
        _need(central_in, broker_cap),
        _need(workers + 1, inp.broker_connections),
    )
    out.tiers.append(
        Tier(
            "central broker",
            1,
            central_in,
            central_in,
            2 * updates * both,
            central_cpu,
            broker_need,
            f"{workers} clients and the host",
        )  # fmt: skip
    )
    host_cpu = cal.host_cores(updates, n)
    each_us = 1e6 * host_cpu / updates if updates > 0 else 0.0
    out.tiers.append(
        Tier(
            "host",
            1,
            updates * up_p + beats,
            updates * down_p,
            updates * both,
            host_cpu,
            _need(updates, host_cap),
            f"{updates:.4g} updates/s at {each_us:.0f} us each",
        )  # fmt: skip
    )
    if host_cpu > util:
        out.warnings.append(
            f"one host handles about {host_cap:.0f} updates/s at {util:.0%} of a "
            f"core and this load is {updates:.4g}/s; edgeps does not shard one "
            "model over hosts: a relay tier divides it (e.g. --relays "
            f"{math.ceil(s * r / host_cap)}"
            " or more)"
        )
    if cal.job_rate and abs(cal.job_rate - r) > 1e-9 * r:
        out.warnings.append(
            f"calibrated at {cal.job_rate:g} updates/s per sensor, planned at "
            f"{r:g}: a job's cost per update depends on it (--calibrate at this "
            "rate)"
        )
    if broker_need > 1:
        out.warnings.append(
            f"the central broker needs {broker_need} nodes (messages or "
            "connections): a cluster, or bridged brokers"
        )
    m = sz.update_bytes + sz.params_bytes
    out.round_bytes = {
        "host_link_per_round": workers * m,  # the single-PS 2 N M
        # a round released together: one shared PARAMS and a RELEASE each
        "host_link_one_publish_per_round": workers * (sz.update_bytes + release_bytes())
        + sz.params_bytes,
        "broker_per_round": 2 * workers * m,  # every message in, then out
        "per_board_per_round": m,
        "ring_per_worker_per_round": 2 * (s - 1) / s * 4 * inp.n_params,
        "host_link_without_relays": s * m,
    }
    return out
