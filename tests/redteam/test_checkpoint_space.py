"""A checkpoint the disk cannot take is said plainly, and serve exits non-zero.

Observed before: with the disk filling while serve checkpointed, 4 failures
were logged with full tracebacks, the final version was not saved, serve
exited 0 and the JSON summary said nothing; full from the start, there was no
checkpoint at all and still exit 0. The writes fail for real here: the child
process may write no file larger than ``RLIMIT_FSIZE`` (with SIGXFSZ ignored
a write past it fails with EFBIG, as a full disk fails with ENOSPC).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.runtime.checkpoint import load_checkpoint
from edgeps.runtime.checkpoint_log import CheckpointLog, checkpoint_line
from edgeps.runtime.summary import Summary, summary_table

from tests.redteam._held import held

LIMIT = 2048  # bytes: more than a tiny checkpoint, less than the default job's


def no_big_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.mark.integration
@pytest.mark.slow
def test_serve_that_cannot_save_any_checkpoint_says_so_and_exits_1(
    mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: every checkpoint is larger than this process may write
    ck = tmp_path / "ck.npz"
    cmd = [
        sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
        "--job", "lab", "--max-time", "3", "--checkpoint", str(ck),
        "--checkpoint-interval", "1", "--json", "--quiet",
    ]  # fmt: skip
    # Execute
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=90, preexec_fn=no_big_files
    )
    # Assert: exit 1, one line per failure, the summary says what was lost
    seen = f"rc {done.returncode}, stderr {done.stderr[-800:]!r}"
    failures = [ln for ln in done.stderr.splitlines() if "not saved to" in ln]
    held(done.returncode == 1, "final checkpoint lost: exit 1", seen)
    held("Traceback" not in done.stderr, "checkpoint failures: no traceback", seen)
    held(
        len(failures) >= 2 and all(str(ck) in ln for ln in failures),
        "one line per failed checkpoint, naming the file",
        seen,
    )
    summary = json.loads(done.stdout)["checkpoints"]
    held(
        summary["failed"] == len(failures)
        and summary["saved"] == 0
        and summary["final_saved"] is False
        and summary["last_saved_version"] is None
        and "too large" in summary["last_error"],
        "the JSON summary says the checkpoints failed",
        summary,
    )
    assert not ck.exists() and not list(tmp_path.glob("ck.npz.*"))


def test_a_checkpoint_that_does_not_fit_keeps_the_last_good_one(tmp_path: Path) -> None:
    # Prepare: a small checkpoint is on disk; the next one will not fit
    ck = tmp_path / "ck.npz"
    script = f"""
import numpy as np, sys
sys.path[:0] = {sys.path!r}
from edgeps.runtime.checkpoint import Checkpoint, save_checkpoint
from tests.redteam.test_checkpoint_space import no_big_files
save_checkpoint({str(ck)!r}, Checkpoint(np.ones(8, np.float32), 1))
no_big_files()
try:
    save_checkpoint({str(ck)!r}, Checkpoint(np.zeros(4096, np.float32), 2))
except OSError as exc:
    print(exc.strerror)
"""
    # Execute
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    # Assert: the write failed for real; the file on disk is still version 1
    assert done.returncode == 0, done.stderr
    assert "too large" in done.stdout
    kept = load_checkpoint(ck)
    held(
        kept.version == 1 and np.all(kept.params == 1),
        "a failed checkpoint keeps the last good file",
        kept.version,
    )
    assert [p.name for p in tmp_path.iterdir()] == ["ck.npz"]


def test_each_failure_is_one_line_naming_what_is_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Prepare
    book = CheckpointLog("/data/ck.npz")
    full = OSError(28, "No space left on device")
    # Execute: saved at v3, then the disk fills for v5 and the final v7
    with caplog.at_level("ERROR"):
        book.saved(3)
        book.failed(5, full)
        book.failed(7, full, final=True)
    # Assert
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "checkpoint v5 not saved to /data/ck.npz: No space left on device; "
        "/data/ck.npz still holds v3",
        "final checkpoint v7 not saved to /data/ck.npz: No space left on device; "
        "/data/ck.npz still holds v3",
    ]
    assert all(r.exc_info is None for r in caplog.records)
    report = book.report()
    assert report == {
        "path": "/data/ck.npz",
        "saved": 1,
        "failed": 2,
        "last_saved_version": 3,
        "final_saved": False,
        "last_error": "No space left on device",
    }
    assert checkpoint_line(report) == (
        "checkpoints: 2 of 3 failed (the final one too): No space left on device; "
        "the last saved is v3 in /data/ck.npz"
    )


def test_the_summary_table_and_exit_flag_follow_the_final_checkpoint() -> None:
    book = CheckpointLog("ck.npz")
    book.failed(2, OSError(28, "No space left on device"))
    book.saved(4, final=True)
    ok = Summary("asp", "max_time", 3.0, 4, None, 4, 1.0, 0, checkpoints=book.report())
    lost = Summary("asp", "max_time", 3.0, 4, None, 4, 1.0, 0,
                   checkpoints=CheckpointLog("ck.npz").report())  # fmt: skip
    assert not ok.checkpoint_lost and not lost.checkpoint_lost
    assert "checkpoints: 1 of 2 failed: No space" in summary_table(ok)
    book.failed(5, OSError(28, "No space left on device"), final=True)
    assert Summary("asp", "max_time", 3.0, 5, None, 5, 1.0, 0,
                   checkpoints=book.report()).checkpoint_lost  # fmt: skip


def test_a_run_without_checkpoints_reports_none() -> None:
    assert CheckpointLog(None).report() == {}
    assert checkpoint_line({}) == ""


@pytest.mark.integration
@pytest.mark.slow
def test_a_disk_that_fills_during_the_run_keeps_the_last_good_checkpoint(
    mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: a 256 KiB tmpfs for the checkpoint (mounting needs root)
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)],
        capture_output=True,
        timeout=30,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr!r}")
    ck = disk / "ck.npz"
    try:
        serve = subprocess.Popen(
            [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
             "--job", "lab", "--max-time", "6", "--checkpoint", str(ck),
             "--checkpoint-interval", "1", "--json", "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        # Execute: once the first checkpoint is on disk, the disk fills up
        deadline = time.monotonic() + 60
        while not ck.exists():
            assert time.monotonic() < deadline and serve.poll() is None
            time.sleep(0.05)
        with contextlib.suppress(OSError), (disk / "filler").open("wb") as f:
            f.write(b"\0" * (1 << 20))
        out, err = serve.communicate(timeout=90)
        kept = load_checkpoint(ck)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)
    # Assert: exit 1; one line per failure; the file is the last one saved
    summary = json.loads(out)["checkpoints"]
    failures = [ln for ln in err.splitlines() if "not saved to" in ln]
    held(serve.returncode == 1 and "Traceback" not in err,
         "disk full mid-run: exit 1, no traceback", err[-600:])  # fmt: skip
    held(
        summary["failed"] == len(failures) >= 2
        and summary["final_saved"] is False
        and summary["last_saved_version"] == kept.version
        and "No space left" in summary["last_error"],
        "the summary names the last version saved, which is the file's",
        (summary, kept.version),
    )
    assert all(f"still holds v{kept.version}" in ln for ln in failures), failures
