"""The relay's upstream half: the "trainer" of the shared worker loop.

The shared firmware ``Worker`` (``edgeps_worker.worker``) joins the central
job with this object as its trainer, so the central host sees one ordinary
worker. The trainer interface is the usual one: ``n_params``, ``model``,
``params_buffer()`` (the central parameters land there, chunk by chunk),
``step()``, ``max_batch`` and ``set_batch``. ``step()`` hands the parameters
that just landed to the site (`Round.offer`, fanned out by the site
coordinator), waits for the site round to close and returns the folded
gradient: the sample-weighted mean of the boards' gradients, with their
total samples and mean loss. While it waits it sends the central host a
HEARTBEAT every ``heartbeat_s`` (``beat``), so a long site round does not
look like a dead worker.

A central job with local rounds calls ``local_round`` instead (the worker's
``local_round.round``): the same site round, whose boards train the local
rounds the site's WELCOMEs hand down (`local`, set on the first call, before
the site starts), returned as one delta of the boards' mean steps (`fold`).
``set_scale`` and ``set_classes`` keep the central job's card for the site's
WELCOMEs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from edgeps.relay.fold import Folded, Round


class RelayStopped(OSError):
    """The relay is stopping while its round holds no gradient.

    An ``OSError``, so the shared worker loop treats it as a lost link: it
    closes and, seeing its stop callback, ends without pushing anything.
    """


class RelayTrainer:
    """One upstream worker's trainer whose step is one site round."""

    max_batch = 0  # the site's boards choose their own batches

    def __init__(
        self,
        n_params: int,
        model: str,
        round_: Round,
        stop: Callable[[], bool],
        *,
        heartbeat_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if round_.n_params != n_params:
            raise ValueError("the round and the model disagree on n_params")
        self.n_params = int(n_params)
        self.model = str(model)
        self.round = round_
        self._stop = stop
        self.heartbeat_s = float(heartbeat_s)
        self._clock = clock
        self.beat: Callable[[], object] | None = None  # set once the worker exists
        self.params = np.zeros(self.n_params, dtype=np.float32)
        self.grad = np.zeros(self.n_params, dtype=np.float32)
        self.requested_batch = 0  # what the central balancer asked for (unused)
        self.last: Folded | None = None
        self.round_times: list[float] = []
        # the central WELCOME's local rounds (steps, epochs, seconds, lr), once
        # it asked for them, and its card: what the site's WELCOMEs carry
        self.local: tuple[int, float, float, float] | None = None
        self.scale: bytes | None = None
        self.classes: bytes | None = None

    def params_buffer(self) -> np.ndarray:
        return self.params

    def set_batch(self, n: int) -> None:
        """The central PS assigns a batch; a site's boards keep their own."""
        self.requested_batch = int(n)

    def set_scale(self, data: bytes | None) -> None:
        """The central job's scaler, handed to the site's boards unchanged."""
        if data is not None and len(data) % 8:
            raise ValueError("a scaler holds f32 offsets and inverse stds in pairs")
        self.scale = None if data is None else bytes(data)

    def set_classes(self, names: bytes | None) -> None:
        """The central job's class names, handed to the site's boards."""
        self.classes = None if names is None else bytes(names)

    def step(self) -> tuple[float, int, memoryview]:
        folded = self._round(1.0)
        return folded.loss, folded.samples, self.grad.data.cast("B")

    def local_round(
        self, h: int, epochs: float, seconds: float, lr: float
    ) -> tuple[float, int, int, memoryview]:
        """One site round of the boards' local rounds: (mean loss, samples,
        steps, the folded delta; or the folded gradient with steps 1 when
        every board pushed a gradient)."""
        self.local = (int(h), float(epochs), float(seconds), float(lr))
        folded = self._round(float(lr))
        return folded.loss, folded.samples, folded.steps, self.grad.data.cast("B")

    def _round(self, lr: float) -> Folded:
        t0 = self._clock()
        self.round.offer(self.params)
        folded = self.round.wait(
            self._stop,
            beat=self.beat,
            beat_every=self.heartbeat_s,
            clock=self._clock,
            lr=lr,
        )
        if folded is None:
            raise RelayStopped("relay stopping with an empty round")
        self.last = folded
        self.grad[:] = folded.grad
        dt = self._clock() - t0
        self.round_times.append(dt)
        if len(self.round_times) > 4096:
            del self.round_times[:2048]
        return folded
