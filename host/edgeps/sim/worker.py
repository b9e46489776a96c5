"""One simulated board: its data shard, random streams and protocol state."""

from __future__ import annotations

import numpy as np

from edgeps.codecs import GradEncoder
from edgeps.pyworker.batches import Shuffle
from edgeps.sim.links import SimLink
from edgeps.workloads.scenarios import WorkerProfile


class SimWorker:
    """One simulated board: its data shard, random streams and protocol state."""

    def __init__(
        self,
        worker_id: str,
        profile: WorkerProfile,
        X: np.ndarray,
        y: np.ndarray,
        *,
        seed: int,
        index: int,
        batch: int,
    ) -> None:
        self.worker_id = worker_id
        self.profile = profile
        self.X, self.y = X, y
        # the stream an emulated sensor's EmulatedTrainer draws its times from
        self.compute_rng = np.random.default_rng([seed, index])
        self.link_rng = np.random.default_rng([seed, index, 2])
        self.dp_rng = np.random.default_rng([seed, index, 3])  # --dp local's noise
        # the minibatch order an emulated sensor's trainer draws (seed + index)
        self.batch_seed = seed + index
        self.shuffle = Shuffle(len(y), self.batch_seed)
        self.alive = True
        self.epoch = 0  # bumped on crash/rejoin; events of an old epoch are void
        self.incarnation = 0
        self.clock = 0
        self.seq = 0
        self.expected_release = 0  # releases are numbered so redeliveries are ignored
        self.waiting = True
        self.default_batch = batch
        self.batch = batch  # the PS may assign another with each release
        self.busy_time = 0.0
        self.alive_since: float | None = 0.0
        self.alive_time = 0.0
        self.link: SimLink | None = None  # a shaped link, else the delay model
        self.encoder: GradEncoder | None = None  # under --compress

    @property
    def cap(self) -> int:
        """The batch limit it announces: its memory's, or its shard's if smaller.

        A board never draws more rows than its shard holds, so a shard smaller
        than the batch is a limit like memory is (0: none).
        """
        limits = [m for m in (self.profile.max_batch, len(self.y)) if m > 0]
        low = min(limits) if limits else 0
        return low if low < self.default_batch or self.profile.max_batch else 0

    def next_batch(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The next minibatch of this worker's shard, as ``NativeTrainer`` draws it."""
        idx = self.shuffle.take(min(size, len(self.y)))
        return self.X[idx], self.y[idx]

    def new_process(self) -> None:
        """A rejoin is a new worker process: a fresh trainer and a zero residual."""
        self.shuffle = Shuffle(len(self.y), self.batch_seed)
        self.encoder = None
