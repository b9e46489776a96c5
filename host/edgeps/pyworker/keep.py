"""The CPython worker's model file: kept at a job's end, or fetched from a running job.

``edgeps worker --model-out PATH`` writes the model of its last complete
release when the job stops it with STOP done (the PS sends every worker the
final parameters just before), and ``edgeps worker --infer --fetch`` joins
a job only to take its current model, then predicts. Both write the board's
model file (firmware/README.md, "The model file") with the board's own code,
``edgeps_worker.keep`` and ``edgeps_worker.fetch``, which run unchanged here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.pyworker.model_fetch import fetch_model

log = logging.getLogger("edgeps.pyworker.keep")


class Keeping:
    """A trainer as the worker loop sees it, which also remembers what a model
    file needs and the trainer does not keep: the job's scaler (WELCOME) and
    the parameters each local round started from (``anchor``: the release).
    Everything else is the wrapped trainer's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.scale: bytes | None = None
        self.anchor: np.ndarray | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def set_scale(self, data: Any) -> None:
        self.inner.set_scale(data)
        self.scale = None if data is None else bytes(data)

    def local_round(self, h: int, epochs: float, seconds: float, lr: float) -> Any:
        params = self.inner.params_buffer()
        if self.anchor is None:
            self.anchor = params.copy()
        else:
            np.copyto(self.anchor, params)
        return self.inner.local_round(h, epochs, seconds, lr)


def write_model(worker: Any, path: str | Path) -> bool:
    """Write the model of ``worker``'s last complete release to ``path``;
    False when it holds none (no release used since its last HELLO)."""
    from edgeps_worker import keep

    spec, names, scale, params = keep.model_of(worker)
    if params is None:
        return False
    keep.save(str(path), spec, names, params, scale)
    return True


def fetch(
    transport: Any,
    job: str,
    wid: str,
    path: str | Path,
    *,
    key: bytes | None = None,
    stop: Callable[[], bool] = lambda: False,
    **opts: Any,
) -> str:
    """Join ``job`` as ``wid`` (the model from its retained MODEL), write the
    model of the first release to ``path``, leave; the stop reason
    (``fetched`` once written). ``opts``: the worker loop's keywords."""
    from edgeps_worker import fetch as board_fetch

    found = fetch_model(transport, job, stop=stop, want_running=True)
    if found is None:
        return "stopped"
    log.info("fetching job %s's model %s as %s", job, found.model, wid)
    reason: str = board_fetch.fetch(
        transport,
        found.model,
        job,
        wid,
        str(path),
        key=key,
        stop=stop,
        log=lambda text: log.info("%s", text),
        **opts,
    )
    return reason
