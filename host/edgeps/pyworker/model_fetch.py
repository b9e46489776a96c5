"""Waiting for a job's model: the retained MODEL message a worker reads before it joins.

Shared by every CPython worker: `edgeps worker`, the emulated sensors
(``edgeps.emulate``) and a site relay's upstream worker (``edgeps.relay``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edgeps.transport.backoff import Backoff

log = logging.getLogger("edgeps.pyworker.model_fetch")


@dataclass(frozen=True)
class JobModel:
    """What the job's retained MODEL message says."""

    state: str  # "running" or "done"
    model: str  # model spec text, e.g. "mlp:30-32-6"
    version: int
    n_params: int


def fetch_model(
    transport: Any,
    job: str,
    *,
    stop: Callable[[], bool] = lambda: False,
    timeout: float | None = None,
    backoff: Backoff | None = None,
    want_running: bool = False,
) -> JobModel | None:
    """Wait for the job's retained MODEL; reconnect with backoff while it is absent.

    With ``want_running`` a finished job's MODEL is skipped: it waits for the
    next run. MODEL is unsigned and informational (firmware/PROTOCOL.md): what it says
    only picks the model; the worker's own key checks what the host sends it.
    Returns None when ``stop`` says so or ``timeout`` passes first.
    """
    from edgeps_worker import wire

    topic = wire.topic_model(job)
    deadline = None if timeout is None else time.monotonic() + timeout
    backoff = backoff or Backoff(initial=0.25, maximum=16.0, jitter=0.2)
    waited_note = time.monotonic() + 5.0
    while not stop():
        if deadline is not None and time.monotonic() >= deadline:
            return None
        try:
            if not transport.connected:
                transport.connect(None, b"")
                transport.subscribe(topic, 1)
                backoff.reset()
            msg = transport.poll(200)
        except OSError as exc:
            delay = backoff.next()
            log.info("broker not reachable (%s); retrying in %.2fs", exc, delay)
            transport.close()
            _sleep_unless(stop, delay)
            continue
        if msg is None:
            if time.monotonic() > waited_note:
                log.info("waiting for the host to publish job %r", job)
                waited_note = time.monotonic() + 30.0
            continue
        try:
            decoded = wire.decode(msg[1])
        except wire.WireError as exc:
            log.warning("ignored a malformed MODEL message (%s)", exc.reason)
            continue
        if decoded.type != wire.MODEL or decoded.job != job:
            continue
        if want_running and decoded.state != "running":
            if time.monotonic() > waited_note:
                log.info("job %r is done; waiting for its next run", job)
                waited_note = time.monotonic() + 30.0
            continue
        transport.close()
        return JobModel(
            str(decoded.state),
            str(decoded.model),
            int(decoded.version),
            int(decoded.n_params),
        )
    transport.close()
    return None


def _sleep_unless(stop: Callable[[], bool], seconds: float) -> None:
    end = time.monotonic() + seconds
    while not stop() and time.monotonic() < end:
        time.sleep(min(0.05, max(0.0, end - time.monotonic())))
