"""The board trainer reads each minibatch a chunk of rows at a time: its gradient
and loss must be those of the whole batch drawn at once by an identical source."""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np
import pytest
from edgeps_worker import data, datafile
from edgeps_worker.kernels import Model
from edgeps_worker.ring import RingBuffer, SensorSource
from edgeps_worker.trainer import KernelTrainer

SPEC = "mlp:5-4-3"


def _rows(seed: int, n: int = 30) -> tuple[list[list[float]], list[int]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    return X.tolist(), [int(v) for v in rng.integers(0, 3, n)]


class ListSensor:
    """A sensor callback replaying fixed readings, then reporting none."""

    def __init__(self, X: list[list[float]], y: list[int]) -> None:
        self.X, self.y, self.i = X, y, 0

    def read(self, xbuf: array) -> int | None:
        if self.i >= len(self.X):
            return None
        for k, v in enumerate(self.X[self.i]):
            xbuf[k] = v
        self.i += 1
        return self.y[self.i - 1]


def make_source(kind: str, tmp_path: Path) -> object:
    X, y = _rows(4)
    if kind == "file":
        path = tmp_path / "d.bin"
        if not path.exists():
            datafile.write_file(str(path), X, y)
        return data.FileSource(str(path), seed=9)
    if kind == "ring":
        ring = RingBuffer(32, 5, seed=9)
        for xs, label in zip(X, y, strict=True):
            ring.add(xs, label)
        return ring
    src = SensorSource(ListSensor(X, y).read, 5, capacity=8, seed=9)
    src.per_batch = 3  # a few readings per batch: the ring holds 3, 6, then 8
    return src


@pytest.mark.parametrize("kind", ["file", "ring", "sensor"])
@pytest.mark.parametrize("batch", [1, 4, 10])
def test_chunked_batches_equal_the_whole_batch(kind: str, batch: int, tmp_path):
    # Prepare: the trainer, and a twin source for the whole-batch reference
    trainer = KernelTrainer(SPEC, make_source(kind, tmp_path), batch=batch)
    twin = make_source(kind, tmp_path)
    ref = Model(SPEC, batch)
    params = np.random.default_rng(2).normal(size=trainer.n_params) / 3
    for i, v in enumerate(params.tolist()):
        trainer.params_buffer()[i] = v
    X = array("f", bytes(4 * batch * 5))
    y = array("i", bytes(4 * batch))
    grad = array("f", bytes(4 * trainer.n_params))
    for _ in range(3):
        # Execute
        loss, n, got = trainer.step()
        want_n = twin.batch(X, y, batch)  # type: ignore[attr-defined]
        want = ref.loss_and_grad(trainer.params_buffer(), X, y, want_n, grad)
        # Assert: same rows, so the same numbers to the bit
        assert n == want_n
        assert loss == want
        assert list(got) == list(grad)
    # the chunk buffers hold at most 4 rows, whatever the batch
    assert len(trainer.X) == 5 * min(batch, 4)
