"""A board's local data from a host dataset: one worker's shard as an EPSD file.

The shard is cut from the same standardized training split `edgeps serve`
evaluates against, so a flashed board learns the host's task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from edgeps_worker import datafile

from edgeps.kernels import ModelSpec
from edgeps.model.windows import check_fits
from edgeps.runtime.model_forms import complete_model
from edgeps.workloads.datasets import load_dataset, partition

_SHARD = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)(?::(\d+)/(\d+))?$")


@dataclass(frozen=True)
class ShardSpec:
    """``DATASET[:I/N]``: worker I's part when the training split is cut N ways."""

    dataset: str
    index: int = 0
    parts: int = 1

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        m = _SHARD.match(text) if isinstance(text, str) else None
        if m is None:
            raise ValueError(
                f"--data-from must look like digits or digits:0/4, got {text!r}"
            )
        index, parts = int(m.group(2) or 0), int(m.group(3) or 1)
        if parts < 1 or not 0 <= index < parts:
            raise ValueError(f"shard index must be in 0..{parts - 1}, got {index}")
        return cls(m.group(1), index, parts)


def write_shard(
    shard: ShardSpec, model: str, path: Path, *, seed: int = 0, scheme: str = "iid"
) -> int:
    """Write the shard for ``model`` (full, or short: completed from the
    dataset's sizes and sample shape) to ``path``; the number of rows written."""
    ds = load_dataset(shard.dataset, seed=seed)
    full = complete_model(model, ds.n_features, max(2, ds.n_classes), ds.shape)
    spec = ModelSpec.parse(full)
    check_fits(spec, ds.shape, shard.dataset)
    if spec.n_features != ds.n_features:
        raise ValueError(
            f"model {model} takes {spec.n_features} features, "
            f"{shard.dataset} has {ds.n_features}"
        )
    if spec.kind == "linear" or (
        spec.kind != "logistic" and spec.n_classes != ds.n_classes
    ):
        raise ValueError(
            f"model {model} does not fit the {ds.n_classes} classes of {shard.dataset}"
        )
    if spec.kind == "logistic" and ds.n_classes != 2:
        raise ValueError(
            f"logistic needs 2 classes, {shard.dataset} has {ds.n_classes}"
        )
    rows = partition(ds.y_train, shard.parts, scheme, seed)[shard.index]
    X, y = ds.shard(rows)
    datafile.write_file(str(path), X.tolist(), y.tolist())
    return len(y)
