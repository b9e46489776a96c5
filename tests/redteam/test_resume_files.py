"""Red team, `edgeps serve --resume` with hostile files: each one is refused with
exit 2 and one line naming the file and the fault, never a traceback, and a
decompression bomb is refused from its zip directory, before anything inflates.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.policy.asp import ASP
from edgeps.runtime.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from edgeps.runtime.config import merge
from edgeps.runtime.job import load_model

from tests.helpers.zip_bomb import write_npz_bomb
from tests.redteam._held import held, refused_cleanly, serve


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of the default job, as serve writes it."""
    cfg = merge({"max_time": 3.0})
    n = load_model(cfg).spec.n_params
    params = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    server = ParameterServer(params, policy=ASP(), optimizer=cfg.optimizer)
    stats = {"w00": {"accepted": 4, "rejected": {"stale": 1}, "max_staleness": 2}}
    ckpt = Checkpoint(
        params, 9, server.model.optimizer.state_dict(), stats, {"job": "lab"}
    )
    return save_checkpoint(tmp_path_factory.mktemp("good") / "good.npz", ckpt)


def arrays_of(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def test_the_good_checkpoint_passes_every_check(good: Path) -> None:
    done = serve("--max-time", "3", "--resume", str(good))

    # every check passed: what stops it is the closed broker port
    held("cannot reach the broker" in done.stderr, "good checkpoint", done.stderr)


@pytest.mark.parametrize("keep", [0.5, 10], ids=["half", "10-bytes"])
def test_resume_from_a_truncated_file(good: Path, tmp_path: Path, keep: float) -> None:
    data = good.read_bytes()
    path = tmp_path / "truncated.npz"
    path.write_bytes(data[: int(len(data) * keep) if keep < 1 else int(keep)])

    refused_cleanly(serve("--resume", str(path)), "resume: truncated file", path)


def test_resume_from_a_corrupted_file(good: Path, tmp_path: Path) -> None:
    data = bytearray(good.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 64):
        data[i] ^= 0xFF
    path = tmp_path / "corrupt.npz"
    path.write_bytes(bytes(data))

    refused_cleanly(serve("--resume", str(path)), "resume: corrupted file", path)


def test_resume_from_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.npz"
    path.write_bytes(b"")

    line = refused_cleanly(serve("--resume", str(path)), "resume: empty file", path)
    held("empty" in line, "resume: empty file says so", line)


def test_resume_from_a_header_without_optimizer_state(
    good: Path, tmp_path: Path
) -> None:
    arrays = arrays_of(good)
    header = json.loads(bytes(arrays["header"]).decode())
    header.pop("optimizer_state")
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    path = tmp_path / "noopt.npz"
    np.savez(path, **arrays)

    line = refused_cleanly(
        serve("--resume", str(path)), "resume: no optimizer_state", path
    )
    held("optimizer_state" in line, "resume: no optimizer_state is named", line)


def test_resume_from_a_decompression_bomb(good: Path, tmp_path: Path) -> None:
    # Prepare: 1.6 GB of float32 zeros declared and deflated into ~1.5 MB
    path = write_npz_bomb(tmp_path / "bomb.npz", 400_000_000, arrays_of(good)["header"])
    held(path.stat().st_size < 2_000_000, "bomb is small on disk", path.stat())

    # Execute
    line = refused_cleanly(serve("--resume", str(path)), "resume: zip bomb", path)

    # Assert: refused on the size the directory declares, before inflating
    held(
        "declares 1600000128 bytes uncompressed" in line,
        "resume: zip bomb refused from its directory",
        line,
    )


def test_resume_refuses_pickled_objects(good: Path, tmp_path: Path) -> None:
    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {tmp_path}/PWNED",))

    path = tmp_path / "objects.npz"
    params = np.array([Evil()], dtype=object)
    np.savez(path, params=params, header=arrays_of(good)["header"])

    line = refused_cleanly(serve("--resume", str(path)), "resume: pickle", path)
    held("pickle" in line, "resume: pickle refused", line)
    held(not (tmp_path / "PWNED").exists(), "resume: pickle never ran")


WRITER = """
import sys, numpy as np
from edgeps.runtime.checkpoint import Checkpoint, save_checkpoint
params = np.zeros(2_000_000, np.float32)
v = 0
while True:
    v += 1
    params[:] = v
    save_checkpoint(sys.argv[1], Checkpoint(params, v))
    if v == 1:
        print("ready", flush=True)  # one whole checkpoint is on disk
"""


def test_checkpoints_stay_whole_under_sigkill(tmp_path: Path) -> None:
    # Prepare: a process rewriting an 8 MB checkpoint as fast as it can
    path = tmp_path / "ck.npz"
    versions = []
    for delay in (0.15, 0.3, 0.45, 0.6):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            time.sleep(delay)
            # Execute: SIGKILL, mid-write as often as not
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        # Assert: the checkpoint at the path is whole
        ckpt = load_checkpoint(path, n_params=2_000_000)
        held(bool((ckpt.params == ckpt.version).all()), "SIGKILL: whole file")
        versions.append(ckpt.version)
    held(len(versions) == 4, "SIGKILL: a checkpoint survived each kill", versions)
