"""The job's local rounds and card reach each worker's WELCOME; pushes say steps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from edgeps.kernels import ModelSpec
from edgeps.model.card import ModelCard
from edgeps.model.scaler import Scaler
from edgeps.runtime.ingest import Ingest
from edgeps.runtime.outbox import Outbox
from edgeps.runtime.peers import Peers
from edgeps.runtime.welcome import LocalRounds, card_fields
from edgeps_worker import wire_host as wire

JOB = "j1"
N = 20


class _Link:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def publish(self, topic: str, payload: Any, qos: int = 1, retain: bool = False):
        self.sent.append((topic, bytes(payload)))


def test_every_welcome_carries_the_jobs_rounds_and_card() -> None:
    # Prepare
    spec = ModelSpec.parse("softmax:2x3")
    scaler = Scaler.fit(np.array([[0.0, 10.0], [2.0, 30.0]]))
    card = ModelCard(spec, ("a", "b", "c"), scaler)
    peers = Peers(JOB)
    link = _Link()
    fields = LocalRounds(8, 0.0, 0.0, 0.05).welcome_fields() | card_fields(card)
    outbox = Outbox(link, peers, model=str(spec), run=1, welcome=fields)
    peer = peers.get("w1")
    peer.session, peer.nonce = 9, 4

    # Execute
    outbox.welcome(peer, spec.n_params)
    msg = wire.decode(link.sent[-1][1])

    # Assert
    assert (msg.local_steps, msg.lr) == (8, pytest.approx(0.05))
    offset, inv = scaler.offset_scale()
    np.testing.assert_allclose(msg.scale[0], offset)
    np.testing.assert_allclose(msg.scale[1], inv)
    assert msg.classes == ("a", "b", "c") and msg.model == str(spec)


def test_without_local_rounds_a_welcome_asks_for_gradients() -> None:
    assert LocalRounds().welcome_fields() == {}
    assert not LocalRounds(1, 0.0, 0.0).active
    assert LocalRounds(1, 0.5, 0.0).active and LocalRounds(1, 0.0, 2.0).active


def _push(ingest: Ingest, steps: int) -> Any:
    chunks = wire.encode_update(
        JOB, "w1", 3, 1, 1, 0, 0.1, 8, 0.5, np.ones(N, "<f4").tobytes(), steps=steps
    )
    return ingest.feed(wire.topic_up(JOB, "w1"), chunks[0], 1.0)


@pytest.mark.parametrize(("local", "steps", "ok"), [
    (False, 1, True), (False, 8, False), (True, 8, True), (True, 1, True),
    (True, 0, False), (False, 0, False),
])  # fmt: skip
def test_ingest_takes_only_the_steps_the_job_asked_for(local, steps, ok) -> None:
    # Prepare
    ingest = Ingest(job=JOB, n_params=N, local=local)

    # Execute
    event = _push(ingest, steps)

    # Assert
    if ok:
        assert event.steps == steps and ingest.dropped == {}
    else:
        assert event.reason == "steps" and ingest.dropped == {"steps": 1}
