"""Datasets for training and simulation: a built-in synthetic sensor set, sklearn sets.

Everything is deterministic for a seed. ``load_dataset(name, seed)`` returns a
standardized train/test split plus a default model spec text that the kernels
understand; ``partition`` spreads the training set over N workers, IID or
label-skewed (Dirichlet), so the simulator and the MQTT runtime share one shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Activity-like classes; the per-channel patterns are drawn once from a fixed seed
# so every seed samples the same task, only the examples differ.
ACTIVITY_CLASSES = ("still", "walk", "run", "stairs_up", "stairs_down", "cycle")
_TEMPLATE_SEED = 20171021
_SAMPLE_RATE_HZ = 25.0
_BANDS = ((1, 4), (4, 8), (8, 16), (16, 33))  # FFT bin ranges summarized per channel


@dataclass(frozen=True)
class Dataset:
    """A standardized train/test split and the model spec that fits it."""

    name: str
    X_train: np.ndarray  # float32 (n_train, n_features), C-contiguous
    y_train: np.ndarray  # int32 (n_train,)
    X_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    model_spec: str  # e.g. "mlp:30-32-6", parsed by edgeps.kernels.ModelSpec
    shape: tuple[int, ...] | None = None  # a window's (C, L), an image's (C, H, W)
    classes: tuple[str, ...] | None = None  # names of the class ids, when known

    @property
    def n_features(self) -> int:
        return int(self.X_train.shape[1])

    def shard(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Training rows for one worker, as contiguous copies."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim != 1 or (
            idx.size and (idx.min() < 0 or idx.max() >= len(self.y_train))
        ):
            raise ValueError(
                "shard indices must be a 1-D array of training row numbers"
            )
        return (
            np.ascontiguousarray(self.X_train[idx]),
            np.ascontiguousarray(self.y_train[idx]),
        )


def _class_templates(n_channels: int) -> dict[str, np.ndarray]:
    """Per-class, per-channel base frequency, amplitude, offset, harmonic weight."""
    rng = np.random.default_rng(_TEMPLATE_SEED)
    n = len(ACTIVITY_CLASSES)
    # frequencies in Hz: still ~0, walking ~2, running ~3, ... with overlap on purpose
    base_f = np.array([0.3, 1.8, 2.9, 1.5, 2.1, 1.2])
    freq = base_f[:, None] * rng.uniform(0.85, 1.15, size=(n, n_channels))
    amp = np.array([0.1, 1.0, 1.8, 1.1, 1.2, 0.8])[:, None] * rng.uniform(
        0.6, 1.4, size=(n, n_channels)
    )
    offset = rng.normal(0.0, 0.6, size=(n, n_channels))
    harmonic = rng.uniform(0.0, 0.6, size=(n, n_channels))
    return {"freq": freq, "amp": amp, "offset": offset, "harmonic": harmonic}


def sensor_signals(
    n: int, seed: int, *, n_channels: int = 3, n_samples: int = 64
) -> tuple[np.ndarray, np.ndarray]:
    """Raw windows (n, channels, samples) float32 and labels, accelerometer-like."""
    if n <= 0 or n_channels <= 0 or n_samples < 16:
        raise ValueError("need n > 0, n_channels > 0 and n_samples >= 16")
    tpl = _class_templates(n_channels)
    rng = np.random.default_rng(seed)
    y = rng.integers(0, len(ACTIVITY_CLASSES), size=n).astype(np.int32)
    t = np.arange(n_samples) / _SAMPLE_RATE_HZ
    # per-example variation: tempo, intensity, phase, posture drift, sensor noise
    freq = tpl["freq"][y] * rng.lognormal(0.0, 0.18, size=(n, 1))
    amp = tpl["amp"][y] * rng.lognormal(0.0, 0.35, size=(n, n_channels))
    offset = tpl["offset"][y] + rng.normal(0.0, 0.45, size=(n, n_channels))
    phase = rng.uniform(0.0, 2 * np.pi, size=(n, n_channels))
    harm = tpl["harmonic"][y]
    arg = 2 * np.pi * freq[:, :, None] * t[None, None, :] + phase[:, :, None]
    wave = np.sin(arg) + harm[:, :, None] * np.sin(2 * arg + 0.7)
    noise = rng.normal(0.0, 0.55, size=(n, n_channels, n_samples))
    x = offset[:, :, None] + amp[:, :, None] * wave + noise
    return x.astype(np.float32), y


def sensor_features(x: np.ndarray) -> np.ndarray:
    """Summarize windows into features a small board could also compute.

    Per channel: mean, std, min, max, zero-crossing rate, dominant frequency bin,
    and the energy share of four frequency bands; then the pairwise channel
    correlations.
    """
    if x.ndim != 3:
        raise ValueError("expected windows shaped (n, channels, samples)")
    n, c, t = x.shape
    mean = x.mean(axis=2)
    centered = x - mean[:, :, None]
    std = centered.std(axis=2) + 1e-6
    zcr = (np.diff(np.signbit(centered), axis=2) != 0).mean(axis=2)
    power = np.abs(np.fft.rfft(centered, axis=2)) ** 2
    total = power[:, :, 1:].sum(axis=2) + 1e-9
    bands = [power[:, :, lo:hi].sum(axis=2) / total for lo, hi in _BANDS]
    dominant = (np.argmax(power[:, :, 1:], axis=2) + 1) / (t // 2)
    per_channel = [mean, std, x.min(axis=2), x.max(axis=2), zcr, dominant, *bands]
    feats = np.stack(per_channel, axis=2).reshape(n, -1)
    z = centered / std[:, :, None]
    corr = [(z[:, i] * z[:, j]).mean(axis=1) for i in range(c) for j in range(i + 1, c)]
    if corr:
        feats = np.concatenate([feats, np.stack(corr, axis=1)], axis=1)
    return feats.astype(np.float32)


def standardize(
    X_train: np.ndarray, X_test: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Scale both sets with the training mean and std (test data never leaks in)."""
    mu = X_train.mean(axis=0)
    sd = X_train.std(axis=0)
    sd = np.where(sd < 1e-8, 1.0, sd)
    tr = np.ascontiguousarray((X_train - mu) / sd, dtype=np.float32)
    te = np.ascontiguousarray((X_test - mu) / sd, dtype=np.float32)
    return tr, te


def train_test_split(
    X: np.ndarray, y: np.ndarray, *, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle with the seed and cut off a test set, stratified by label."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError("test_fraction must be in (0, 1)")
    if len(X) != len(y):
        raise ValueError("X and y have different lengths")
    rng = np.random.default_rng(seed)
    test_idx: list[np.ndarray] = []
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        test_idx.append(idx[: max(1, int(round(len(idx) * test_fraction)))])
    test = np.sort(np.concatenate(test_idx))
    mask = np.ones(len(y), dtype=bool)
    mask[test] = False
    train = rng.permutation(np.flatnonzero(mask))
    return X[train], y[train], X[test], y[test]


def _finish(
    name: str, X: np.ndarray, y: np.ndarray, n_classes: int, spec: str, seed: int
) -> Dataset:
    X_tr, y_tr, X_te, y_te = train_test_split(X, y, test_fraction=0.2, seed=seed)
    X_tr, X_te = standardize(X_tr.astype(np.float64), X_te.astype(np.float64))
    return Dataset(
        name=name,
        X_train=X_tr,
        y_train=np.ascontiguousarray(y_tr, dtype=np.int32),
        X_test=X_te,
        y_test=np.ascontiguousarray(y_te, dtype=np.int32),
        n_classes=n_classes,
        model_spec=spec,
    )


def _load_sensors(seed: int) -> Dataset:
    x, y = sensor_signals(5000, seed)
    X = sensor_features(x)
    n_classes = len(ACTIVITY_CLASSES)
    return _finish("sensors", X, y, n_classes, f"mlp:{X.shape[1]}-32-{n_classes}", seed)


def _sklearn() -> object:
    try:
        import sklearn.datasets as skd
    except ImportError as exc:  # the optional extra is not installed
        raise ValueError(
            "this dataset ships with scikit-learn: pip install 'edgeps[datasets]'"
        ) from exc
    return skd


def _load_digits(seed: int) -> Dataset:
    skd = _sklearn()
    bunch = skd.load_digits()  # type: ignore[attr-defined]
    X = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int32)
    return _finish("digits", X, y, 10, "mlp:64-32-10", seed)


def _load_breast_cancer(seed: int) -> Dataset:
    skd = _sklearn()
    bunch = skd.load_breast_cancer()  # type: ignore[attr-defined]
    X = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int32)
    # binary labels in {0, 1}: logistic regression, n_classes 1 in the kernels' terms
    return _finish("breast_cancer", X, y, 2, f"logistic:{X.shape[1]}", seed)


def _packaged(name: str) -> Callable[[int], Dataset]:
    def load(seed: int) -> Dataset:
        from edgeps.workloads import packaged

        return getattr(packaged, name)(seed)

    load.__doc__ = f"edgeps.workloads.packaged.{name}"
    return load


DATASETS: dict[str, Callable[[int], Dataset]] = {
    "sensors": _load_sensors,
    "digits": _load_digits,
    "breast_cancer": _load_breast_cancer,
    # windows and images from packages that ship them (edgeps.workloads.packaged)
    "mnist": _packaged("load_mnist"),
    "fashion-mnist": _packaged("load_fashion_mnist"),
    "mnist1d": _packaged("load_mnist1d"),
    "basicmotions": _packaged("load_basicmotions"),
}


def load_dataset(name: str, seed: int = 0) -> Dataset:
    """Load a dataset by name (``DATASETS``): split, standardized, same for a seed."""
    if not isinstance(name, str) or name not in DATASETS:
        known = ", ".join(DATASETS)
        raise ValueError(f"unknown dataset {name!r}; known: {known}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError("seed must be an int")
    return DATASETS[name](int(seed))


def partition_iid(n_samples: int, n_workers: int, seed: int) -> list[np.ndarray]:
    """Shuffle rows and deal them out in near-equal shards."""
    if n_workers <= 0 or n_samples < n_workers:
        raise ValueError("need at least one row per worker and n_workers > 0")
    rng = np.random.default_rng(seed)
    return [np.sort(s) for s in np.array_split(rng.permutation(n_samples), n_workers)]


def partition_dirichlet(
    y: np.ndarray, n_workers: int, alpha: float, seed: int, *, min_size: int = 8
) -> list[np.ndarray]:
    """Label-skewed shards: each class split over workers by Dirichlet(alpha) shares.

    Small alpha (e.g. 0.1) gives each worker only a few classes; large alpha
    approaches IID. Draws repeat (bounded) until every worker holds ``min_size`` rows.
    """
    y = np.asarray(y)
    if n_workers <= 0 or len(y) < n_workers * min_size:
        raise ValueError("not enough rows for that many workers")
    if not (alpha > 0 and np.isfinite(alpha)):
        raise ValueError("alpha must be a positive finite number")
    rng = np.random.default_rng(seed)
    for _ in range(100):
        shards: list[list[int]] = [[] for _ in range(n_workers)]
        for label in np.unique(y):
            idx = rng.permutation(np.flatnonzero(y == label))
            shares = rng.dirichlet(np.full(n_workers, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(idx)).astype(int)
            for w, part in enumerate(np.split(idx, cuts)):
                shards[w].extend(part.tolist())
        if min(len(s) for s in shards) >= min_size:
            return [np.sort(np.asarray(s, dtype=np.int64)) for s in shards]
    raise ValueError(f"could not give every worker {min_size} rows with alpha={alpha}")


def partition_labelmix(
    y: np.ndarray, n_workers: int, alpha: float, seed: int, *, min_size: int = 8
) -> list[np.ndarray]:
    """Label-skewed shards when workers outnumber what a split can fill.

    Each worker draws its class mix from Dirichlet(alpha) and takes
    ``max(min_size, len(y) // n_workers)`` rows by that mix, distinct within
    its shard; shards of different workers may overlap.
    """
    y = np.asarray(y)
    if n_workers <= 0 or not (alpha > 0 and np.isfinite(alpha)):
        raise ValueError("need n_workers > 0 and a positive finite alpha")
    rng = np.random.default_rng(seed)
    labels = np.unique(y)
    pools = [np.flatnonzero(y == label) for label in labels]
    size = max(min_size, len(y) // n_workers)
    shards = []
    for _ in range(n_workers):
        mix = rng.dirichlet(np.full(len(labels), alpha))
        weights = np.concatenate(
            [np.full(len(p), m / len(p)) for p, m in zip(pools, mix, strict=True)]
        )
        order = np.concatenate(pools)
        take = rng.choice(
            len(order),
            size=min(size, len(order)),
            replace=False,
            p=weights / weights.sum(),
        )
        shards.append(np.sort(order[take]))
    return shards


def partition_groups(groups: np.ndarray, n_workers: int) -> list[np.ndarray]:
    """Whole groups (recordings, subjects) dealt to workers: the natural non-IID
    case. Groups in sorted order go round the workers, so with as many groups
    as workers each worker holds exactly one group's rows."""
    g = np.asarray(groups)
    names = np.unique(g)
    if n_workers <= 0 or len(names) < n_workers:
        raise ValueError(
            f"{len(names)} groups for {n_workers} workers: need a group per worker"
        )
    owner = {name: i % n_workers for i, name in enumerate(names.tolist())}
    which = np.array([owner[v] for v in g.tolist()], dtype=np.int64)
    return [np.flatnonzero(which == w) for w in range(n_workers)]


def partition(
    y: np.ndarray, n_workers: int, scheme: str = "iid", seed: int = 0
) -> list[np.ndarray]:
    """Split training rows over workers: "iid", "dirichlet:A" or "labelmix:A"."""
    if scheme == "iid":
        return partition_iid(len(y), n_workers, seed)
    if isinstance(scheme, str) and scheme.startswith("labelmix:"):
        try:
            alpha = float(scheme.partition(":")[2])
        except ValueError:
            raise ValueError(f"bad labelmix alpha in {scheme!r}") from None
        return partition_labelmix(y, n_workers, alpha, seed)
    if isinstance(scheme, str) and scheme.startswith("dirichlet"):
        _, _, arg = scheme.partition(":")
        try:
            alpha = float(arg) if arg else 0.5
        except ValueError:
            raise ValueError(f"bad dirichlet alpha in {scheme!r}") from None
        return partition_dirichlet(y, n_workers, alpha, seed)
    raise ValueError(f"unknown partition scheme {scheme!r}; use 'iid' or 'dirichlet:A'")
