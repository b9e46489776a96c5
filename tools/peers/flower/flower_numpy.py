"""The Flower side's local training in plain numpy: edgeps' model, batches and steps.

Runs in Flower's own virtual environment, so it imports neither edgeps nor
flwr; tests/tools/test_peers_numpy.py checks it against edgeps' kernels, its
minibatch order and its emulated compute times, so both sides train the same
model on the same samples in the same order. Everything it needs comes from
the job file `tools/peers/export_job.py` writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIXED_FRACTION = 0.1  # as edgeps.workloads.scenarios: share no batch changes
BASE_BATCH = 32


@dataclass(frozen=True)
class Mlp:
    """An MLP laid out as edgeps' ModelSpec: per layer W (n_in, n_out) then b."""

    sizes: tuple[int, ...]  # input, hidden..., classes
    activation: str = "relu"

    @property
    def n_params(self) -> int:
        pairs = zip(self.sizes[:-1], self.sizes[1:], strict=True)
        return sum(a * b + b for a, b in pairs)

    def layers(self, flat: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Views (W, b) into the flat float32 vector, input layer first."""
        out, off = [], 0
        for a, b in zip(self.sizes[:-1], self.sizes[1:], strict=True):
            out.append((flat[off : off + a * b].reshape(a, b), flat[off + a * b :][:b]))
            off += a * b + b
        return out

    def _hidden(self, layers: list[tuple[np.ndarray, np.ndarray]], X: np.ndarray):
        acts = [X]
        h = X
        for W, b in layers[:-1]:
            h = h @ W + b
            h = np.maximum(h, 0) if self.activation == "relu" else np.tanh(h)
            acts.append(h)
        return acts

    def logits(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        layers = self.layers(params)
        W, b = layers[-1]
        return self._hidden(layers, X)[-1] @ W + b

    def accuracy(self, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(np.argmax(self.logits(params, X), axis=1) == y))

    def loss_and_grad(
        self, params: np.ndarray, X: np.ndarray, y: np.ndarray
    ) -> tuple[float, np.ndarray]:
        """Mean softmax cross-entropy and its gradient, a flat float32 vector."""
        B = X.shape[0]
        layers = self.layers(params)
        grad = np.zeros_like(params)
        grads = self.layers(grad)
        acts = self._hidden(layers, X)
        W, b = layers[-1]
        z = acts[-1] @ W + b
        s = z - z.max(axis=1, keepdims=True)
        ls = s - np.log(np.exp(s).sum(axis=1, keepdims=True))
        rows = np.arange(B)
        loss = -float(ls[rows, y].sum(dtype=np.float64)) / B
        dz = np.exp(ls)
        dz[rows, y] -= 1.0
        dz *= np.float32(1.0 / B)
        for i in range(len(layers) - 1, -1, -1):
            gW, gb = grads[i]
            gW[:] = acts[i].T @ dz
            gb[:] = dz.sum(axis=0)
            if i > 0:
                h = acts[i]
                dz = dz @ layers[i][0].T
                dz = dz * (h > 0) if self.activation == "relu" else dz * (1.0 - h * h)
        return loss, grad


class Shuffle:
    """edgeps' minibatch order (edgeps.pyworker.batches): seeded permutations."""

    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self._rng = np.random.default_rng(seed)
        self._order = self._rng.permutation(n)
        self._pos = 0

    def take(self, size: int) -> np.ndarray:
        idx = np.empty(size, dtype=np.intp)
        filled = 0
        while filled < size:
            take = min(size - filled, self.n - self._pos)
            idx[filled : filled + take] = self._order[self._pos : self._pos + take]
            filled += take
            self._pos += take
            if self._pos == self.n:
                self._order = self._rng.permutation(self.n)
                self._pos = 0
        return idx


@dataclass(frozen=True)
class Compute:
    """One board's emulated iteration time (edgeps' WorkerProfile.sample_compute)."""

    typical: float  # base compute time x straggler factor, seconds
    jitter: float  # lognormal sigma
    interference_p: float = 0.0
    interference_factor: float = 1.0

    def sample(self, rng: np.random.Generator, batch: int = BASE_BATCH) -> float:
        scale = FIXED_FRACTION + (1.0 - FIXED_FRACTION) * batch / BASE_BATCH
        t = self.typical * scale * float(rng.lognormal(0.0, self.jitter))
        if self.interference_p > 0 and rng.random() < self.interference_p:
            t *= self.interference_factor
        return t


class LocalTrainer:
    """H local SGD steps at ``lr`` from given weights, each lasting its drawn time.

    ``sleep`` stretches a step to the board's iteration time after the real
    gradient, as edgeps' EmulatedTrainer does.
    """

    def __init__(
        self,
        model: Mlp,
        X: np.ndarray,
        y: np.ndarray,
        *,
        batch: int,
        lr: float,
        shuffle_seed: int,
        compute: Compute,
        compute_seed: list[int],
    ) -> None:
        self.model = model
        self.X = np.ascontiguousarray(X, dtype=np.float32)
        self.y = np.ascontiguousarray(y, dtype=np.int32)
        self.batch = min(batch, len(self.y))
        self.asked_batch = batch
        self.lr = np.float32(lr)
        self.shuffle = Shuffle(len(self.y), shuffle_seed)
        self.compute = compute
        self.rng = np.random.default_rng(compute_seed)
        self.steps = 0

    def train(self, params: np.ndarray, steps: int, clock, sleep) -> np.ndarray:
        """The weights after ``steps`` local steps from ``params`` (a new array)."""
        p = np.array(params, dtype=np.float32, copy=True)
        for _ in range(steps):
            t0 = clock()
            want = self.compute.sample(self.rng, self.asked_batch)
            idx = self.shuffle.take(self.batch)
            _, g = self.model.loss_and_grad(p, self.X[idx], self.y[idx])
            p -= self.lr * g
            self.steps += 1
            rest = want - (clock() - t0)
            if rest > 0:
                sleep(rest)
        return p
