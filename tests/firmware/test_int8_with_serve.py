"""End to end: a MicroPython board trains with `edgeps serve --compress int8` next to
CPython workers, on a real mosquitto, until the host's target accuracy.

An int8 job refuses any UPDATE in another code (``codec``), so a board whose
pushes are all accepted encoded every one of them as I8 blocks with its
error feedback; the CPython workers encode theirs with the C kernels.
"""

from __future__ import annotations

import pytest

from tests.firmware.test_train_with_serve import board_stats, run_mixed_job

pytestmark = [pytest.mark.integration, pytest.mark.firmware]


@pytest.mark.parametrize("compress", ["int8", "f16"])
def test_board_trains_with_compressed_updates_next_to_cpython_workers(
    micropython, mosquitto, tmp_path, compress
):
    # Prepare / Execute: the board holds shard 0 of 4, two CPython workers
    # shards 1 and 2, all ready before the job starts; the norm bound on (it
    # clips, it never refuses: the board's honest gradients on its unseen
    # shard may be larger than the CPython workers' recent ones)
    code, text, summary, err = run_mixed_job(
        micropython, mosquitto, tmp_path, "cmp", "--policy", "asp", "--compress",
        compress,
    )  # fmt: skip
    # Assert: the target was reached with every worker's pushes accepted
    assert code == 0, text
    assert "stopped: done" in text, text
    stats = board_stats(text)
    assert stats["bad_grads"] == 0 and stats["rejects"] == 0, text
    assert summary["stop_reason"] == "target_accuracy", err
    assert summary["accuracy"] >= 0.9
    rows = summary["workers"]
    assert set(rows) == {"mpy-1", "py-1", "py-2"}, rows
    assert all(r["accepted"] > 0 and r["rejected"] == 0 for r in rows.values()), rows
    assert "codec" not in summary.get("dropped", {})
    print(f"\n{compress}: accuracy {summary['accuracy']:.3f}, board pushes "
          f"{stats['pushes']}, accepted {rows['mpy-1']['accepted']}")  # fmt: skip
