"""On a real mosquitto: BSP with 8 workers, one shared PARAMS publish per round.

A separate MQTT client reads what the host publishes (shared topic, down
topics) and counts the PARAMS bytes per round, independently of the host's
own counters, which must agree with it.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.kernels import params_codec
from edgeps.kernels.spec import ModelSpec
from edgeps.runtime.config import merge
from edgeps.runtime.job import Job
from edgeps.runtime.summary import Summary
from edgeps.transport.broker import open_broker
from edgeps_worker import wire_host as wire
from paho.mqtt.enums import CallbackAPIVersion

pytestmark = pytest.mark.integration

TARGET = 0.9
WORKERS = 8


class Tap:
    """Reads the host's downlink on the broker and keeps every message decoded."""

    def __init__(self, host: str, port: int, job: str) -> None:
        self.lock = threading.Lock()
        self.msgs: list[tuple[str, int, Any]] = []
        self.model = ""
        self.subscribed = threading.Event()
        self.c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="tap-" + job)
        self.c.on_message = self._on_message
        self.c.on_subscribe = lambda *a: self.subscribed.set()
        self.c.connect(host, port)
        self.c.subscribe([(f"edgeps/{job}/params/#", 1), (f"edgeps/{job}/down/+", 1),
                          (f"edgeps/{job}/model", 1)])  # fmt: skip
        self.c.loop_start()

    def _on_message(self, client: Any, userdata: Any, m: Any) -> None:
        msg = wire.decode(m.payload)  # unkeyed: tags are skipped, not checked
        with self.lock:
            if msg.type == wire.MODEL:
                self.model = msg.model
            self.msgs.append((m.topic, len(m.payload), msg))

    def close(self) -> None:
        self.c.loop_stop()
        self.c.disconnect()


def run_bsp(url: str, job_id: str, compress_down: str) -> tuple[Summary, Tap]:
    host, port = url.removeprefix("mqtt://").split(":")
    tap = Tap(host, int(port), job_id)
    assert tap.subscribed.wait(10)
    cfg = merge({"broker": url, "job": job_id, "policy": "bsp", "seed": 1,
                 "target_accuracy": TARGET, "max_time": 60.0, "quiet": True,
                 "compress_down": compress_down})  # fmt: skip
    job = Job(cfg, broker=open_broker(url))
    result: dict[str, Summary] = {}
    thread = threading.Thread(target=lambda: result.update(s=job.run()))
    thread.start()
    assert job.ready.wait(20)
    emu = Emulation(url, job_id, seed=1, duration=90.0, n_workers=WORKERS).start()
    try:
        thread.join(90)
    finally:
        job.stop()
        thread.join(10)
        emu.stop()
        emu.join(20)
        tap.close()
    assert not thread.is_alive()
    return result["s"], tap


@pytest.mark.parametrize("compress_down", ["f32", "int8"])
def test_bsp_rounds_publish_the_parameters_once(mosquitto: Any, compress_down: str):
    # Execute
    summary, tap = run_bsp(mosquitto.url, "shared" + compress_down, compress_down)

    # Assert: the job reached its target
    assert summary.stop_reason == "target_accuracy"
    assert summary.accuracy is not None and summary.accuracy >= TARGET
    assert all(w["accepted"] > 0 for w in summary.workers.values())
    code = params_codec.parse_code(compress_down)
    n = ModelSpec.parse(tap.model).n_params
    shared_data: Counter[int] = Counter()
    shared_bytes: Counter[int] = Counter()
    chunks: defaultdict[int, list[int]] = defaultdict(list)
    releases: Counter[int] = Counter()
    own_bytes = 0
    for topic, size, msg in tap.msgs:
        if topic.endswith("/params/shared"):
            assert msg.dtype == code and msg.total_len == params_codec.encoded_len(
                code, n
            )
            shared_data[msg.version] += len(msg.data)
            shared_bytes[msg.version] += size
            chunks[msg.version].append(msg.chunk_index)
        elif msg.type == wire.RELEASE:
            releases[msg.version] += 1
        elif msg.type == wire.PARAMS:
            own_bytes += size
    # every round released all 8 workers with one copy of the vector, once
    assert len(shared_data) >= 3
    assert len(shared_data) == summary.releases["shared_rounds"]
    for version, data in shared_data.items():
        assert data == params_codec.encoded_len(code, n)
        assert sorted(chunks[version]) == list(range(len(chunks[version])))
        assert releases[version] == WORKERS
    # the host's counters are the bytes the broker received
    assert summary.releases["params_bytes"] == sum(shared_bytes.values()) + own_bytes
    per_round = sum(shared_bytes.values()) / len(shared_bytes)
    assert per_round < 1.1 * params_codec.encoded_len(code, n) + 200
