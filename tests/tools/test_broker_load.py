"""tools/broker_load.py on a real mosquitto: it sees drops where there are some."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOOL = REPO / "tools" / "broker_load.py"


def _load(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(TOOL), "--json", "--rounds", "1", "--period", "0",
         "--host-cost-us", "50", *args],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_tuned_broker_drops_nothing_at_its_design_load() -> None:
    r = _load("--connections", "40", "--burst", "16", "--config", "tuned")

    assert r["connected"] == 40
    assert r["sent"] == 40 * 16
    assert r["received_by_host"] == r["sent"]
    assert r["lost"] == 0 and r["drop_log_lines"] == 0


def test_a_burst_past_the_old_queue_limit_is_seen_dropped() -> None:
    # 30,000 messages at once against 10,000 queued + 100 in flight: 12,000
    # overflowed only when the box sent faster than the host drained
    r = _load(
        "--connections", "20", "--burst", "1500", "--config", "before",
        "--sensor-inflight", "0", "--host-cost-us", "300",
    )  # fmt: skip

    assert r["sent"] == 30000
    assert isinstance(r["lost"], int) and r["lost"] > 0
    assert r["sys_dropped"] == r["lost"]
    assert isinstance(r["drop_log_lines"], int) and r["drop_log_lines"] >= 1
