"""End to end: a MicroPython board trains H = 8 local steps per push next to
CPython workers, under `edgeps serve --local-steps 8`, on a real mosquitto.

The job's WELCOME carries the local rounds; every push is then the delta of
eight SGD steps (UPDATE steps 8), which the PS takes only because the job
asked for it (a delta to a job without local rounds is refused as
``steps``), and the federated average of those deltas reaches the target.
"""

from __future__ import annotations

import pytest

from tests.firmware.test_train_with_serve import board_stats, run_mixed_job

pytestmark = [pytest.mark.integration, pytest.mark.firmware, pytest.mark.slow]


@pytest.mark.parametrize("policy", ["fedavg", "fedbuff:k=2"])
def test_board_trains_local_rounds_next_to_cpython_workers(
    micropython, mosquitto, tmp_path, policy
):
    # Prepare / Execute: the board holds shard 0 of 4, two CPython workers
    # shards 1 and 2; fedavg's rounds wait only for workers that pushed, so
    # there the board starts the job and the CPython workers join after its
    # first push
    code, text, summary, err = run_mixed_job(
        micropython, mosquitto, tmp_path, "loc", "--policy", policy,
        "--local-steps", "8", board_first=policy == "fedavg",
    )  # fmt: skip
    # Assert: the board took the job's rounds, and every push was applied
    assert code == 0, text
    assert "local rounds: 8 steps" in text, text
    assert "stopped: done" in text, text
    stats = board_stats(text)
    assert stats["bad_grads"] == 0 and stats["rejects"] == 0, text
    assert summary["stop_reason"] == "target_accuracy", err
    assert summary["accuracy"] >= 0.9
    rows = summary["workers"]
    assert set(rows) == {"mpy-1", "py-1", "py-2"}, rows
    assert all(r["accepted"] > 0 and r["rejected"] == 0 for r in rows.values()), rows
    assert "steps" not in summary.get("dropped", {})
    print(f"\n{policy} H=8: accuracy {summary['accuracy']:.3f}, board pushes "
          f"{stats['pushes']}")  # fmt: skip
