"""The simulator's shaped links: real message sizes, delivery = delay + bytes / rate."""

from __future__ import annotations

import json

import numpy as np
import pytest
from edgeps import cli
from edgeps.sim.links import EMULATED_CHUNK, SimLink, message_bytes
from edgeps.sim.simulator import simulate
from edgeps.workloads.scenarios import WorkerProfile

RATE = 250e3


def test_message_sizes_follow_the_model_and_the_chunking() -> None:
    # Prepare / Execute
    small = message_bytes("w00", 100, "logistic:2")
    big = message_bytes("w00", 10_000, "logistic:2")
    chunked = message_bytes("w00", 10_000, "logistic:2", max_chunk=4096)
    # Assert: 4 bytes per float32 plus headers, and every chunk has its own
    for sizes, n in ((small, 100), (big, 10_000)):
        assert 4 * n < sizes["update"] < 4 * n + 200
        assert 4 * n < sizes["params"] < 4 * n + 200
    grown = big["update"] - small["update"] - 4 * (10_000 - 100)
    assert 0 <= grown <= 2  # MQTT's remaining-length field may grow a byte or two
    n_chunks = -(-40_000 // (4096 - 100))
    assert chunked["update"] > big["update"] + (n_chunks - 2) * 40
    assert small["heartbeat"] < 100 and small["hello"] < 100
    assert EMULATED_CHUNK == 1 << 16


def test_a_message_arrives_after_delay_plus_its_bytes_over_the_rate() -> None:
    # Prepare
    profile = WorkerProfile(link_rate=RATE, link_delay=0.02)
    link = SimLink.build("w00", profile, 5_000, "linear:1", np.random.default_rng(0))
    nbytes = link.sizes["update"]
    # Execute
    first = link.arrival("up", "update", 10.0)
    second = link.arrival("up", "update", 10.0)  # queued behind the first
    down = link.arrival("down", "params", 10.0)  # the other direction is free
    # Assert
    one = (nbytes - 1448) * 8 / RATE  # the bucket's burst is one segment
    assert first == pytest.approx(10.0 + 0.02 + one)
    assert second == pytest.approx(first + nbytes * 8 / RATE)
    assert down < second


def test_shaped_links_slow_training_and_count_real_bytes() -> None:
    # Prepare
    base = {"policy": "asp", "scenario": "homogeneous", "n_workers": 4,
            "max_time": 10.0, "target_accuracy": 0.99}  # fmt: skip
    # Execute
    plain = simulate(**base)  # type: ignore[arg-type]
    slow = simulate(**base, link_rate=RATE, link_delay=0.02)  # type: ignore[arg-type]
    # Assert
    assert plain.link_bytes == {}
    assert set(slow.link_bytes) == {"w00", "w01", "w02", "w03"}
    assert slow.updates_per_s < 0.7 * plain.updates_per_s
    sizes = message_bytes("w00", 1, "x")  # header sizes only matter for the floor
    for up, down in slow.link_bytes.values():
        assert up * 8 / RATE <= 10.0 and down * 8 / RATE <= 10.0  # physical bound
        assert up > sizes["update"] and down > sizes["params"]
    total_up = sum(up for up, _ in slow.link_bytes.values())
    assert total_up >= slow.applied * 4 * 100  # every applied update crossed


def test_simulate_cli_takes_the_link_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["simulate", "--scenario", "homogeneous", "--workers", "2",
                     "--max-time", "3", "--link-rate", "250kbit", "--link-delay",
                     "20ms", "--link-loss", "1%", "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["link_rate"] == RATE
    assert out["config"]["link_loss"] == pytest.approx(0.01)
    assert set(out["link_bytes"]) == {"w00", "w01"}


def test_simulate_cli_refuses_a_bad_rate(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["simulate", "--link-rate", "quick"])
    assert exc.value.code == 2
    assert "bad rate" in capsys.readouterr().err
