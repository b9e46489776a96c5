"""The board trainer's codec seam on CPython: HELLO masks, encode_grad, F16/I8 PARAMS.

The firmware's own code (KernelTrainer, Worker, ParamsSink, wire) runs on
CPython here; the same modules run under MicroPython in test_codec.py.
"""

from __future__ import annotations

from array import array

import numpy as np
import pytest
from edgeps.kernels import get_backend
from edgeps_worker import codec
from edgeps_worker import wire_host as wire
from edgeps_worker.params_sink import ParamsSink
from edgeps_worker.ring import RingBuffer
from edgeps_worker.trainer import KernelTrainer
from edgeps_worker.worker import Worker

SPEC = "mlp:6-24-3"  # 243 params: several PARAMS chunks
MASK = (1 << 1) | (1 << 2) | (1 << 3)


def make_trainer(residual: str = "i8") -> KernelTrainer:
    rng = np.random.default_rng(5)
    ring = RingBuffer(32, 6, seed=5)
    for _ in range(32):
        x = rng.normal(size=6)
        ring.add(list(x), int(x[0] > 0) + int(x[1] > 0))
    t = KernelTrainer(SPEC, ring, batch=8, residual=residual)
    t.params[:] = array(
        "f", rng.normal(0, 0.3, t.n_params).astype(np.float32).tobytes()
    )
    return t


class HelloOnly:
    """A transport that records the worker's first HELLO, then drops the link."""

    def __init__(self, n_params: int) -> None:
        self.sent: list[wire.Message] = []
        self.connected = False
        model = wire.encode_model("job1", 1, "running", SPEC, 0, n_params)
        self.inbox = [(wire.topic_model("job1"), model)]

    def connect(self, will_topic, will_payload) -> None:
        self.connected = True

    def subscribe(self, topic, qos=1) -> None:
        pass

    def publish(self, topic, payload, qos=1, retain=False) -> None:
        if self.sent:
            raise OSError("link down")
        self.sent.append(wire.decode(payload))
        raise OSError("link down")

    def poll(self, timeout_ms):
        return self.inbox.pop(0) if self.inbox else None

    def close(self) -> None:
        self.connected = False


def test_board_worker_announces_the_trainers_codecs_in_hello():
    # Prepare
    t = make_trainer()
    link = HelloOnly(t.n_params)
    w = Worker(link, t, "job1", "w1", stop=lambda: bool(link.sent))
    # Execute
    w.run()
    # Assert: F32, F16 and I8 both ways
    hello = next(m for m in link.sent if m.type == wire.HELLO)
    assert (hello.dtypes, hello.codecs) == (MASK, MASK)


def params_chunks(t: KernelTrainer, code: int, data: bytes, max_chunk: int):
    return [
        wire.decode(c)
        for c in wire.iter_params("job1", "w1", 1, 2, 7, data, max_chunk, 3, code)
    ]


@pytest.mark.parametrize("code", [codec.F16, codec.I8])
def test_sink_decodes_f16_and_i8_params_into_the_trainer(code):
    # Prepare: the host's encoding of a vector, as PARAMS chunks
    t = make_trainer()
    ref = get_backend("c")
    p = np.random.default_rng(2).normal(0, 0.5, t.n_params).astype(np.float32)
    if code == codec.F16:
        data = ref.fp16_quantize(p, None).astype("<u2").tobytes()
        want = ref.fp16_dequantize(np.frombuffer(data, "<u2"))
    else:
        q, sc = ref.int8_quantize(p, 128, None)
        data = b"".join(sc[k : k + 1].tobytes() + q[k * 128 : (k + 1) * 128].tobytes()
                        for k in range(len(sc)))  # fmt: skip
        want = ref.int8_dequantize(q, sc, 128)
    chunks = params_chunks(t, code, data, 264)
    sink = ParamsSink(t.params_buffer(), 4 * t.n_params, t)
    # Execute: out of order, the first one delivered twice (QoS 1)
    results = [sink.add(m) for m in [chunks[-1], *chunks[:-1]]]
    again = sink.add(chunks[0])
    # Assert: complete once, holding exactly the host's decoding
    assert len(chunks) > 1 and results[:-1] == [None] * (len(chunks) - 1)
    assert results[-1] is True and again is None
    assert np.frombuffer(t.params, np.float32).tobytes() == want.tobytes()


def test_sink_refuses_a_bad_i8_chunk_and_keeps_the_release_open():
    # Prepare: block 1's scale is NaN
    t = make_trainer()
    before = bytes(t.params)
    q = np.ones(t.n_params, np.int8)
    data = bytearray(b"".join(np.float32(0.5).tobytes() + q[k * 128:(k + 1) * 128]
                              .tobytes() for k in range(2)))  # fmt: skip
    data[132:136] = np.float32(np.nan).tobytes()
    chunks = params_chunks(t, codec.I8, bytes(data), 300)
    sink = ParamsSink(t.params_buffer(), 4 * t.n_params, t)
    # Execute
    got = [sink.add(m) for m in chunks]
    # Assert: the bad chunk is refused and written nowhere; no release completes
    assert got == [None, "params_value"]
    assert bytes(t.params)[528:] == before[528:]


def test_sink_without_a_decoder_refuses_other_dtypes():
    t = make_trainer()
    data = bytes(2 * t.n_params)
    sink = ParamsSink(t.params_buffer(), 4 * t.n_params)
    assert sink.add(params_chunks(t, codec.F16, data, 256)[0]) == ("params_dtype")
    # a length that is not the code's encoded length is refused as before
    sink = ParamsSink(t.params_buffer(), 4 * t.n_params, t)
    short = params_chunks(t, codec.F16, data[:-2], 256)[0]
    assert sink.add(short) == "params_length"


@pytest.mark.parametrize("residual", ["i8", "f32"])
def test_encode_grad_after_a_step(residual):
    # Prepare
    t = make_trainer(residual)
    ref = get_backend("numpy")
    # Execute / Assert: F32 is the gradient itself; F16 and I8 the host's bytes
    loss, n, grad = t.step()
    g = np.frombuffer(grad, np.float32).copy()
    assert bytes(t.encode_grad(codec.F32, 0)) == g.tobytes()
    assert bytes(t.encode_grad(codec.F16, 0)) == ref.fp16_quantize(g, None).tobytes()
    t.step()
    g = np.frombuffer(t.grad, np.float32).copy()
    q, sc = ref.int8_quantize(g, 128, np.zeros_like(g))
    body = bytes(t.encode_grad(codec.I8, 0))
    assert len(body) == wire.encoded_len(codec.I8, t.n_params)
    assert body[4:132] == q[:128].tobytes() and body[:4] == sc[:1].tobytes()
    # NaN: refused for every code, before anything changes
    t.step()
    t.grad[7] = float("nan")
    held = b"".join(bytes(r) for r in t.codec.residual)
    for code in (codec.F32, codec.F16, codec.I8):
        with pytest.raises(ValueError):
            t.encode_grad(code, 0)
    assert b"".join(bytes(r) for r in t.codec.residual) == held


def test_write_params_f32_is_a_plain_copy_without_the_decoders():
    t = make_trainer()
    data = np.arange(4, dtype="<f4").tobytes()
    t.write_params(codec.F32, 8, memoryview(data))
    assert list(t.params[2:6]) == [0.0, 1.0, 2.0, 3.0]
    for offset in (2, 4 * t.n_params - 8, -4):  # off a record, past the end
        with pytest.raises(ValueError):
            t.write_params(codec.F32, offset, data)
