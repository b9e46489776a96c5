"""On a real mosquitto: one outsized gradient is clipped, and accuracy holds.

A client that never was a worker said HELLO and pushed one finite gradient
10^4 times the usual size: applied as it was, accuracy fell from 0.94 to
0.22. With the default norm bound (k = 10 over the last 64 applied norms) it
is applied scaled down to the bound, counted as clipped, never refused.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from edgeps.emulate.emulation import Emulation
from edgeps_worker import wire_host as wire

from tests.e2e.test_faults import finish, start_job, wait_for

pytestmark = pytest.mark.integration


class Intruder:
    """A plain paho client that joins as ``wid`` and pushes one chosen gradient."""

    def __init__(self, host: str, port: int, job: str, wid: str) -> None:
        self.job, self.wid = job, wid
        self.versions: list[int] = []
        self.lock = threading.Lock()
        self.session = 0  # issued by the PS's WELCOME
        subscribed = threading.Event()
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311
        )
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.connect(host, port)
        self.client.loop_start()
        self.client.subscribe(wire.topic_down(job, wid), qos=1)
        assert subscribed.wait(10)

    def _on_message(self, c: Any, u: Any, msg: Any) -> None:
        m = wire.decode(bytes(msg.payload))
        with self.lock:
            if m.type == wire.WELCOME:
                self.session = int(m.session)
            elif m.type == wire.PARAMS:
                self.versions.append(int(m.version))

    def released(self) -> int | None:
        with self.lock:
            return self.versions[-1] if self.versions else None

    def hello(self, model: str) -> None:
        payload = wire.encode_hello(self.job, self.wid, 7, 1, model=model)
        self.client.publish(wire.topic_up(self.job, self.wid), payload, qos=1)

    def push(self, base_version: int, update: np.ndarray) -> None:
        data = update.astype("<f4").tobytes()
        for chunk in wire.encode_update(
            self.job, self.wid, self.session, 1, 1, base_version, 0.01, 32, 0.5, data,
            max_chunk=1 << 16,
        ):  # fmt: skip
            self.client.publish(wire.topic_up(self.job, self.wid), chunk, qos=1)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def test_one_gradient_ten_thousand_times_the_usual_size_is_clipped(
    mosquitto: Any,
) -> None:
    # Prepare: four honest sensors train until the model is good
    job, host = start_job(mosquitto.url, "robust", "asp", None)
    coord = job.coordinator
    assert coord is not None
    guard = coord.server.model.norm_guard
    assert guard is not None and guard.k == 10.0  # on by default
    emu = Emulation(mosquitto.url, "robust", n_workers=4, duration=80.0).start()
    evil = Intruder(mosquitto.host, mosquitto.port, "robust", "evil")
    try:
        assert wait_for(
            lambda: coord.server.version >= 100 and (coord.accuracy or 0) >= 0.85, 60
        )
        usual = guard.median()
        assert usual is not None and usual > 0

        # Execute: join, then push a finite gradient 10^4 times the usual norm
        evil.hello(coord.settings.model)
        assert wait_for(lambda: evil.released() is not None, 10)
        base = evil.released()
        assert base is not None
        rng = np.random.default_rng(9)
        g = rng.standard_normal(coord.server.n_params).astype(np.float32)
        g *= np.float32(1e4 * usual / float(np.linalg.norm(g)))
        assert np.isfinite(g).all()
        evil.push(base, g)

        def handled() -> bool:
            st = coord.server.stats()["evil"]
            return st.accepted + sum(st.rejected.values()) >= 1

        assert wait_for(handled, 10)
        acc_at_once = coord.run_evaluation()
        version_after = coord.server.version
        assert wait_for(lambda: coord.server.version >= version_after + 20, 30)
        acc_later = coord.run_evaluation()
    finally:
        evil.close()
        emu.stop()
        emu.join(20)
        job.stop()
        summary = finish(job, host)

    # Assert: applied clipped to the bound (not refused), accuracy held
    assert summary.workers["evil"]["accepted"] == 1
    # bounded: by centered clipping (pulled in towards the fleet) before the
    # norm guard sees it, or by the norm guard
    evil_row = summary.workers["evil"]
    assert evil_row["clipped"] + evil_row["pulled_in"] == 1
    assert summary.workers["evil"]["rejected_by_reason"] == {}
    assert acc_at_once is not None and acc_at_once >= 0.85
    assert acc_later is not None and acc_later >= 0.85
    honest_norm = sum(
        w["rejected_by_reason"].get("norm", 0)
        for wid, w in summary.workers.items()
        if wid != "evil"
    )
    assert honest_norm == 0
