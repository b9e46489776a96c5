"""The workers of `edgeps bench byzantine`: honest ones, and liars of each kind.

Each worker is the board's own ``Worker`` loop (``edgeps_worker.worker``)
over a ``MqttLink`` to the bench's mosquitto, in a thread, training a
``NativeTrainer`` on its label-skewed shard (Dirichlet 0.3) of the dataset.
A liar wraps that trainer and changes what it pushes (``LIES``); it offers
only F32 pushes, so what it changed is what goes on the wire.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

# what each kind of liar does to its push
LIES: dict[str, str] = {
    "flip10": "minus 10 x its honest update",
    "x1e3": "its update x 1e3",
    "x1e6": "its update x 1e6",
    "samples": "minus 3 x its update, claiming 2^32 - 1 samples",
    "steps65535": "its delta claiming 65,535 local steps",
    "steps0": "its delta claiming 0 local steps",
    "stepsneg": "its delta claiming -32,768 local steps (as i16)",
    "randlabels": "updates computed on random labels",
    "scaled": "updates computed on its features x 1000",
}
SCHEME = "dirichlet:0.3"


class LyingTrainer:
    """A trainer whose every push is changed by ``lie`` (one of ``LIES``)."""

    def __init__(self, inner: Any, lie: str) -> None:
        if lie not in LIES:
            raise ValueError(f"unknown lie {lie!r} (known: {', '.join(LIES)})")
        self.inner, self.lie = inner, lie
        self.n_params = inner.n_params
        self.model = inner.model
        self._out = np.zeros(inner.n_params, np.float32)

    def params_buffer(self) -> Any:
        return self.inner.params_buffer()

    def set_scale(self, data: bytes | None) -> None:
        self.inner.set_scale(data)

    def _change(self, update: Any, samples: int) -> tuple[memoryview, int]:
        out = self._out
        out[:] = np.frombuffer(bytes(update), "<f4")
        lie = self.lie
        if lie == "flip10":
            out *= -10.0
        elif lie == "x1e3":
            out *= 1e3
        elif lie == "x1e6":
            out *= 1e6
        elif lie == "samples":
            out *= -3.0
            samples = 2**32 - 1
        return out.data.cast("B"), samples

    def step(self) -> tuple[float, int, memoryview]:
        loss, samples, grad = self.inner.step()
        out, samples = self._change(grad, samples)
        return loss, samples, out

    def local_round(
        self, h: int, epochs: float, seconds: float, lr: float
    ) -> tuple[float, int, int, memoryview]:
        loss, samples, steps, delta = self.inner.local_round(h, epochs, seconds, lr)
        out, samples = self._change(delta, samples)
        claimed = {"steps65535": 65535, "steps0": 0, "stepsneg": 0x8000}
        return loss, samples, claimed.get(self.lie, steps), out


@dataclass
class Fleet:
    """The bench's worker threads; ``stop`` ends them all."""

    threads: list[threading.Thread]
    stop: threading.Event

    def end(self, timeout: float = 10.0) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout)


def shard(dataset: str, index: int, n: int, seed: int, lie: str | None) -> Any:
    """Worker ``index``'s shard of ``n`` and the model spec, a liar's data lie in."""
    from edgeps.pyworker.localdata import load_emulated

    data, spec = load_emulated(f"{dataset}:{index}/{n}", seed, SCHEME)
    if lie == "randlabels":
        rng = np.random.default_rng(seed * 131 + index)
        n_classes = int(np.max(data.y)) + 1
        y = rng.integers(0, max(2, n_classes), data.y.shape[0]).astype(data.y.dtype)
        data = replace(data, y=y)
    elif lie == "scaled":
        data = replace(data, X=np.ascontiguousarray(data.X * np.float32(1000.0)))
    return data, spec


def start_fleet(
    url: str, job: str, dataset: str, n: int, liars: dict[int, str], seed: int
) -> Fleet:
    """``n`` worker threads on ``url``; index -> lie for the liars (ids ``evilI``)."""
    from edgeps_worker.worker import Worker

    from edgeps.pyworker.trainer import NativeTrainer
    from edgeps.transport.options import ConnectionOptions
    from edgeps.transport.paho_link import MqttLink

    stop = threading.Event()
    threads = []
    for i in range(n):
        lie = liars.get(i)
        wid = f"evil{i}" if lie is not None else f"w{i}"
        data, spec = shard(dataset, i, n, seed, lie)
        trainer: Any = NativeTrainer(spec, data, 32, seed + i)
        if lie is not None and lie not in ("randlabels", "scaled"):
            trainer = LyingTrainer(trainer, lie)
        link = MqttLink(ConnectionOptions(broker=url), wid)
        worker = Worker(link, trainer, job, wid, stop=stop.is_set, log=lambda *a: None)
        t = threading.Thread(target=_run, args=(worker,), name=wid, daemon=True)
        threads.append(t)
    for t in threads:
        t.start()
    return Fleet(threads, stop)


def _run(worker: Any) -> None:
    # a worker's end is the bench's to report (serve's JSON), not to crash it
    with contextlib.suppress(Exception):
        worker.run()
