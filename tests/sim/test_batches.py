"""The simulator's boards draw the samples an emulated sensor's trainer draws.

Issue 11: with topk:0.01 the simulator reached the target in 4.0 s and the
real broker in 5.6 s because the two drew other minibatches from the same
shards; the crossing of the target moves with the batch order.
"""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.pyworker.batches import Shuffle
from edgeps.pyworker.localdata import LocalData, load_emulated
from edgeps.pyworker.trainer import NativeTrainer
from edgeps.sim.simulator import Simulator
from edgeps.sim.types import SimConfig


def test_shuffle_batches_straddle_epochs_and_cover_each_one() -> None:
    # Prepare
    s = Shuffle(10, seed=3)
    # Execute: 3 + 3 + 3 + 3 = 12 indices, the fourth batch crosses an epoch
    batches = [s.take(3).copy() for _ in range(4)]
    # Assert
    flat = np.concatenate(batches)
    assert sorted(flat[:10].tolist()) == list(range(10))
    assert s.epochs == 1
    again = Shuffle(10, seed=3)
    assert np.array_equal(again.take(12), flat)
    assert not np.array_equal(Shuffle(10, seed=4).take(12), flat)


@pytest.mark.parametrize("bad", [0, -1])
def test_shuffle_refuses_empty_batches_and_shards(bad: int) -> None:
    with pytest.raises(ValueError):
        Shuffle(bad, seed=0)
    with pytest.raises(ValueError):
        Shuffle(5, seed=0).take(bad)


def test_a_shuffle_fills_the_buffer_it_is_given() -> None:
    out = np.full(4, -1, dtype=np.intp)
    got = Shuffle(6, seed=1).take(4, out=out)
    assert got.base is out or got is out
    assert np.array_equal(out, Shuffle(6, seed=1).take(4))


def _sim(n_workers: int = 3, **options: object) -> Simulator:
    cfg = SimConfig(scenario="homogeneous", n_workers=n_workers, seed=2,
                    max_time=1.0, **options)  # type: ignore[arg-type]  # fmt: skip
    return Simulator(cfg)


def test_each_board_draws_what_the_emulated_sensor_trains_on() -> None:
    # Prepare: the trainer `edgeps emulate` builds for sensor i of n
    sim = _sim()
    n = len(sim.workers)
    for index, w in enumerate(sim.workers.values()):
        data, spec = load_emulated(f"sensors:{index}/{n}", 2, "iid")
        real = NativeTrainer(spec, data, batch=w.batch, seed=2 + index)
        # Execute: more batches than an epoch of the shard holds
        steps = 2 * len(w.y) // w.batch + 1
        for _ in range(steps):
            X, y = w.next_batch(w.batch)
            Xr, yr = real.next_batch()
            # Assert
            assert np.array_equal(X.astype(np.float32), Xr)
            assert np.array_equal(y, yr)


def test_a_rejoin_restarts_the_batch_order_and_the_residual() -> None:
    # Prepare: a run under topk leaves every board a residual
    sim = _sim(compress="topk:0.01")
    sim.run()
    w = next(iter(sim.workers.values()))
    assert w.encoder is not None and np.any(w.encoder.residual != 0)
    data = LocalData(w.X.astype(np.float32), w.y, "shard")
    fresh = NativeTrainer(str(sim.spec), data, batch=w.batch, seed=w.batch_seed)
    # Execute
    sim._rejoin(w)
    # Assert
    assert w.encoder is None
    X, y = w.next_batch(w.batch)
    Xr, yr = fresh.next_batch()
    assert np.array_equal(X.astype(np.float32), Xr) and np.array_equal(y, yr)
