"""`edgeps emulate --link-rate ...` against `edgeps serve`: trains over slow links."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.netem.links import is_shaped, link_shape, with_links
from edgeps.transport.options import ConnectionOptions
from edgeps.workloads.scenarios import WorkerProfile, make_scenario

RATE = 250e3


def test_link_flags_override_every_profile_and_shape_it() -> None:
    # Prepare
    profiles = make_scenario("stragglers", 4, 0).profiles
    # Execute
    shaped = with_links(profiles, rate=RATE, delay=0.02, loss=0.01)
    delay_only = with_links(profiles, delay=0.03)
    # Assert
    assert with_links(profiles) == profiles
    assert not any(is_shaped(p) for p in profiles.values())
    for p in shaped.values():
        shape = link_shape(p)
        assert (shape.rate, shape.delay, shape.loss) == (RATE, 0.02, 0.01)
    assert all(p.link_rate == 0.0 and p.link_delay == 0.03 for p in delay_only.values())
    factors = [p.straggler_factor for p in shaped.values()]
    assert factors == [p.straggler_factor for p in profiles.values()]


def test_the_slowlinks_scenario_sets_rates_per_worker() -> None:
    profiles = make_scenario("slowlinks", 8, 0).profiles
    rates = sorted(p.link_rate or 0 for p in profiles.values())
    assert rates == [64e3] * 2 + [250e3] * 6
    with pytest.raises(ValueError, match="link_rate"):
        WorkerProfile(link_rate=-1.0)


def test_shaping_a_tls_link_needs_insecure(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read before the check\n")
    opts = ConnectionOptions("mqtts://127.0.0.1:9", tls_ca=str(ca))
    with pytest.raises(ValueError, match="127.0.0.1"):
        Emulation(opts, "job1", n_workers=2, link_rate=RATE)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--link-rate", "fast", "bad rate"), ("--link-delay", "20min", "unknown unit"),
     ("--link-loss", "2", "[0, 1)")],
)  # fmt: skip
def test_cli_bad_link_flags_exit_2_and_say_why(
    flag: str, value: str, message: str
) -> None:
    cmd = [sys.executable, "-m", "edgeps", "emulate", "--broker",
           "mqtt://127.0.0.1:9", "--job", "job1", flag, value]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr


@pytest.mark.integration
def test_emulate_over_shaped_links_trains_and_counts_bytes_each_way(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare: a real serve and 3 sensors on 250 kbit/s, 20 ms, 1% loss links
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
         "--job", "slow", "--policy", "asp", "--target-accuracy", "0.9",
         "--max-time", "90", "--json", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # Execute
        emulate = subprocess.run(
            [sys.executable, "-m", "edgeps", "emulate", "--broker", mosquitto.url,
             "--job", "slow", "--workers", "3", "--max-time", "120", "--json",
             "--link-rate", "250kbit", "--link-delay", "20ms", "--link-loss",
             "0.01"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)
    # Assert
    assert serve.returncode == 0, err
    assert emulate.returncode == 0, emulate.stderr
    summary = json.loads(out)
    assert summary["stop_reason"] == "target_accuracy"
    report = json.loads(emulate.stdout)
    for w in report["workers"]:
        link = w["link"]
        assert w["stats"]["pushes"] > 0 and w["stop_reason"] == "done"
        assert link["bytes_up"] > 0 and link["bytes_down"] > 0
        # a physical bound: the link cannot carry more than rate x time
        busiest = max(link["bytes_up"], link["bytes_down"])
        assert busiest * 8 / RATE <= report["elapsed"] * 1.05
