"""Serve configuration: TOML file, flag overrides, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from edgeps.runtime.config import ServeConfig, load_toml, merge


def test_flags_override_config_file(tmp_path: Path) -> None:
    # Prepare
    conf = tmp_path / "job.toml"
    conf.write_text('policy = "ssp:3"\nlr = 0.05\ntarget-accuracy = 0.8\njob = "j1"\n')

    # Execute
    cfg = merge({"lr": 0.2, "max_time": 5.0}, str(conf))

    # Assert
    assert cfg.policy == "ssp:3"
    assert cfg.lr == 0.2
    assert cfg.target_accuracy == 0.8
    assert cfg.max_time == 5.0
    assert cfg.job == "j1"
    assert cfg.dataset == ServeConfig().dataset


def test_serve_table_is_accepted(tmp_path: Path) -> None:
    conf = tmp_path / "job.toml"
    conf.write_text('[serve]\npolicy = "bsp"\nlr = 1\n')

    values = load_toml(conf)

    assert values == {"policy": "bsp", "lr": 1.0}


@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        ("polcy = 'bsp'\n", ValueError, "unknown keys"),
        ("lr = 'fast'\n", TypeError, "lr must be float"),
        ("lr = true\n", TypeError, "lr must be float"),
        ("lr = [\n", ValueError, "not valid TOML"),
        ("lr = -1.0\n", ValueError, "--lr must be a positive"),
        ("target-accuracy = 1.5\n", ValueError, "target-accuracy"),
    ],
)
def test_bad_config_values_are_clear_errors(
    tmp_path: Path, text: str, error: type[Exception], match: str
) -> None:
    conf = tmp_path / "bad.toml"
    conf.write_text(text)

    with pytest.raises(error, match=match):
        merge({}, str(conf))


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="--config"):
        merge({}, str(tmp_path / "nope.toml"))
    with pytest.raises(FileNotFoundError, match="--resume"):
        merge({"resume": str(tmp_path / "nope.npz")})
    with pytest.raises(FileNotFoundError, match="--checkpoint"):
        merge({"checkpoint": str(tmp_path / "no" / "dir" / "c.npz")})


def test_flag_and_toml_can_turn_reject_messages_off(tmp_path: Path) -> None:
    conf = tmp_path / "quiet.toml"
    conf.write_text("send-rejects = false\n")

    from_file = merge({}, str(conf))
    from_flag = merge({"send_rejects": False})
    default = merge({})

    assert from_file.send_rejects is False and from_flag.send_rejects is False
    assert default.send_rejects is True


def test_staleness_aware_step_is_opt_in(tmp_path: Path) -> None:
    conf = tmp_path / "job.toml"
    conf.write_text("staleness-aware = true\n")
    assert merge({}).staleness_aware is False
    assert merge({"staleness_aware": True}).staleness_aware is True
    assert merge({}, str(conf)).staleness_aware is True


def test_norm_guard_is_on_by_default_and_set_by_flag_or_toml(tmp_path: Path) -> None:
    conf = tmp_path / "serve.toml"
    conf.write_text("norm-guard = 0\n")
    assert merge({}).norm_guard == 10.0
    assert merge({}, str(conf)).norm_guard == 0.0
    assert merge({"norm_guard": 4}, str(conf)).norm_guard == 4.0
    for bad in (1.0, 0.5, -2.0, float("inf")):
        with pytest.raises(ValueError, match="--norm-guard"):
            merge({"norm_guard": bad})
    conf.write_text("norm_guard = 3\n")
    with pytest.raises(ValueError, match="norm-guard"):
        merge({}, str(conf))
