"""The planner's costs: what serve and mosquitto cost on one machine.

``Calibration`` holds what ``edgeps plan --calibrate``
(``edgeps.lab.plan.calibrate``) measured; ``edgeps.lab.plan.capacity`` asks it for a
process's cores at a load and for the load that fits in a share of a core.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from edgeps.lab.plan import curve as plan_curve
from edgeps.lab.plan.curve import Points


def beats_per_s(rate: float, heartbeat_s: float) -> float:
    """HEARTBEATs one worker sends per second when it pushes ``rate`` updates/s.

    A worker sends none within ``heartbeat_s`` of its last UPDATE (PROTOCOL.md,
    HEARTBEAT), so a gap of ``1/rate`` between updates carries
    ``ceil(gap / heartbeat_s) - 1`` beats, and none at all once a worker
    pushes at least once a heartbeat period. A worker held at a barrier
    longer than that beats too; at the rates planned here rounds are shorter.
    """
    if heartbeat_s <= 0:
        raise ValueError("heartbeat_s must be > 0")
    if rate <= 0:
        return 1.0 / heartbeat_s
    per_gap = max(0, math.ceil(1.0 / (rate * heartbeat_s) - 1e-9) - 1)
    return rate * per_gap


@dataclass(frozen=True)
class Calibration:
    """Per-update costs measured on one machine (``edgeps plan --calibrate``).

    With ``host_loads`` / ``broker_loads`` (jobs at ``job_rate`` updates/s
    per sensor, ``job_n_params`` parameters) a process's cores follow the
    measured load curve (``edgeps.lab.plan.curve``); without them, the line
    ``idle + cost * load``.
    """

    host_fixed_us: float  # serve CPU per update, size-independent part
    host_per_param_us: float  # ... and per parameter
    broker_us_per_msg: float  # one mosquitto's CPU per message through it
    core_us_per_update: float  # the PS core alone (no network), for reference
    host_idle_cores: float = 0.0  # serve's CPU of a job at no load (ticks, metrics)
    broker_idle_cores: float = 0.0  # mosquitto's likewise
    n_params: tuple[int, ...] = ()  # model sizes measured at
    source: str = "default"
    host_loads: Points = ()  # (updates/s, serve cores) of the jobs
    broker_loads: Points = ()  # (publishes/s in, mosquitto cores) of the jobs
    job_n_params: int = 0
    job_rate: float = 0.0  # updates/s per sensor of the jobs

    def host_us(self, n_params: int) -> float:
        return self.host_fixed_us + self.host_per_param_us * n_params

    def _host_extra(self, n_params: int) -> float:
        return self.host_per_param_us * (n_params - self.job_n_params) * 1e-6

    def host_cores(self, updates: float, n_params: int) -> float:
        """Serve's cores applying and releasing ``updates`` per second."""
        if self.host_loads:
            knots = plan_curve.curve(self.host_loads)
            return plan_curve.cores_at(knots, updates, self._host_extra(n_params))
        return self.host_idle_cores + updates * self.host_us(n_params) * 1e-6

    def host_capacity(self, cores: float, n_params: int) -> float:
        """The updates/s one serve handles within ``cores``."""
        if self.host_loads:
            knots = plan_curve.curve(self.host_loads)
            return plan_curve.capacity(knots, cores, self._host_extra(n_params))
        per = self.host_us(n_params) * 1e-6
        return max(0.0, cores - self.host_idle_cores) / per if per > 0 else math.inf

    def broker_cores(self, msgs: float) -> float:
        """One mosquitto's cores at ``msgs`` publishes/s in (each delivered on)."""
        if self.broker_loads:
            return plan_curve.cores_at(plan_curve.curve(self.broker_loads), msgs)
        return self.broker_idle_cores + msgs * self.broker_us_per_msg * 1e-6

    def broker_capacity(self, cores: float) -> float:
        """The publishes/s in one mosquitto handles within ``cores``."""
        if self.broker_loads:
            return plan_curve.capacity(plan_curve.curve(self.broker_loads), cores)
        per = self.broker_us_per_msg * 1e-6
        return max(0.0, cores - self.broker_idle_cores) / per if per > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["n_params"] = list(self.n_params)
        for k in ("host_loads", "broker_loads"):
            out[k] = [list(p) for p in getattr(self, k)]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        fields["n_params"] = tuple(int(n) for n in fields.get("n_params", ()))
        for k in ("host_loads", "broker_loads"):
            pts = tuple((float(x), float(y)) for x, y in fields.get(k, ()))
            if pts:
                plan_curve.curve(pts)  # ValueError if a point is bad
            fields[k] = pts
        for k in ("host_fixed_us", "host_per_param_us", "broker_us_per_msg",
                  "host_idle_cores", "broker_idle_cores"):  # fmt: skip
            if k not in fields and k.endswith("idle_cores"):
                continue
            if not (isinstance(fields.get(k), (int, float)) and fields[k] >= 0):
                raise ValueError(f"calibration: {k} must be a number >= 0")
        return cls(**fields)


# `edgeps plan --calibrate --rate 1/s` on the shared 2-core x86-64 box the
# figures in host/BENCHMARKS.md come from (2026-12-01 18:03 UTC, jobs of 60,
# 250, 1,000 and 2,000 loop-emulated sensors); a machine's own calibration
# replaces them
DEFAULT_CALIBRATION = Calibration(
    host_fixed_us=307.9,
    host_per_param_us=0.107,
    broker_us_per_msg=35.9,
    core_us_per_update=24.1,
    host_idle_cores=0.070,
    broker_idle_cores=0.0166,
    n_params=(204, 16_384),
    source="default (measured on a shared 2-core box, not on this machine)",
    host_loads=((60.6, 0.0423), (250.0, 0.145), (989.9, 0.502), (1970.3, 0.669)),
    broker_loads=(
        (121.1, 0.00985),
        (500.0, 0.0386),
        (1979.7, 0.102),
        (3940.6, 0.151),
    ),
    job_n_params=204,
    job_rate=1.0,
)
