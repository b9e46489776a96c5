"""Which parameters a worker keeps at STOP done (``edgeps_worker.keep``), and the
model file it writes: pure logic on the real PARAMS sink, no broker."""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

import numpy as np
from edgeps.model import mpy_export
from edgeps_worker import keep
from edgeps_worker import wire_host as wire
from edgeps_worker.params_sink import ParamsSink

SPEC = "logistic:3"  # 4 parameters


class Trainer:
    model = SPEC

    def __init__(self) -> None:
        self.params = array("f", bytes(16))

    def params_buffer(self) -> array:
        return self.params


class Worker:
    """What keep reads of a Worker: its trainer, sink and the WELCOME's card."""

    def __init__(self) -> None:
        self.trainer = Trainer()
        self.sink = ParamsSink(self.trainer.params, 16, self.trainer)
        self.model_state = "running"


def release(w: Worker, version: int, values: list[float], chunks: int = 1) -> Any:
    body = np.array(values, "<f4").tobytes()
    result = None
    parts = wire.encode_params("j", "w", 1, 2, version, body, max_chunk=59)
    for chunk in parts[:chunks]:
        result = w.sink.add(wire.decode(chunk))
    return result


def test_the_last_complete_release_is_kept_untouched_or_not_at_all() -> None:
    # Prepare
    w = Worker()
    # Execute / Assert: none used yet
    assert keep.released(w) is None
    # a whole release: the parameter buffer holds it
    assert release(w, 5, [1.0, 2.0, 3.0, 4.0], chunks=4) is True
    assert list(keep.released(w)) == [1.0, 2.0, 3.0, 4.0]
    # a chunk of a later one landed in the buffer: nothing to keep
    release(w, 6, [9.0, 9.0, 9.0, 9.0], chunks=1)
    assert keep.released(w) is None


def test_with_local_rounds_the_rounds_anchor_is_kept() -> None:
    # Prepare: a release answering push 3, then a round moved the parameters
    w = Worker()
    w.local = (4, 0.0, 0.0, 0.1)  # type: ignore[attr-defined]
    body = np.array([1.0, 2.0, 3.0, 4.0], "<f4").tobytes()
    for chunk in wire.encode_params("j", "w", 1, 2, 5, body, seq=3):
        w.sink.add(wire.decode(chunk))
    w.trainer.anchor = array("f", [1.0, 2.0, 3.0, 4.0])  # type: ignore[attr-defined]
    w.trainer.params[0] = 7.0
    # Execute / Assert
    assert list(keep.released(w)) == [1.0, 2.0, 3.0, 4.0]
    # the job's final release (seq 0 after MODEL done) starts no round
    w.model_state = "done"
    release(w, 9, [5.0, 6.0, 7.0, 8.0], chunks=4)
    assert list(keep.released(w)) == [5.0, 6.0, 7.0, 8.0]


def test_the_file_written_is_the_exports_format(tmp_path: Path) -> None:
    # Prepare: a scaler as a WELCOME carries it (offsets, then inverse stds)
    path = tmp_path / "model.bin"
    scale = np.array([1, 2, 3, 0.5, 0.25, 2], "<f4").tobytes()
    params = array("f", [0.5, -1.0, 2.0, 0.1])
    # Execute: written twice (the second replaces the first)
    keep.save(str(path), SPEC, None, array("f", bytes(16)), None)
    keep.save(str(path), SPEC, b"no\nyes", params, scale)
    # Assert
    model = mpy_export.read(path)
    assert str(model.spec) == SPEC and model.card.classes == ("no", "yes")
    assert np.array_equal(model.params, np.array(params, np.float32))
    mean, inv = model.card.scaler.offset_scale()  # type: ignore[union-attr]
    assert np.allclose(mean, [1, 2, 3]) and np.allclose(inv, [0.5, 0.25, 2])
    assert not (tmp_path / "model.bin.new").exists()
