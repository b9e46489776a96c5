"""The relay's downstream half: a parameter server for the site's boards.

It is the core `ParameterServer` and the runtime `Coordinator` that `edgeps
serve` runs, with three changes:

- `FoldStep`, the site server's optimizer (for gradients and for deltas),
  leaves the parameters alone: an applied board push is folded into the open
  `Round` (sample-weighted) instead of being stepped into the parameters,
  which stay the central ones. Under a central job with local rounds the
  site's WELCOMEs carry them (and the central job's card) to its boards,
  whose deltas the round folds (`fold`); otherwise a board's delta is
  refused (``steps``) as serve refuses it.
- `SiteServer.adopt` puts newly arrived central parameters in as the site's
  parameters (a new site version), as a resume does.
- `SiteCoordinator.on_release` gates releases: a board the site policy lets
  go on after a push waits until the next central parameters arrive, then
  gets them (one release for all gated boards, `fan_out`). A board that
  joins is released at once with the current parameters. When the site
  policy releases a board after at least one fold (and, with ``min_fold``,
  once that many gradients or every live board's are in), the round is
  closed and the upstream half pushes it.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from edgeps.core.server import ParameterServer
from edgeps.core.types import Action, Applied, Event, Push, Release, WorkerState
from edgeps.kernels.numpy_backend import NumpyKernels
from edgeps.kernels.optim import Optimizer
from edgeps.relay.fold import Round
from edgeps.runtime.coordinator import Coordinator

log = logging.getLogger(__name__)

# the topic of the in-process wake-up that `Round.offer` puts in the site link's
# inbox: a NUL is not allowed in an MQTT topic, so no broker can deliver it
WAKE_TOPIC = "\x00relay/central"


class FoldStep(Optimizer):
    """The site server's optimizer: applying a push changes no parameter."""

    name = "fold"

    def __init__(self, n_params: int) -> None:
        super().__init__(NumpyKernels(), n_params)

    def step(self, params: np.ndarray, grad: np.ndarray, lr: float) -> None:
        self.t += 1


class SiteServer(ParameterServer):
    """A ParameterServer whose applied pushes are folded into ``round``.

    A push is *late* when it was computed on parameters older than the last
    fan-out (possible under site policies that release before every board
    pushed, such as K-of-N or ASP).
    """

    def __init__(self, params: np.ndarray, round_: Round, **kw: Any) -> None:
        n = int(np.size(params))
        super().__init__(params, optimizer=FoldStep(n), server_opt=FoldStep(n), **kw)
        self.round = round_
        self.fanout_version = 0  # site version of the last adopted parameters

    def handle(self, event: Event, now: float) -> list[Action]:
        actions = super().handle(event, now)
        if isinstance(event, Push):
            for action in actions:
                if isinstance(action, Applied) and action.worker_id == event.worker_id:
                    late = int(event.base_version) < self.fanout_version
                    self.round.fold(
                        event.update, event.samples, event.loss, late, event.steps
                    )
        return actions

    def adopt(self, params: np.ndarray) -> int:
        """The central parameters become the site's, at a new version (returned)."""
        # what a resume does before a join; here between two releases
        self.fanout_version = self.model.adopt(params)
        return self.fanout_version


class SiteCoordinator(Coordinator):
    """The serve coordinator with gated releases and the fan-out of central params."""

    server: SiteServer

    def __init__(
        self,
        server: SiteServer,
        link: Any,
        settings: Any,
        *,
        min_fold: int = 0,
        card: dict[str, Any] | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(server, link, settings, **kw)
        if min_fold < 0:
            raise ValueError("min_fold must be >= 0")
        # the central job's scaler and classes (`card_fields`), in every WELCOME
        self.outbox.welcome_fields.update(card or {})
        self.round = server.round
        # a round closes only with min(min_fold, live boards) gradients in it
        self.min_fold = int(min_fold)
        # worker id -> (seq its release answers, batch the policy gave it)
        self.gated: dict[str, tuple[int | None, int | None]] = {}
        self.fan_outs = 0

    def handle(self, topic: str, payload: bytes, now: float) -> None:
        if topic == WAKE_TOPIC:
            self.fan_out()
            return
        super().handle(topic, payload, now)

    def tick(self, now: float) -> None:
        super().tick(now)
        self.fan_out()  # in case a wake-up did not fit in a full inbox
        if self.gated:
            self._maybe_close()  # a board that left may have been the one missing

    def _maybe_close(self) -> None:
        want = min(self.min_fold, self.server.view.n_live)
        if self.round.count >= max(1, want):
            self.round.close()

    def on_release(self, action: Release) -> None:
        now_ids: list[str] = []
        now_answers: list[int | None] = []
        batches = action.batches or {}
        for wid, answer in action.targets():
            if answer is None:
                now_ids.append(wid)
                now_answers.append(answer)
            else:
                self.gated[wid] = (answer, batches.get(wid))
        if now_ids:
            self.outbox.release(
                Release(
                    tuple(now_ids),
                    action.version,
                    action.params,
                    tuple(now_answers),
                    action.batches,
                )
            )
        if len(now_ids) < len(action.worker_ids):
            self._maybe_close()

    def fan_out(self) -> bool:
        """Adopt central parameters that arrived and release every gated board."""
        params = self.round.take_central()
        if params is None:
            return False
        version = self.server.adopt(params)
        self.fan_outs += 1
        gated, self.gated = self.gated, {}
        live = [
            (wid, answer, batch)
            for wid, (answer, batch) in gated.items()
            if self.server.worker_state(wid) not in (None, WorkerState.DEAD)
        ]
        if live:
            _, view = self.server.params_view()
            batches = {w: b for w, _, b in live if b is not None}
            self.outbox.release(
                Release(
                    tuple(w for w, _, _ in live),
                    version,
                    view,
                    tuple(a for _, a, _ in live),
                    batches or None,
                )
            )
        log.debug(
            "fan-out %d: version %d to %d boards", self.fan_outs, version, len(live)
        )
        return True


def card_fields(scale: bytes | None, classes: bytes | None) -> dict[str, Any]:
    """``encode_welcome``'s ``scale`` and ``classes`` from the central WELCOME's
    bytes (n f32 offsets then n inverse stds; class names one per line)."""
    out: dict[str, Any] = {}
    if scale:
        values = np.frombuffer(bytes(scale), dtype="<f4")
        if values.size % 2:
            raise ValueError("a scaler holds offsets and inverse stds in pairs")
        n = values.size // 2
        out["scale"] = (values[:n].tolist(), values[n:].tolist())
    if classes:
        out["classes"] = bytes(classes).decode().split("\n")
    return out
