"""The board worker under real MicroPython against a real mosquitto."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend
from edgeps_worker import data, datafile
from edgeps_worker import wire_host as wire

from tests.conftest import FIRMWARE, REPO
from tests.helpers.fw_host import (
    MiniPS,
    finish_worker,
    start_worker,
    write_worker_config,
)

pytestmark = [pytest.mark.integration, pytest.mark.firmware]
SPEC = "mlp:8-6-3"


def write_data(path, n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
    datafile.write_file(str(path), X.tolist(), y.tolist())


def expected_grads(path, seed, batch, n_steps, history, base_versions):
    """Replay the worker's batch draws on CPython; gradients via the numpy reference."""
    spec = ModelSpec.parse(SPEC)
    src = data.FileSource(str(path), seed)
    from array import array

    grads = []
    for step in range(n_steps):
        X = array("f", bytes(4 * batch * 8))
        y = array("i", bytes(4 * batch))
        src.batch(X, y, batch)
        Xn = np.frombuffer(X, dtype=np.float32).reshape(batch, 8).copy()
        yn = np.frombuffer(y, dtype=np.int32).copy()
        params = history[base_versions[step]]
        grads.append(get_backend("numpy").loss_and_grad(spec, params, Xn, yn)[1])
    src.close()
    return grads


def test_worker_joins_pulls_pushes_and_is_released(micropython, mosquitto, tmp_path):
    # Prepare
    write_data(tmp_path / "data.bin")
    cfg = write_worker_config(tmp_path, mosquitto.port)
    spec = ModelSpec.parse(SPEC)
    ps = MiniPS(mosquitto.port, "fwjob", SPEC, spec.init_params(1))
    ps.start()
    try:
        # Execute
        proc = start_worker(micropython, cfg, limit_ms=60000)
        report, out = finish_worker(proc, timeout=90)
        ps.wait_for(lambda p: p.byes, 5)
    finally:
        ps.stop()
    # Assert
    assert report["reason"] == "iterations", out
    assert report["stats"]["pushes"] == 4 and report["stats"]["releases"] == 4
    assert ps.hellos[0].model == SPEC
    assert ps.hellos[0].instance == report["instance"]
    assert {u.session for u in ps.updates} == {report["session"]}
    assert [u.seq for u in ps.updates] == [1, 2, 3, 4]
    assert [u.clock for u in ps.updates] == [1, 2, 3, 4]
    assert [u.base_version for u in ps.updates] == [0, 1, 2, 3]
    assert all(u.samples == 5 for u in ps.updates)
    want = expected_grads(tmp_path / "data.bin", 3, 5, 4, ps.history, [0, 1, 2, 3])
    for upd, ref in zip(ps.updates, want, strict=True):
        got = np.frombuffer(upd.data, dtype="<f4")
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    # it stops right after the 4th push, without waiting for that release
    assert report["version"] == 3
    assert ps.byes == ["bye"]


def test_worker_survives_a_broker_restart(micropython, mosquitto, tmp_path):
    # Prepare
    write_data(tmp_path / "data.bin")
    cfg = write_worker_config(tmp_path, mosquitto.port, max_iterations=8)
    spec = ModelSpec.parse(SPEC)
    ps = MiniPS(mosquitto.port, "fwjob", SPEC, spec.init_params(2))
    ps.hold_after = 3  # the worker waits at a barrier after its 3rd push
    ps.start()
    try:
        proc = start_worker(micropython, cfg, limit_ms=90000)
        assert ps.wait_for(lambda p: len(p.updates) >= 3, 60)
        # Execute
        mosquitto.restart()
        ps.hold_after = None
        report, out = finish_worker(proc, timeout=120)
    finally:
        ps.stop(done=False)
    # Assert: every clock arrived exactly once, from one process, in two sessions
    assert report["reason"] == "iterations", out
    assert report["stats"]["reconnects"] >= 1, out
    assert sorted(u.clock for u in ps.updates) == list(range(1, 9))
    assert {h.instance for h in ps.hellos} == {report["instance"]}
    assert len(ps.hellos) >= 2 and len({u.session for u in ps.updates}) == 2
    # HELLO first on the new link: the unreleased 3rd UPDATE was dropped, not
    # resent, so nothing reached the PS twice or in a dead session
    assert report["stats"]["dropped_updates"] >= 1
    assert ps.duplicates == 0 and ps.stale == 0


def run_main_py(exe, config, extra_path: str = ""):
    env = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:{extra_path}:.frozen")
    return subprocess.Popen(
        [exe, str(FIRMWARE / "main.py"), str(config)], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=env, cwd=FIRMWARE,
    )  # fmt: skip


def test_main_py_trains_from_a_sensor_module(micropython, mosquitto, tmp_path):
    # Prepare: the sensor source reads tests/helpers/mpy/fw_sensor.py's read()
    cfg = write_worker_config(
        tmp_path, mosquitto.port, data="", sensor="fw_sensor", max_iterations=3,
        model="logistic:8",
    )  # fmt: skip
    spec = ModelSpec.parse("logistic:8")
    ps = MiniPS(mosquitto.port, "fwjob", "logistic:8", spec.init_params(0))
    ps.start()
    try:
        # Execute
        proc = run_main_py(micropython, cfg, str(REPO / "tests" / "helpers" / "mpy"))
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
        ps.stop()
    # Assert
    assert proc.returncode == 0, out
    assert "stopped: iterations" in out
    assert [u.seq for u in ps.updates] == [1, 2, 3]
    # 5 readings taken at start-up, one more before each step
    assert [u.samples for u in ps.updates] == [5, 5, 5]


def test_main_py_exits_2_on_a_bad_config(micropython, tmp_path):
    cfg = tmp_path / "bad.json"
    cfg.write_text(json.dumps({"job": "j", "model": "mlp:3"}))
    proc = run_main_py(micropython, cfg)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "missing key 'worker_id'" in out and "model spec" in out


def test_worker_stops_when_the_job_is_done(micropython, mosquitto, tmp_path):
    # Prepare
    write_data(tmp_path / "data.bin")
    cfg = write_worker_config(tmp_path, mosquitto.port, max_iterations=0)
    spec = ModelSpec.parse(SPEC)
    ps = MiniPS(mosquitto.port, "fwjob", SPEC, spec.init_params(4))
    ps.hold_after = 2
    ps.start()
    try:
        proc = start_worker(micropython, cfg, limit_ms=60000)
        assert ps.wait_for(lambda p: len(p.updates) >= 2, 60)
        # Execute
        ps.stop(done=True)
        report, out = finish_worker(proc, timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Assert
    assert report["reason"] == "done", out
    assert report["stats"]["pushes"] == 2


def test_worker_with_an_hmac_key_signs_and_checks(micropython, mosquitto, tmp_path):
    # Prepare: the board holds its own key (derived from the master); a forged
    # PARAMS without a tag is injected
    from edgeps.security.keys import derive_worker_key

    key = derive_worker_key(b"master-key", "mpy-1")
    write_data(tmp_path / "data.bin")
    cfg = write_worker_config(
        tmp_path, mosquitto.port, max_iterations=3, hmac_key=key.hex()
    )
    spec = ModelSpec.parse(SPEC)
    ps = MiniPS(mosquitto.port, "fwjob", SPEC, spec.init_params(5), key=key)
    ps.inject = wire.encode_params("fwjob", "mpy-1", 1, 2, 0, bytes(4 * spec.n_params))
    ps.start()
    try:
        # Execute
        proc = start_worker(micropython, cfg, limit_ms=60000)
        report, out = finish_worker(proc, timeout=90)
    finally:
        ps.stop()
    # Assert: every worker message verified on the host side
    assert report["reason"] == "iterations", out
    assert [u.seq for u in ps.updates] == [1, 2, 3]
    assert ps.bad == 0 and all(u.tagged for u in ps.updates)
    assert report["stats"]["bad_messages"] == 1, out
    assert "dropped message: wire:hmac" in out
    assert report["version"] == 2


def test_worker_survives_a_host_restart(micropython, mosquitto, tmp_path):
    # Prepare: the first PS holds the worker after 2 pushes, then goes away
    write_data(tmp_path / "data.bin")
    cfg = write_worker_config(
        tmp_path, mosquitto.port, max_iterations=4, release_timeout_ms=1500
    )
    spec = ModelSpec.parse(SPEC)
    first = MiniPS(mosquitto.port, "fwjob", SPEC, spec.init_params(6))
    first.hold_after = 2
    first.start()
    proc = start_worker(micropython, cfg, limit_ms=60000)
    second = MiniPS(mosquitto.port, "fwjob", SPEC, spec.init_params(7))
    second.run = first.run + 1  # a new serve run
    try:
        assert first.wait_for(lambda p: len(p.updates) >= 2, 60)
        # Execute: a fresh PS (no memory of this worker) takes over
        first.stop(done=False)
        second.start()
        report, out = finish_worker(proc, timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
        second.stop()
    # Assert: the new run's MODEL made it say HELLO again; the new PS issued
    # a session and training went on in it (the unreleased push stayed with
    # the old run)
    assert report["reason"] == "iterations", out
    assert [u.seq for u in first.updates] == [1, 2]
    assert [(u.seq, u.clock) for u in second.updates] == [(1, 3), (2, 4)]
    assert len(second.hellos) >= 1 and report["stats"]["hellos"] >= 2
    assert report["stats"]["reconnects"] == 0
