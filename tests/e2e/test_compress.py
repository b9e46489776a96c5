"""`edgeps serve --compress` against a real mosquitto with emulated CPython sensors.

The in-process Job (what `edgeps serve` runs) and `Emulation` (what `edgeps
emulate` runs) share one fresh broker; the sensors announce every code they
make and encode each push in the code the WELCOME names.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.pyworker.localdata import load_emulated
from edgeps.pyworker.trainer import NativeTrainer
from edgeps.runtime.config import merge
from edgeps.runtime.job import Job
from edgeps.runtime.summary import Summary
from edgeps.transport.broker import open_broker
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink
from edgeps_worker.worker import Worker

pytestmark = pytest.mark.integration
JOB = "cmp"


class Serve:
    """`serve --compress CODE` in a thread, stopped and joined by `finish`."""

    def __init__(self, broker: Any, compress: str, **flags: Any) -> None:
        cfg: dict[str, Any] = {
            "broker": broker.url, "job": JOB, "policy": "dsp", "quiet": True,
            "compress": compress, "target_accuracy": 0.9, "max_time": 90.0,
            **flags,
        }  # fmt: skip
        self.job = Job(merge(cfg), broker=open_broker(broker.url))
        self.result: dict[str, Summary] = {}
        self.thread = threading.Thread(
            target=lambda: self.result.update(s=self.job.run())
        )
        self.thread.start()
        assert self.job.ready.wait(20)

    def finish(self, timeout: float = 100.0) -> Summary:
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.job.stop()
            self.thread.join(20)
        return self.result["s"]


class F32OnlyTrainer:
    """A trainer without ``codecs``: the worker announces F32 only (a plain board)."""

    def __init__(self, inner: NativeTrainer) -> None:
        self.inner = inner
        self.n_params = inner.n_params
        self.model = inner.model

    def params_buffer(self) -> Any:
        return self.inner.params_buffer()

    def step(self) -> Any:
        return self.inner.step()


@pytest.mark.parametrize("compress", ["int8", "topk:0.01"])
def test_emulated_sensors_reach_the_target_with_compressed_updates(
    mosquitto: Any, compress: str
) -> None:
    # Prepare
    serve = Serve(mosquitto, compress)
    emu = Emulation(mosquitto.url, JOB, n_workers=4, duration=90.0).start()

    # Execute
    summary = serve.finish()
    emu.stop()
    emu.join(20)

    # Assert: the target was reached, every sensor pushed, nothing was refused
    assert summary.stop_reason == "target_accuracy", summary
    assert summary.accuracy is not None and summary.accuracy >= 0.9
    rows = summary.workers
    assert len(rows) == 4 and all(r["accepted"] > 0 for r in rows.values())
    assert all(r["rejected"] == 0 for r in rows.values()), rows
    assert not {"codec", "bad_length", "bad_index"} & set(summary.dropped)


def test_a_worker_that_cannot_make_the_jobs_codec_is_refused_and_exits(
    mosquitto: Any,
) -> None:
    # Prepare: an int8 job; a worker whose trainer makes F32 only
    serve = Serve(mosquitto, "int8", max_time=30.0, target_accuracy=None)
    data, spec = load_emulated("sensors:0/4", 0)
    notes: list[str] = []
    worker = Worker(
        MqttLink(ConnectionOptions(mosquitto.url), "f32-only"),
        F32OnlyTrainer(NativeTrainer(spec, data, batch=8, seed=1)),
        JOB, "w9", release_timeout_ms=2000, poll_ms=50, log=notes.append,
    )  # fmt: skip

    # Execute
    reason = worker.run()
    serve.job.stop()
    summary = serve.finish()

    # Assert: STOP codec, a clear message, no push; the PS counted the refusal
    # (against an unknown sender: the worker never joined)
    assert reason == "codec" and worker.stats["pushes"] == 0
    assert any("stopped by the host: codec" in n for n in notes), notes
    assert "w9" not in summary.workers
    assert summary.unknown["rejected_by_reason"] == {"codec_mismatch": 1}
