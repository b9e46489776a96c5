"""Serve settings from defaults, a TOML file and flags (flags win), checked once.

The TOML keys are the flags' names without the leading dashes, spelled with
dashes as on the command line (``target-accuracy = 0.93``); an underscore
spelling is refused with the right name. Without ``target-accuracy`` and
``max-time`` a run stops after `DEFAULT_MAX_TIME` seconds.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, cast

from edgeps_worker import wire

from edgeps.codecs import parse_compress
from edgeps.core.defaults import JOB
from edgeps.core.privacy import check_dp
from edgeps.kernels import params_codec
from edgeps.observe.dashboard import check_options as check_dashboard
from edgeps.transport.options import ConnectionOptions

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI
    import tomli as tomllib

DEFAULT_MAX_TIME = 600.0  # seconds, when neither a target nor a time limit is set
# --scaler-from's value for a scaler from the workers' moments (runtime.scaler_gate)
SCALER_FROM_WORKERS = "workers"


@dataclass
class ServeConfig:
    """Everything `edgeps serve` (and the demo) needs to run one job."""

    broker: str = "auto"
    job: str = "default"
    policy: str = "dsp"
    model: str | None = None  # spec text; None = the dataset's default
    dataset: str = "sensors"
    test_data: str | None = None  # CSV/NPZ the job evaluates on (instead of dataset)
    label: str | None = None  # the label column's name in CSV files; None: the last
    window: int | None = None  # a raw-sample CSV cut into windows of this many
    stride: int | None = None  # samples, one starting every stride (default: window)
    group: str | None = None  # the recording/subject column windows stay within
    scaler_from: str | None = None  # CSV/NPZ whose features fix the scaler, or workers
    scaler_workers: int = 2  # --scaler-from workers: moments of this many workers
    scaler_wait: float = 30.0  # or this long after the first, with fewer
    scale: bool = True  # with --test-data: the job standardises features
    seed: int = 0
    lr: float = JOB.lr
    lr_workers: int = JOB.lr_workers  # past this many live workers: lr x R / N
    optimizer: str = JOB.optimizer
    # local rounds, carried to every worker in its WELCOME (core.defaults)
    local_steps: int = JOB.local_steps
    local_epochs: float = JOB.local_epochs
    local_time: float = JOB.local_time
    server_opt: str = JOB.server_opt  # how the PS applies deltas (FedOpt)
    server_lr: float = JOB.server_lr
    staleness_aware: bool = JOB.staleness_aware  # lr / (staleness + 1)
    balance: bool = False  # the PS assigns batches (host/README.md, "Work assignment")
    max_update_norm: float | None = None
    # refuse updates above k x the median norm of the last 64 applied; 0 = off
    norm_guard: float = JOB.norm_guard
    liveness_timeout: float = 10.0
    target_accuracy: float | None = None
    max_time: float | None = None
    eval_interval: float = JOB.eval_interval
    metrics_interval: float = 1.0
    checkpoint: str | None = None
    checkpoint_interval: float = 30.0
    resume: str | None = None
    metrics_out: str | None = None
    json: bool = False
    quiet: bool = False
    username: str | None = None
    password_file: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_insecure: bool = False
    keepalive: int = 20
    hmac_key_file: str | None = None
    log_level: str = "warning"
    max_chunk: int = 4096
    send_rejects: bool = True  # tell a worker why its push was dropped (REJECT)
    compress_down: str = "f32"  # PARAMS code: f32, f16 or int8
    shared_releases: bool = True  # one shared PARAMS per multi-worker release
    dashboard: str | None = None  # [HOST:]PORT of the live dashboard
    dashboard_token_file: str | None = None
    dashboard_linger: float = 0.0  # seconds the dashboard outlives the job
    compress: str = "f32"  # UPDATE code: f32, f16, int8 or topk:F (edgeps.codecs)
    # off loopback without --hmac-key-file (runtime.exposure); serve's LAN broker
    allow_unsigned: bool = False
    lan: bool = False  # start mosquitto for boards on a LAN (runtime.lan)
    listen: str | None = None  # HOST:PORT of that broker (implies lan)
    boards: str | None = None  # ids --lan lets in: their credentials and keys
    job_dir: str | None = None  # where the LAN broker's files go (edgeps-JOB)
    lan_tls: bool = (
        False  # TLS on the LAN listener: the job's own CA (security.tls_files)
    )
    lan_cert: str | None = None  # or a certificate made elsewhere (implies lan_tls)
    lan_key: str | None = None
    dp: str = JOB.dp  # differential privacy: off, central or local
    dp_clip: float = JOB.dp_clip  # C: each update clipped to this L2 norm
    dp_noise: float = JOB.dp_noise  # sigma: noise N(0, (sigma x C)^2)
    dp_delta: float = JOB.dp_delta  # epsilon is reported at this delta
    dp_epsilon_budget: float = JOB.dp_epsilon_budget  # stop there; 0 = no limit
    takeover: bool = False  # run even while another serve of this job is alive

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {}
for _f in fields(ServeConfig):
    _t = str(_f.type)
    if _t.startswith("bool"):
        _FIELD_TYPES[_f.name] = (bool,)
    elif _t.startswith("int"):
        _FIELD_TYPES[_f.name] = (int,)
    elif _t.startswith("float"):
        _FIELD_TYPES[_f.name] = (float, int)
    else:
        _FIELD_TYPES[_f.name] = (str,)
KEYS = tuple(k.replace("_", "-") for k in _FIELD_TYPES)


def _coerce(key: str, value: Any, source: str) -> Any:
    if value is None:
        return None
    allowed = _FIELD_TYPES[key]
    # bool is an int in Python; a TOML `lr = true` must not pass as 1
    if (isinstance(value, bool) and bool not in allowed) or not isinstance(
        value, allowed
    ):
        raise TypeError(
            f"{source}: {key.replace('_', '-')} must be {allowed[0].__name__}, "
            f"got {value!r}"
        )
    if allowed[0] is float:
        return float(cast(float, value))
    return value


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML config: keys are the flags' names (``max-time``); or a [serve] table.

    Returns the values under the settings' field names (``max_time``).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--config: no such file: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"--config {path}: not valid TOML: {exc}") from exc
    if isinstance(data.get("serve"), dict):
        data = data["serve"]
    out: dict[str, Any] = {}
    unknown = []
    for raw_key, value in data.items():
        key = raw_key.replace("-", "_")
        if "_" in raw_key or key not in _FIELD_TYPES:
            unknown.append(raw_key)
            continue
        out[key] = _coerce(key, value, f"--config {path}")
    if unknown:
        hints = [
            f"{k} -> {k.replace('_', '-')}"
            for k in unknown
            if k.replace("_", "-") in KEYS
        ]
        hint = f" (spell keys as the flags: {', '.join(hints)})" if hints else ""
        raise ValueError(
            f"--config {path}: unknown keys {sorted(unknown)}{hint}; "
            f"known: {', '.join(KEYS)}"
        )
    return out


def merge(
    flags: dict[str, Any],
    config_path: str | None = None,
    *,
    note: Callable[[str], None] | None = None,
) -> ServeConfig:
    """Defaults, then the TOML file, then the flags that were given; then checked.

    Without a target accuracy or a time limit anywhere, ``max_time`` becomes
    `DEFAULT_MAX_TIME`, and ``note`` (if given) is told so.
    """
    values: dict[str, Any] = {}
    if config_path is not None:
        values.update(load_toml(config_path))
    for key, value in flags.items():
        if key in _FIELD_TYPES:
            values[key] = _coerce(key, value, f"--{key.replace('_', '-')}")
    if values.get("target_accuracy") is None and values.get("max_time") is None:
        values["max_time"] = DEFAULT_MAX_TIME
        if note is not None:
            note(
                "no --target-accuracy or --max-time given: the run stops after "
                f"{DEFAULT_MAX_TIME:g} s (Ctrl-C ends it sooner, with a checkpoint)"
            )
    cfg = ServeConfig(**values)
    check(cfg)
    return cfg


SECONDS_MAX = 366 * 86400.0  # the longest duration any setting may ask for
SECONDS_MIN = 0.001
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class Range:
    """Where a numeric setting's values lie: [low, high], ``low`` excluded if
    ``open_low``; ``off`` is one more value that turns the setting off."""

    what: str
    low: float
    high: float
    open_low: bool = False
    off: float | None = None

    def __contains__(self, value: float) -> bool:
        if value == self.off:
            return True
        above = value > self.low if self.open_low else value >= self.low
        return above and value <= self.high

    def text(self) -> str:
        low, high = _num(self.low), _num(self.high)
        shown = f"{self.what} in {'(' if self.open_low else '['}{low}, {high}]"
        return shown if self.off is None else f"{_num(self.off)} (off) or {shown}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


_SECONDS = Range("a positive number of seconds", SECONDS_MIN, SECONDS_MAX)
RANGES: dict[str, Range] = {
    "lr": Range("a positive number", 0.0, 1e3, open_low=True),
    "max_update_norm": Range("a positive number", 0.0, FLOAT32_MAX, open_low=True),
    "norm_guard": Range("a number", 1.0, 1e6, open_low=True, off=0.0),
    "liveness_timeout": _SECONDS,
    "target_accuracy": Range("an accuracy", 0.0, 1.0, open_low=True),
    "max_time": _SECONDS,
    "eval_interval": _SECONDS,
    "metrics_interval": _SECONDS,
    "checkpoint_interval": _SECONDS,
    "dashboard_linger": Range("a number of seconds", 0.0, SECONDS_MAX),
    "seed": Range("an integer", 0, 2**32 - 1),  # scikit-learn's random_state
    "lr_workers": Range("a number of workers", 1, 1_000_000, off=0),
    "scaler_workers": Range("a number of workers", 1, 4096),  # scaler_gate.MAX_HELD
    "scaler_wait": _SECONDS,
    "window": Range("a number of samples", 1, 1_000_000),
    "stride": Range("a number of samples", 1, 1_000_000),
    "local_steps": Range("a number of steps", 1, 65535),  # UPDATE's two bytes
    "local_epochs": Range("a number of passes", 0.0, 1e4),
    "local_time": Range("a number of seconds", 0.0, SECONDS_MAX),
    "server_lr": Range("a positive number", 0.0, 1e3, open_low=True),
    "keepalive": Range("a number of seconds", 1, 65535),  # MQTT's two bytes
    "max_chunk": Range("a number of bytes", 256, wire.MAX_MESSAGE // 2),
    "dp_clip": Range("a positive number", 0.0, FLOAT32_MAX, open_low=True),
    "dp_noise": Range("a noise multiplier", 0.0, 1e6),
    "dp_delta": Range("a probability", 0.0, 0.5, open_low=True),
    "dp_epsilon_budget": Range("a positive number", 0.0, 1e6, open_low=True, off=0.0),
}
_NUMERIC = {k for k, t in _FIELD_TYPES.items() if t[0] in (int, float)}
assert set(RANGES) == _NUMERIC, sorted(_NUMERIC ^ set(RANGES))  # one range each


def check_ranges(cfg: ServeConfig) -> None:
    """Every number finite and in its range (`RANGES`); the error names the key."""
    for name, allowed in RANGES.items():
        value = getattr(cfg, name)
        if value is None:
            continue
        if not math.isfinite(value) or value not in allowed:
            raise ValueError(
                f"--{name.replace('_', '-')} must be {allowed.text()}, got {value!r}"
            )


def check(cfg: ServeConfig) -> None:
    """Value checks that need no imports of the heavy parts (those come at build)."""
    for name in sorted(
        set(RANGES)
        - {"max_update_norm", "target_accuracy", "max_time", "window", "stride"}
    ):
        if getattr(cfg, name) is None:
            raise ValueError(f"--{name.replace('_', '-')} needs a value")
    check_ranges(cfg)
    check_dashboard(cfg.dashboard, cfg.dashboard_token_file, cfg.dashboard_linger)
    parse_compress(cfg.compress)
    check_dp(cfg.dp, cfg.dp_clip, cfg.dp_noise)
    params_codec.parse_code(cfg.compress_down)
    if cfg.password_file is not None and cfg.username is None:
        raise ValueError("--password-file needs --username")
    ConnectionOptions(
        broker=cfg.broker,
        username=cfg.username,
        tls_ca=cfg.tls_ca,
        tls_cert=cfg.tls_cert,
        tls_key=cfg.tls_key,
        tls_insecure=cfg.tls_insecure,
        keepalive=cfg.keepalive,
    ).check()
    if cfg.log_level not in ("debug", "info", "warning", "error"):
        raise ValueError(
            f"--log-level must be debug, info, warning or error, got {cfg.log_level!r}"
        )
    if cfg.scaler_from != SCALER_FROM_WORKERS:
        for name in ("scaler_workers", "scaler_wait"):
            if getattr(cfg, name) != getattr(ServeConfig, name):
                raise ValueError(
                    f"--{name.replace('_', '-')} goes with --scaler-from workers"
                )
    if cfg.label is not None and cfg.test_data is None:
        raise ValueError("--label names a column of --test-data")
    if cfg.window is not None and cfg.test_data is None:
        raise ValueError("--window cuts the raw samples of --test-data")
    files = ("resume", "hmac_key_file", "password_file", "test_data", "scaler_from")
    for name in files:
        path = getattr(cfg, name)
        if name == "scaler_from" and path == SCALER_FROM_WORKERS:
            continue  # not a file: the workers' data (runtime.scaler_gate)
        if path is not None and not Path(path).is_file():
            raise FileNotFoundError(f"--{name.replace('_', '-')}: no such file: {path}")
    for name in ("checkpoint", "metrics_out"):
        path = getattr(cfg, name)
        if path is not None and not Path(path).resolve().parent.is_dir():
            raise FileNotFoundError(
                f"--{name.replace('_', '-')}: directory does not exist: "
                f"{Path(path).parent}"
            )
