"""Serve settings from defaults, a TOML file and flags (flags win), checked once."""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, cast

from edgeps.observe.dashboard import check_options as check_dashboard

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI
    import tomli as tomllib


@dataclass
class ServeConfig:
    """Everything `edgeps serve` (and the demo) needs to run one job."""

    broker: str = "auto"
    job: str = "default"
    policy: str = "dsp"
    model: str | None = None  # spec text; None = the dataset's default
    dataset: str = "sensors"
    seed: int = 0
    lr: float = 0.1
    optimizer: str = "sgd"
    # lr/(staleness+1) slowed DSP with stragglers ~3.5x to 0.93 accuracy: opt-in
    staleness_aware: bool = False
    max_update_norm: float | None = None
    liveness_timeout: float = 10.0
    target_accuracy: float | None = None
    max_time: float | None = None
    eval_interval: float = 0.5
    metrics_interval: float = 1.0
    checkpoint: str | None = None
    checkpoint_interval: float = 30.0
    resume: str | None = None
    metrics_out: str | None = None
    json: bool = False
    quiet: bool = False
    username: str | None = None
    password: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_insecure: bool = False
    hmac_key_file: str | None = None
    max_chunk: int = 4096
    send_rejects: bool = True  # tell a worker why its push was dropped (REJECT)
    dashboard: str | None = None  # [HOST:]PORT of the live dashboard
    dashboard_token_file: str | None = None
    dashboard_linger: float = 0.0  # seconds the dashboard outlives the job

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
KEYS = tuple(_FIELD_TYPES)


def _coerce(key: str, value: Any, source: str) -> Any:
    if value is None:
        return None
    allowed = _FIELD_TYPES[key]
    # bool is an int in Python; a TOML `lr = true` must not pass as 1
    if isinstance(value, bool) and bool not in allowed:
        raise TypeError(f"{source}: {key} must be {allowed[0].__name__}, got {value!r}")
    if not isinstance(value, allowed):
        raise TypeError(f"{source}: {key} must be {allowed[0].__name__}, got {value!r}")
    if allowed[0] is float:
        return float(cast(float, value))
    return value


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML config (keys as in `--help`, dashes or underscores; or [serve])."""
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
        if key not in _FIELD_TYPES:
            unknown.append(raw_key)
            continue
        out[key] = _coerce(key, value, f"--config {path}")
    if unknown:
        raise ValueError(
            f"--config {path}: unknown keys {sorted(unknown)}; known: {', '.join(KEYS)}"
        )
    return out


def merge(flags: dict[str, Any], config_path: str | None = None) -> ServeConfig:
    """Defaults, then the TOML file, then the flags that were given; then checked."""
    values: dict[str, Any] = {}
    if config_path is not None:
        values.update(load_toml(config_path))
    for key, value in flags.items():
        if key in _FIELD_TYPES:
            values[key] = _coerce(key, value, f"--{key.replace('_', '-')}")
    cfg = ServeConfig(**values)
    check(cfg)
    return cfg


def _positive(name: str, value: float | None, *, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if value is None or not math.isfinite(value) or value <= 0:
        raise ValueError(f"--{name} must be a positive number, got {value!r}")


def check(cfg: ServeConfig) -> None:
    """Value checks that need no imports of the heavy parts (those come at build)."""
    _positive("lr", cfg.lr, allow_none=False)
    _positive("max-time", cfg.max_time)
    _positive("liveness-timeout", cfg.liveness_timeout, allow_none=False)
    _positive("eval-interval", cfg.eval_interval, allow_none=False)
    _positive("metrics-interval", cfg.metrics_interval, allow_none=False)
    _positive("checkpoint-interval", cfg.checkpoint_interval, allow_none=False)
    _positive("max-update-norm", cfg.max_update_norm)
    if cfg.target_accuracy is not None and not 0.0 < cfg.target_accuracy <= 1.0:
        raise ValueError(
            f"--target-accuracy must be in (0, 1], got {cfg.target_accuracy!r}"
        )
    check_dashboard(cfg.dashboard, cfg.dashboard_token_file, cfg.dashboard_linger)
    if cfg.max_chunk < 256:
        raise ValueError(f"--max-chunk must be at least 256 bytes, got {cfg.max_chunk}")
    for name in ("resume", "hmac_key_file"):
        path = getattr(cfg, name)
        if path is not None and not Path(path).is_file():
            raise FileNotFoundError(f"--{name.replace('_', '-')}: no such file: {path}")
    for name in ("checkpoint", "metrics_out"):
        path = getattr(cfg, name)
        if path is not None and not Path(path).resolve().parent.is_dir():
            raise FileNotFoundError(
                f"--{name.replace('_', '-')}: directory does not exist: "
                f"{Path(path).parent}"
            )
