"""The shared worker loop under `serve --compress`, against the real host PS in process.

The worker announces its trainer's codecs in HELLO, adopts the WELCOME's
codec and sends each push in it; a trainer without ``codecs`` is F32 only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from edgeps.codecs import I8, TOPK, decode_update
from edgeps.pyworker.localdata import load_emulated
from edgeps.pyworker.trainer import NativeTrainer
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps_worker import wire_host as wire
from edgeps_worker.worker import Worker

from tests.firmware.test_worker_loop import JOB, WID, InProcessPS

SPEC = "mlp:33-32-6"  # the built-in sensors data


class CompressedPS(InProcessPS):
    """InProcessPS whose coordinator runs a job with ``compress``."""

    def __init__(self, n_params: int, compress: str, spec: str = SPEC) -> None:
        super().__init__(n_params, spec)
        settings = Settings(job=JOB, model=spec, compress=compress)
        self.coord = Coordinator(self.server, self.down, settings, policy_name="asp")
        self.coord.publish_model("running")
        self.welcomes: list[wire.Message] = []

    def poll(self, timeout_ms: int) -> Any:
        item = super().poll(timeout_ms)
        if item is not None:
            msg = wire.decode(item[1])
            if msg.type == wire.WELCOME:
                self.welcomes.append(msg)
        return item


def trainer(seed: int = 0) -> NativeTrainer:
    data, spec = load_emulated("sensors:0/4", 0)
    return NativeTrainer(spec, data, batch=8, seed=seed)


class NanOnce:
    """A NativeTrainer whose second gradient holds a NaN (a diverging board)."""

    def __init__(self, inner: NativeTrainer) -> None:
        self.inner = inner
        self.n_params, self.model, self.codecs = inner.n_params, inner.model, 0b11110
        self.steps = 0

    def params_buffer(self) -> Any:
        return self.inner.params_buffer()

    def step(self) -> Any:
        out = self.inner.step()
        self.steps += 1
        if self.steps == 2:
            self.inner.grad[5] = np.nan
        return out

    def encode_grad(self, code: int, arg: int) -> Any:
        return self.inner.encode_grad(code, arg)


def test_int8_job_gets_int8_pushes_that_the_ps_applies() -> None:
    # Prepare
    t = trainer()
    ps = CompressedPS(t.n_params, "int8")
    w = Worker(ps, t, JOB, WID, max_iterations=5)

    # Execute
    reason = w.run()

    # Assert: every applied UPDATE is I8 of the encoded length; the worker kept
    # what it did not send as its residual
    assert reason == "iterations" and (w.codec, w.codec_arg) == (I8, 0)
    assert [u.dtype for u in ps.updates] == [I8] * 5
    assert all(u.total_len == wire.encoded_len(I8, t.n_params) for u in ps.updates)
    assert ps.coord.applied == 5 and 0 < float(np.abs(t.residual).max()) < 0.1


def test_topk_job_sends_k_records_named_by_the_welcome() -> None:
    # Prepare
    t = trainer()
    ps = CompressedPS(t.n_params, "topk:0.01")
    w = Worker(ps, t, JOB, WID, max_iterations=3)
    k = max(1, round(0.01 * t.n_params))

    # Execute
    w.run()

    # Assert
    assert [(m.codec, m.codec_arg) for m in ps.welcomes] == [(TOPK, k)]
    assert [u.total_len for u in ps.updates] == [8 * k] * 3
    sent = decode_update(TOPK, bytes(ps.updates[-1].data), t.n_params)
    assert np.count_nonzero(sent) == k


def test_a_nan_gradient_is_not_pushed_and_the_worker_goes_on() -> None:
    # Prepare
    t = NanOnce(trainer())
    ps = CompressedPS(t.n_params, "int8")
    w = Worker(ps, t, JOB, WID, max_iterations=3)

    # Execute
    reason = w.run()

    # Assert: step 2 was counted, never sent; its re-HELLO got a fresh release
    # at once (no release timeout), as a refused f32 push gets one
    assert reason == "iterations" and w.stats["bad_grads"] == 1
    assert [u.seq for u in ps.updates] == [1, 2, 3]
    assert w.stats["hellos"] == 2 and w.stats["timeouts"] == 0
    assert ps.server.stats()[WID].rejected == {}


def test_a_trainer_without_codecs_is_refused_by_an_int8_job() -> None:
    # Prepare: a trainer without `codecs` (F32 only): the board trainer with its
    # codec seam hidden (the board's own KernelTrainer makes F32, F16 and I8)
    from tests.firmware.test_worker_loop import SPEC as BOARD_SPEC
    from tests.firmware.test_worker_loop import make_trainer

    class F32Only:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.n_params = inner.n_params
            self.model = inner.model

        def params_buffer(self) -> Any:
            return self.inner.params_buffer()

        def step(self) -> Any:
            return self.inner.step()

    board = F32Only(make_trainer())
    ps = CompressedPS(board.n_params, "int8", BOARD_SPEC)
    w = Worker(ps, board, JOB, WID, max_iterations=3)

    # Execute
    reason = w.run()

    # Assert
    assert reason == "codec" and w.stats["pushes"] == 0
    assert ps.coord.rejected["codec_mismatch"] == 1
