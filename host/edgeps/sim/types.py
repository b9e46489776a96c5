"""What a simulated run is given (``SimConfig``) and reports (``SimResult``)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from edgeps.core.defaults import JOB
from edgeps.core.privacy import check_dp

# CPU microseconds per update on a 2-core x86-64 box, from
# `tools/cpu_per_update.py` (host/BENCHMARKS.md, "What a simulated run
# charges"): serve + mosquitto, and `edgeps emulate` running the sensors' real
# gradients and MQTT clients (between its thread and loop engines' costs)
HOST_CPU_US = 350.0
EMULATOR_CPU_US = 450.0


@dataclass(frozen=True)
class SimConfig:
    """One simulated training job; every field has a default that fits a laptop run."""

    policy: str = "dsp"
    scenario: str = "mixed"
    n_workers: int = 8
    seed: int = 0
    dataset: str = "sensors"
    model: str | None = None  # None: the dataset's default spec
    partition: str = "iid"
    batch_size: int = JOB.batch
    optimizer: str = JOB.optimizer
    lr: float = JOB.lr
    lr_workers: int = JOB.lr_workers  # past this many live workers: lr x R / N
    staleness_aware: bool | None = None  # None ("auto"): the job default
    norm_guard: float = JOB.norm_guard  # as serve: k x the recent median; 0 = off
    divergence_backoff: float = JOB.divergence_backoff
    balance: bool = False  # the PS assigns each worker its batch (Balancer)
    # ... from a board's first push (Balancer eager); None: by the policy
    balance_eager: bool | None = None
    target_accuracy: float = 0.91
    max_time: float = 60.0  # virtual seconds
    stop_at_target: bool = False  # end at the first evaluation at the target, as serve
    # seconds at which board i (in the scenario's order) first says HELLO, as a
    # real run's sensors join one by one; a board past the end starts at 0
    join_times: tuple[float, ...] = ()
    # serve's rule (edgeps.core.admission): a newcomer holds no barrier until
    # its first push; False: from its join, as the policy matrix has it
    admit_on_first_push: bool = False
    eval_interval: float = JOB.eval_interval
    liveness_timeout: float = 3.0
    heartbeat_interval: float = 0.5
    tick_interval: float = 0.1
    retry_timeout: float = 0.3  # QoS 1 redelivery after a missing acknowledgement
    # shape every board's link (bits/s, s, segment loss); None: the scenario's
    link_rate: float | None = None
    link_delay: float | None = None
    link_loss: float | None = None
    compress: str = "f32"  # UPDATE code (edgeps.codecs): sizes on the link, and error
    # PARAMS code (f32, f16, int8): sizes on the link, and what a board computes on
    compress_down: str = "f32"
    # the host's CPU per applied update (serve + broker) and, when the sensors are
    # emulated on the same machine, the emulator's; ``host_cores`` serve them all
    host_cpu_us: float = HOST_CPU_US
    emulator_cpu_us: float = 0.0  # 0: boards compute on their own CPUs
    host_cores: float = 2.0
    # every board's base iteration time (s) before the model's FLOPs scale it,
    # instead of the scenario's (as `edgeps emulate --compute-time`); None: theirs
    compute_time: float | None = None
    # local rounds (edgeps.core.defaults): SGD steps between pushes, or local
    # epochs over the shard, or seconds of compute (> 0 wins, in that order)
    local_steps: int = JOB.local_steps
    local_epochs: float = JOB.local_epochs
    local_time: float = JOB.local_time
    server_opt: str = JOB.server_opt  # what the PS applies deltas with
    server_lr: float = JOB.server_lr
    # the energy model (edgeps.workloads.energy): which board, and whether a board
    # held at the barrier sleeps
    board: str = "esp32"
    sleep_at_barrier: bool = False
    # differential privacy (edgeps.core.privacy): off, central or local; the
    # clip norm C, the noise multiplier sigma, the delta epsilon is reported
    # at, and the epsilon that ends the run (0: no limit)
    dp: str = JOB.dp
    dp_clip: float = JOB.dp_clip
    dp_noise: float = JOB.dp_noise
    dp_delta: float = JOB.dp_delta
    dp_epsilon_budget: float = JOB.dp_epsilon_budget

    def __post_init__(self) -> None:
        positive = {
            "lr": self.lr,
            "max_time": self.max_time,
            "eval_interval": self.eval_interval,
            "liveness_timeout": self.liveness_timeout,
            "heartbeat_interval": self.heartbeat_interval,
            "tick_interval": self.tick_interval,
            "retry_timeout": self.retry_timeout,
            "server_lr": self.server_lr,
        }
        for key, value in positive.items():
            if not (
                isinstance(value, (int, float)) and math.isfinite(value) and value > 0
            ):
                raise ValueError(f"{key} must be a finite number > 0, got {value!r}")
        if not 0.0 < self.target_accuracy <= 1.0:
            raise ValueError("target_accuracy must be in (0, 1]")
        costs = (self.host_cpu_us, self.emulator_cpu_us)
        if not all(math.isfinite(c) and c >= 0 for c in costs):
            raise ValueError("host_cpu_us and emulator_cpu_us must be >= 0")
        if not (math.isfinite(self.host_cores) and self.host_cores > 0):
            raise ValueError("host_cores must be > 0")
        if self.compute_time is not None and not (
            math.isfinite(self.compute_time) and self.compute_time > 0
        ):
            raise ValueError("compute_time must be a finite number > 0 (or None)")
        if self.lr_workers < 0 or not (self.norm_guard == 0 or self.norm_guard > 1):
            raise ValueError("lr_workers must be >= 0; norm_guard 0 or > 1")
        if self.n_workers < 1 or self.batch_size < 1:
            raise ValueError("n_workers and batch_size must be >= 1")
        if self.local_steps < 1 or self.local_epochs < 0 or self.local_time < 0:
            raise ValueError("local_steps must be >= 1, local epochs and time >= 0")
        check_dp(self.dp, self.dp_clip, self.dp_noise)
        if not 0 < self.dp_delta < 1 or not self.dp_epsilon_budget >= 0:
            raise ValueError("dp_delta must be in (0, 1), dp_epsilon_budget >= 0")
        if not all(math.isfinite(t) and t >= 0 for t in self.join_times):
            raise ValueError("join_times must be finite seconds >= 0")
        if self.heartbeat_interval >= self.liveness_timeout:
            raise ValueError("heartbeat_interval must be shorter than liveness_timeout")


@dataclass
class SimResult:
    """Outcome of one run; times are virtual seconds."""

    policy: str
    scenario: str
    seed: int
    time_to_target: float | None  # None: target never reached
    final_accuracy: float
    updates_per_s: float
    idle_fraction: float  # mean over workers of the share of alive time not computing
    max_staleness: int
    applied: int
    rejected: dict[str, int]
    trace: list[tuple[float, float]] = field(default_factory=list)  # (time, accuracy)
    events: int = 0
    link_bytes: dict[str, list[int]] = field(default_factory=dict)  # [up, down]
    state: str = "learning"  # edgeps.core.divergence: learning, diverging, backed off
    step_backoffs: int = 0  # times the step was cut for divergence
    # per board, means over boards, up to the target (to the end if unreached)
    bytes_up_per_board: float = 0.0
    bytes_down_per_board: float = 0.0
    joules_per_board: float = 0.0
    # --dp: {epsilon, delta, sigma, clip, steps, mode, budget} at the end
    privacy: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = "max_time"  # or "privacy_budget", "target_accuracy"

    def to_dict(self, *, with_trace: bool = True) -> dict[str, Any]:
        out = asdict(self)
        if not with_trace:
            out.pop("trace")
        return out
