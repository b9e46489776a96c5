"""Run-once and now-and-then board code off the heap: builder.ONCE names real
code, a built board has dropped it, connecting loads and unloads its modules."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from edgeps_worker import builder

from tests.conftest import run_micropython
from tests.helpers.fw_host import write_worker_config

SCRIPT = str(Path(__file__).parents[1] / "helpers" / "mpy" / "fw_shed.py")
CHECKS = ["builder_unloaded", "config_unloaded", "worker_init_shed",
          "client_init_shed", "trainer_init_shed", "sink_init_shed", "topics_shed",
          "step_kept", "join_apart", "connected", "open_unloaded", "link_unloaded",
          "reconnected", "left"]  # fmt: skip


def test_every_once_entry_names_code_of_a_board_module() -> None:
    # Prepare
    once = builder.ONCE
    entries = [once[i : i + 3] for i in range(0, len(once), 3)]

    # Assert: a renamed function would silently stay on the heap
    assert len(once) % 3 == 0 and len(entries) >= 15
    for mod, cls, name in entries:
        obj = importlib.import_module("edgeps_worker." + mod)
        if cls:
            obj = getattr(obj, cls)
        assert callable(getattr(obj, name)) or name in ("STAT_NAMES", "KINDS")


def test_shed_keeps_everything_on_cpython() -> None:
    # Execute
    builder.shed(("worker", "wire", "mqtt"))

    # Assert: CPython workers build many Workers in one process
    from edgeps_worker import wire, worker

    assert "__init__" in worker.Worker.__dict__ and hasattr(wire, "topic_up")


@pytest.mark.firmware
def test_built_board_keeps_only_what_it_runs(micropython, mosquitto, tmp_path):
    # Prepare: a worker config for the real broker, a tiny data file (no step runs)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, data=str(tmp_path / "d.bin"), verbose=False
    )
    from edgeps_worker import datafile

    datafile.write_file(str(tmp_path / "d.bin"), [[0.0] * 8] * 4, [0, 1, 2, 0])

    # Execute
    proc = run_micropython(micropython, SCRIPT, str(cfg), timeout=60)

    # Assert
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = dict(line.split() for line in proc.stdout.splitlines())
    assert got == dict.fromkeys(CHECKS, "yes"), proc.stdout
