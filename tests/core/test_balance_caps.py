"""Work assignment: the batch limit each worker announces in HELLO (max_batch).

A worker whose local shard holds fewer rows than the batch, or whose memory
takes fewer, says so; the PS then asks it for no more, so a push of all it
takes weighs a full step instead of samples / 32.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from edgeps.kernels import ModelSpec
from edgeps.pyworker.localdata import LocalData
from edgeps.pyworker.trainer import EmulatedTrainer, NativeTrainer
from edgeps.workloads.scenarios import WorkerProfile
from edgeps_worker import datafile
from edgeps_worker import wire_host as wire
from edgeps_worker.ring import RingBuffer, SensorSource
from edgeps_worker.trainer import KernelTrainer
from paho.mqtt.enums import CallbackAPIVersion

from tests.helpers.fw_host import (
    MiniPS,
    finish_worker,
    start_worker,
    write_worker_config,
)


def _data(n: int, features: int = 5, classes: int = 3) -> LocalData:
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, features)).astype(np.float32)
    return LocalData(X, (np.arange(n) % classes).astype(np.int32), "test")


def test_the_cpython_trainer_announces_a_shard_smaller_than_its_batch() -> None:
    assert NativeTrainer("softmax:5x3", _data(10), batch=32).max_batch == 10
    assert NativeTrainer("softmax:5x3", _data(32), batch=32).max_batch == 0
    assert NativeTrainer("softmax:5x3", _data(200), batch=32).max_batch == 0


def test_the_emulated_trainer_announces_the_smaller_of_memory_and_shard() -> None:
    rng = np.random.default_rng(0)
    small = NativeTrainer("softmax:5x3", _data(10), batch=32)
    large = NativeTrainer("softmax:5x3", _data(200), batch=32)
    assert EmulatedTrainer(small, WorkerProfile(), rng).max_batch == 10
    assert EmulatedTrainer(small, WorkerProfile(max_batch=8), rng).max_batch == 8
    assert EmulatedTrainer(large, WorkerProfile(max_batch=16), rng).max_batch == 16
    assert EmulatedTrainer(large, WorkerProfile(), rng).max_batch == 0


def test_the_board_trainer_announces_its_batch_or_a_smaller_ring() -> None:
    def ring(capacity: int) -> RingBuffer:
        r = RingBuffer(capacity, 3, seed=0)
        for i in range(capacity):
            r.add([float(i), 1.0, -1.0], i % 2)
        return r

    # its scratch holds ``batch`` rows: it takes no more than that
    assert KernelTrainer("logistic:3", ring(64), batch=8).max_batch == 8
    # a ring of 4 never gives a batch of more than 4 rows
    assert KernelTrainer("logistic:3", ring(4), batch=8).max_batch == 4
    sensor = SensorSource(lambda x: None, 3, capacity=6)
    assert KernelTrainer("logistic:3", sensor, batch=16).max_batch == 6


@pytest.mark.integration
@pytest.mark.firmware
def test_the_board_announces_its_batch_in_hello_under_micropython(
    micropython, mosquitto, tmp_path
):
    # Prepare: a board training from an EPSD file at batch 5
    spec = "mlp:8-6-3"
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 8)).astype(np.float32)
    datafile.write_file(str(tmp_path / "data.bin"), X.tolist(), [0, 1, 2, 1] * 10)
    cfg = write_worker_config(tmp_path, mosquitto.port, max_iterations=2)
    ps = MiniPS(mosquitto.port, "fwjob", spec, ModelSpec.parse(spec).init_params(8))
    ps.start()
    try:
        # Execute
        proc = start_worker(micropython, cfg, limit_ms=60000)
        report, out = finish_worker(proc, timeout=90)
    finally:
        ps.stop()
    # Assert: HELLO says 5, and every push has the 5 samples it takes
    assert report["reason"] == "iterations", out
    assert ps.hellos and all(h.max_batch == 5 for h in ps.hellos), out
    assert ps.updates and all(u.samples == 5 for u in ps.updates)


class Sniffer:
    """Decodes every message of one worker on a real broker (both directions)."""

    def __init__(self, port: int, job: str, wid: str) -> None:
        self.messages: list[wire.Message] = []
        self.bad = 0
        self.lock = threading.Lock()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="sniffer")
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        for topic in (wire.topic_up(job, wid), wire.topic_down(job, wid)):
            self.client.subscribe(topic, qos=1)
        self.client.loop_start()

    def _on_message(self, client, userdata, msg) -> None:  # type: ignore[no-untyped-def]
        try:
            decoded = wire.decode(msg.payload)
        except wire.WireError:
            with self.lock:
                self.bad += 1  # a chunk the sniffer cannot read alone
            return
        with self.lock:
            self.messages.append(decoded)

    def of(self, kind: int) -> list[wire.Message]:
        with self.lock:
            return [m for m in self.messages if m.type == kind]

    def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@pytest.mark.integration
def test_a_cpython_worker_with_a_small_shard_is_asked_for_no_more(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare: `edgeps serve --balance` and one `edgeps worker` whose shard
    # (one 200th of the sensors set) holds 20 rows, batch 32
    sniff = Sniffer(mosquitto.port, "caps", "tiny")
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
         "--job", "caps", "--policy", "bsp", "--balance", "--max-time", "6",
         "--json", "--quiet", "--target-accuracy", "0.999"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "worker", "--broker", mosquitto.url,
         "--job", "caps", "--id", "tiny", "--emulated", "sensors:0/200"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # Execute
        _, err = serve.communicate(timeout=90)
        worker.wait(timeout=30)
    finally:
        for p in (serve, worker):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        sniff.stop()
    # Assert: it announced 20, every release asked at most 20, it pushed 20
    assert serve.returncode == 0, err
    hellos, updates = sniff.of(wire.HELLO), sniff.of(wire.UPDATE)
    assert hellos and all(h.max_batch == 20 for h in hellos)
    asked = [m.batch for m in sniff.of(wire.PARAMS) if m.batch]
    assert asked and max(asked) == 20
    assert len(updates) > 3 and all(u.samples == 20 for u in updates)
