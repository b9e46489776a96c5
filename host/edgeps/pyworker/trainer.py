"""The CPython trainers: gradients of a ModelSpec on local data via ``edgeps.kernels``.

It is the object the shared worker loop calls to compute: the loop copies
each PARAMS body into ``params_buffer()``, then ``step()`` draws the next
minibatch from a seeded shuffle (``edgeps.pyworker.batches``, the order the
simulator's boards draw too) and returns the loss and the gradient in a
preallocated buffer (the C backend when it is built, numpy otherwise).
``encode_grad(code, arg)`` then gives that gradient in the job's UPDATE code
(``edgeps.codecs``: F16/I8 through the same kernels, TOPK by argpartition),
with the error-feedback residual kept here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from edgeps import kernels
from edgeps.codecs import ALL_CODECS, GradEncoder
from edgeps.kernels import ModelSpec, params_codec
from edgeps.pyworker import local_round
from edgeps.pyworker.batches import Shuffle
from edgeps.pyworker.local_dp import LocalDP
from edgeps.pyworker.localdata import LocalData
from edgeps.workloads.scenarios import BASE_BATCH


def check_labels(spec: ModelSpec, y: np.ndarray, source: str = "data") -> np.ndarray:
    """Return labels in the dtype the model's loss wants, or raise ValueError."""
    if spec.kind == "linear":
        return np.ascontiguousarray(y, dtype=np.float32)
    if y.dtype.kind not in "iu":
        raise ValueError(f"{source}: a {spec.kind} model needs whole-number labels")
    n_classes = 2 if spec.kind == "logistic" else int(spec.n_classes)
    lo, hi = int(y.min()), int(y.max())
    if lo < 0 or hi >= n_classes:
        raise ValueError(
            f"{source}: labels span {lo}..{hi} but model {spec} has classes "
            f"0..{n_classes - 1}"
        )
    return np.ascontiguousarray(y, dtype=np.int32)


# PARAMS codes the CPython trainers decode (bit 1 << code): F32, F16, I8
READS = (1 << 1) | (1 << 2) | (1 << 3)


class NativeTrainer:
    """Minibatch gradients on a local dataset, with buffers allocated once.

    Parameters
    ----------
    spec: the job's model (a ModelSpec or its text form, e.g. "softmax:64x10").
    data: local samples; their feature count must match the model.
    batch: minibatch size (capped at the number of samples).
    seed: seeds the shuffle, so two runs draw the same batches.
    local_dp: clips and noises each gradient before it is sent
        (``edgeps.pyworker.local_dp``); None: the gradient as computed.
    """

    codecs = ALL_CODECS  # UPDATE codes encode_grad produces (HELLO codecs)

    def __init__(
        self,
        spec: ModelSpec | str,
        data: LocalData,
        batch: int = 32,
        seed: int = 0,
        local_dp: LocalDP | None = None,
    ) -> None:
        if isinstance(spec, str):
            spec = ModelSpec.parse(spec)
        if not isinstance(spec, ModelSpec):
            raise TypeError("spec must be a ModelSpec or its text form")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive integer, got {batch!r}")
        if data.n_features != spec.n_features:
            raise ValueError(
                f"{data.source} has {data.n_features} features but model {spec} "
                f"expects {spec.n_features}"
            )
        self.spec = spec
        self.X = data.X
        # what the job's scaler applies to, and what this worker chose itself
        self._X_own = data.X
        self._X_raw = data.X if data.raw_X is None else data.raw_X
        self._source = data.source
        self._raw_said = False  # "features look unscaled", said once
        self.classes = data.classes  # names of the local label ids, if text
        self.y = check_labels(spec, data.y, data.source)
        self.n_params = int(spec.n_params)
        self.batch = 0
        self._shuffle = Shuffle(data.n_samples, seed)
        self.params = np.zeros(self.n_params, dtype=np.float32)
        self.grad = np.zeros(self.n_params, dtype=np.float32)
        self.set_batch(batch)
        # a shard smaller than the batch is a limit as memory is: announced in
        # HELLO, the PS asks for no more, so its pushes are not under-weighted
        self.max_batch = data.n_samples if data.n_samples < batch else 0
        self.steps = 0
        self.reads = READS
        self._encoder = GradEncoder(self.n_params)
        self.local_dp = local_dp

    @property
    def model(self) -> str:
        return str(self.spec)

    def set_batch(self, batch: int) -> None:
        """Take ``batch`` samples per step from now on (capped at the local
        samples): the size a release asks for under ``--balance``."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive integer, got {batch!r}")
        # the batch asked for: an emulated step lasts as long as one of that
        # size on the board, as in the simulator, whatever the local samples
        self.asked_batch = batch
        size = min(batch, self.X.shape[0])
        if size == self.batch:
            return
        self.batch = size
        self.Xb = np.empty((size, self.spec.n_features), dtype=np.float32)
        self.yb = np.empty(size, dtype=self.y.dtype)
        self._idx = np.empty(size, dtype=np.intp)

    def params_buffer(self) -> np.ndarray:
        """The writable float32 buffer a PARAMS body is copied into (same each call)."""
        return self.params

    def set_params(self, data: bytes | bytearray | memoryview) -> None:
        """Copy little-endian float32 parameters in; wrong length is a ValueError."""
        view = memoryview(data).cast("B")
        if view.nbytes != self.params.nbytes:
            raise ValueError(
                f"parameters are {view.nbytes} bytes, model {self.spec} needs "
                f"{self.params.nbytes}"
            )
        self.params[:] = np.frombuffer(view, dtype="<f4")

    def write_params(self, code: int, offset: int, data: Any) -> None:
        """Decode one PARAMS chunk (encoded byte ``offset``) into the parameters.

        F32 is a plain copy; F16 and I8 are decoded by ``params_codec``. A chunk
        that does not fit, or holds NaN/Inf, is a ValueError and writes nothing.
        """
        params_codec.decode_into(self.params, code, offset, data)

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """Fill the batch buffers with the next samples of the seeded shuffle."""
        self._shuffle.take(self.batch, out=self._idx)
        np.take(self.X, self._idx, axis=0, out=self.Xb)
        np.take(self.y, self._idx, axis=0, out=self.yb)
        return self.Xb, self.yb

    @property
    def epochs(self) -> int:
        """Complete passes over the local samples so far."""
        return self._shuffle.epochs

    def step(self) -> tuple[float, int, memoryview]:
        """Gradient of the mean loss on the next batch: (loss, samples, grad bytes)."""
        Xb, yb = self.next_batch()
        loss, g = kernels.loss_and_grad(
            self.spec, self.params, Xb, yb, grad_out=self.grad
        )
        if g is not self.grad:
            self.grad[:] = g
        if self.local_dp is not None:  # before encode_grad or the bytes see it
            self.local_dp.apply(self.grad)
        self.steps += 1
        return float(loss), self.batch, self.grad.data.cast("B")

    def local_round(
        self, h: int, epochs: float, seconds: float, lr: float
    ) -> tuple[float, int, int, memoryview]:
        """H local SGD steps (or epochs, or seconds of them): (mean loss,
        samples, steps, delta); `edgeps.pyworker.local_round.run`."""
        return local_round.run(self, h, epochs, seconds, lr)

    def set_scale(self, data: bytes | None) -> None:
        """The job's scaler from its WELCOME (f32 offsets then inverse stds),
        applied to the raw features; None: the features as this worker chose."""
        self.X = self._X_own if data is None else local_round.scaled(self._X_raw, data)
        if data is None and self.X is self._X_raw and not self._raw_said:
            from edgeps.pyworker.scaling import warn_if_raw

            self._raw_said = warn_if_raw(self._source, self.X)

    def set_classes(self, names: bytes | None) -> None:
        """The job's class names (WELCOME): text labels read here are renumbered
        to the job's ids; ValueError when a local label is not one of them."""
        if names is None or self.classes is None:
            return
        job = bytes(names).decode().split("\n")
        if list(job) == list(self.classes):
            return
        missing = [c for c in self.classes if c not in job]
        if missing:
            raise ValueError(
                f"labels {', '.join(missing)} are not among the job's classes "
                f"{', '.join(job)}"
            )
        remap = np.array([job.index(c) for c in self.classes], dtype=self.y.dtype)
        self.y = remap[self.y]
        self.classes = tuple(job)

    def moments(self) -> tuple[int, list[float], list[float]] | None:
        """(rows, means, variances) of the raw local features, sent in HELLO."""
        return local_round.moments(self._X_raw)

    def gradient(self) -> np.ndarray:
        """The last gradient as a float32 array (shares the buffer)."""
        return self.grad

    def encode_grad(self, code: int, arg: int = 0) -> memoryview:
        """The last gradient as an UPDATE body in ``code`` (error feedback for
        F16, I8 and TOPK); ValueError on NaN/Inf, before the residual moves."""
        return self._encoder.encode(self.grad, code, arg)

    @property
    def residual(self) -> np.ndarray:
        """What error feedback still owes the PS (added to the next gradient)."""
        return self._encoder.residual


class EmulatedTrainer:
    """Wrap a trainer so each step lasts as long as an emulated board's would.

    ``profile.sample_compute(rng, batch)`` (an ``edgeps.workloads.scenarios.
    WorkerProfile``) draws the iteration time at the batch the inner trainer
    was asked for (``asked_batch``, before the cap at its local samples), as
    the simulator does; the real gradient runs first, and the rest of that time
    is slept, so stragglers and interference cost wall time only. A release's
    batch reaches the inner trainer's ``set_batch`` when it has one; its
    ``max_batch`` (announced in HELLO) is the smaller of the profile's memory
    limit and the inner trainer's shard. With ``clock`` (seconds since the
    emulation started), that time is stretched by the profile's competing
    process (``profile.stretch``), placed on its bursts by when the step starts.
    """

    def __init__(
        self,
        inner: Any,
        profile: Any,
        rng: np.random.Generator,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.inner = inner
        spec = getattr(inner, "spec", None)
        if spec is not None and hasattr(profile, "for_model"):
            profile = profile.for_model(spec.macs, spec.n_params)  # conv: by FLOPs
        self.profile = profile
        self._rng = rng
        self._sleep = sleep
        self._clock = clock
        self.n_params = inner.n_params
        self.model = inner.model
        self.reads = getattr(inner, "reads", 1 << 1)
        self.slept = 0.0
        # the board's memory limit or the inner trainer's shard, the smaller
        limits = [
            m
            for m in (getattr(profile, "max_batch", 0), getattr(inner, "max_batch", 0))
            if m > 0
        ]
        self.max_batch = min(limits) if limits else 0
        if hasattr(inner, "encode_grad"):
            self.codecs = getattr(inner, "codecs", ALL_CODECS)
            self.encode_grad = inner.encode_grad
        if hasattr(inner, "set_batch"):
            self.set_batch = inner.set_batch
        for name in ("set_scale", "set_classes", "moments"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))

    def params_buffer(self) -> Any:
        return self.inner.params_buffer()

    def write_params(self, code: int, offset: int, data: Any) -> None:
        """The inner trainer's decode; a plain copy for F32 when it has none."""
        write = getattr(self.inner, "write_params", None)
        if write is not None:
            write(code, offset, data)
        elif code == 1:
            params_codec.decode_into(self.inner.params_buffer(), code, offset, data)
        else:
            raise ValueError(f"PARAMS code {code} is not read by this trainer")

    def step(self) -> Any:
        batch = getattr(self.inner, "asked_batch", BASE_BATCH)
        target = self._stretch(0.0, self.profile.sample_compute(self._rng, batch))
        t0 = time.perf_counter()
        result = self.inner.step()
        self._rest(target - (time.perf_counter() - t0))
        return result

    def local_round(self, h: int, epochs: float, seconds: float, lr: float) -> Any:
        """The inner trainer's round of as many steps as the emulated board
        takes: H (or epochs of its shard), or as many as fit in ``seconds``
        of its emulated compute; then the rest of that time is slept."""
        batch = getattr(self.inner, "asked_batch", BASE_BATCH)
        if seconds > 0:
            h, target = 0, 0.0
            while h == 0 or target < seconds:
                draw = self.profile.sample_compute(self._rng, batch)
                target += self._stretch(target, draw)
                h += 1
        else:
            rows = int(getattr(self.inner, "X", np.empty((0, 0))).shape[0])
            h = local_round.plan(h, epochs, rows, getattr(self.inner, "batch", batch))
            target = self._stretch(
                0.0,
                sum(self.profile.sample_compute(self._rng, batch) for _ in range(h)),
            )
        t0 = time.perf_counter()
        result = self.inner.local_round(h, 0.0, 0.0, lr)
        self._rest(target - (time.perf_counter() - t0))
        return result

    def _stretch(self, offset: float, seconds: float) -> float:
        """``seconds`` of compute from ``offset`` s after now, bursts included."""
        stretch = getattr(self.profile, "stretch", None)
        if self._clock is None or stretch is None:
            return seconds
        return float(stretch(self._clock() + offset, seconds))

    def _rest(self, extra: float) -> None:
        if extra > 0:
            self._sleep(extra)
            self.slept += extra
