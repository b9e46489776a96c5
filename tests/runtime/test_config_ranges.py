"""Every numeric serve setting is finite and in its range; the error names the key."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from edgeps.runtime.config import RANGES, ServeConfig, merge

TYPES = {f.name: str(f.type).split(" ")[0] for f in fields(ServeConfig)}
FLOATS = sorted(k for k, t in TYPES.items() if t == "float")
INTS = sorted(k for k, t in TYPES.items() if t == "int")


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def test_every_numeric_field_has_a_range() -> None:
    assert set(FLOATS) | set(INTS) == set(RANGES)
    assert {"max_update_norm", "target_accuracy", "max_time"} <= set(FLOATS)


@pytest.mark.parametrize("key", FLOATS)
@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "-1.0", "1e308"])
def test_bad_floats_in_toml_are_clear_errors(
    tmp_path: Path, key: str, text: str
) -> None:
    conf = tmp_path / "serve.toml"
    conf.write_text(f"{key.replace('_', '-')} = {text}\n")

    with pytest.raises(ValueError, match=flag(key)) as info:
        merge({"max_time": 5.0} if key != "max_time" else {}, str(conf))

    assert "\n" not in str(info.value)


@pytest.mark.parametrize("key", FLOATS)
@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0, 1e308])
def test_bad_floats_from_flags_are_clear_errors(key: str, value: float) -> None:
    flags = {"max_time": 5.0, key: value}

    with pytest.raises(ValueError, match=flag(key)):
        merge(flags)


@pytest.mark.parametrize("key", INTS)
@pytest.mark.parametrize("value", [-1, 2**63 - 1, -(2**63)])
def test_bad_ints_are_clear_errors(tmp_path: Path, key: str, value: int) -> None:
    conf = tmp_path / "serve.toml"
    conf.write_text(f"{key.replace('_', '-')} = {value}\n")

    with pytest.raises(ValueError, match=flag(key)):
        merge({"max_time": 5.0}, str(conf))
    with pytest.raises(ValueError, match=flag(key)):
        merge({"max_time": 5.0, key: value})


@pytest.mark.parametrize("key", INTS)
def test_ints_refuse_floats(tmp_path: Path, key: str) -> None:
    conf = tmp_path / "serve.toml"
    conf.write_text(f"{key.replace('_', '-')} = inf\n")

    with pytest.raises(TypeError, match=key.replace("_", "-")):
        merge({"max_time": 5.0}, str(conf))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("dashboard_linger", 0.0),
        ("dashboard_linger", 3600.0),
        ("norm_guard", 0.0),
        ("norm_guard", 10.0),
        ("target_accuracy", 1.0),
        ("lr_workers", 0),
        ("seed", 2**32 - 1),
        ("max_chunk", 256),
        ("keepalive", 65535),
        ("max_time", 366 * 86400.0),
        ("metrics_interval", 0.5),
        ("max_update_norm", 1e30),
    ],
)
def test_values_at_the_edges_are_accepted(key: str, value: float) -> None:
    cfg = merge({"max_time": 5.0, key: value})

    assert getattr(cfg, key) == value


def test_the_error_says_the_range(tmp_path: Path) -> None:
    conf = tmp_path / "serve.toml"
    conf.write_text('dashboard = "127.0.0.1:9100"\ndashboard-linger = inf\n')

    with pytest.raises(ValueError) as info:
        merge({"max_time": 5.0}, str(conf))

    assert str(info.value) == (
        "--dashboard-linger must be a number of seconds in [0, 31622400], got inf"
    )
