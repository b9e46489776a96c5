"""A relay under a central job with local rounds, without a broker.

The fold over deltas against a numpy reference, the trainer's local round,
and the site coordinator handing the central job's local rounds and card to
its boards (and refusing a delta when the central job has none).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from edgeps.policy import parse_policy
from edgeps.relay.fold import Round
from edgeps.relay.site import SiteCoordinator, SiteServer, card_fields
from edgeps.relay.upstream import RelayTrainer
from edgeps.runtime.coordinator import Settings
from edgeps.runtime.welcome import LocalRounds
from edgeps_worker import wire_host as wire

from tests.relay.test_site import JOB, N, RecordingLink, _hello

LR = 0.05


def _never() -> bool:
    return False


def _clock() -> float:
    return 0.0


def _reference(
    updates: list[np.ndarray], samples: list[int], steps: list[int], lr: float
) -> tuple[np.ndarray, int]:
    """What a round of these updates pushes: (the mean delta, its steps)."""
    w = np.array([s if s > 0 else 1 for s in samples], dtype=np.float64)
    deltas = [
        u.astype(np.float64) * (1.0 if k > 1 else lr)
        for u, k in zip(updates, steps, strict=True)
    ]
    mean = (w[:, None] * np.stack(deltas)).sum(axis=0) / w.sum()
    k = float((w * np.maximum(1, np.array(steps))).sum() / w.sum())
    return mean.astype(np.float32), max(2, round(k))


def _fold_all(
    r: Round, updates: list[np.ndarray], samples: list[int], steps: list[int]
) -> None:
    for u, m, k in zip(updates, samples, steps, strict=True):
        r.fold(u, m, 0.5, late=False, steps=k)


# ---- the fold ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("samples", "steps"),
    [
        ([8, 24, 16], [4, 4, 4]),  # every board its H steps
        ([8, 24, 16], [4, 9, 2]),  # epochs or seconds: steps differ per board
        ([32, 0, 5], [1, 6, 3]),  # a one-step round's gradient among deltas
    ],
)
def test_a_round_of_deltas_is_their_sample_weighted_mean(
    samples: list[int], steps: list[int]
) -> None:
    rng = np.random.default_rng(3)
    updates = [rng.normal(size=7).astype(np.float32) for _ in samples]
    r = Round(7)
    _fold_all(r, updates, samples, steps)

    assert r.close()
    got = r.wait(_never, clock=_clock, lr=LR)

    want, want_steps = _reference(updates, samples, steps, LR)
    assert got is not None
    np.testing.assert_allclose(got.grad, want, rtol=1e-6, atol=1e-7)
    assert got.steps == want_steps
    assert got.samples == sum(samples) and got.count == len(samples)


def test_the_steps_pushed_are_the_weighted_mean_and_at_least_two() -> None:
    r = Round(2)
    # a delta of 2 steps from 1 sample, a gradient from 30: mean 1.03 steps
    _fold_all(r, [np.ones(2, np.float32)] * 2, [1, 30], [2, 1])
    got = r.wait(lambda: True, clock=_clock, lr=LR)
    assert got is not None and got.steps == 2

    _fold_all(r, [np.ones(2, np.float32)] * 2, [10, 30], [8, 4])
    got = r.wait(lambda: True, clock=_clock, lr=LR)
    assert got is not None and got.steps == 5  # (80 + 120) / 40


def test_a_round_of_gradients_is_pushed_as_before_whatever_the_lr() -> None:
    rng = np.random.default_rng(4)
    updates = [rng.normal(size=5).astype(np.float32) for _ in range(3)]
    samples = [8, 24, 3]
    plain, local = Round(5), Round(5)
    for u, m in zip(updates, samples, strict=True):
        plain.fold(u, m, 1.0, late=False)
        local.fold(u, m, 1.0, late=False, steps=1)

    a = plain.wait(lambda: True, clock=_clock)
    b = local.wait(lambda: True, clock=_clock, lr=LR)

    assert a is not None and b is not None
    assert a.steps == b.steps == 1
    assert a.grad.tobytes() == b.grad.tobytes()  # bit for bit: no lr in it


def test_a_round_after_a_round_of_deltas_starts_empty() -> None:
    r = Round(3)
    r.fold(np.ones(3, np.float32), 4, 1.0, late=False, steps=5)
    assert r.wait(lambda: True, clock=_clock, lr=LR) is not None

    r.fold(np.full(3, 2.0, np.float32), 4, 1.0, late=False)
    got = r.wait(lambda: True, clock=_clock, lr=LR)

    assert got is not None and got.steps == 1
    np.testing.assert_array_equal(got.grad, np.full(3, 2.0))


# ---- the trainer -------------------------------------------------------------


def test_the_trainers_local_round_returns_the_folded_delta_and_its_steps() -> None:
    r = Round(4)
    trainer = RelayTrainer(4, "linear:3", r, _never)
    trainer.params_buffer()[:] = [1, 2, 3, 4]
    r.fold(np.full(4, 0.2, np.float32), 8, 0.5, late=False, steps=4)
    r.fold(np.full(4, 2.0, np.float32), 8, 0.7, late=False, steps=1)
    r.close()

    loss, samples, steps, delta = trainer.local_round(4, 0.0, 0.0, LR)

    assert trainer.local == (4, 0.0, 0.0, LR)
    np.testing.assert_array_equal(r.take_central(), [1, 2, 3, 4])
    assert (samples, steps) == (16, 2)  # (8 x 4 + 8 x 1) / 16 = 2.5, rounded
    assert loss == pytest.approx(0.6)
    np.testing.assert_allclose(
        np.frombuffer(delta, "<f4"), np.full(4, (0.2 + LR * 2.0) / 2), rtol=1e-6
    )


def test_the_trainer_keeps_the_central_card_for_the_site() -> None:
    trainer = RelayTrainer(4, "linear:3", Round(4), _never)
    scale = np.array([1, 2, 0.5, 0.25], "<f4").tobytes()

    trainer.set_scale(scale)
    trainer.set_classes(b"cat\ndog")

    assert card_fields(trainer.scale, trainer.classes) == {
        "scale": ([1.0, 2.0], [0.5, 0.25]),
        "classes": ["cat", "dog"],
    }
    assert card_fields(None, None) == {}
    with pytest.raises(ValueError):
        trainer.set_scale(b"\x00" * 12)


# ---- the site ----------------------------------------------------------------


def _site(
    local: LocalRounds, card: dict[str, Any] | None = None
) -> tuple[SiteCoordinator, RecordingLink, Round]:
    round_ = Round(N)
    server = SiteServer(np.zeros(N, np.float32), round_, policy=parse_policy("asp"))
    link = RecordingLink()
    coord = SiteCoordinator(
        server,
        link,
        Settings(job=JOB, model=f"linear:{N - 1}", local=local),
        policy_name="asp",
        card=card,
    )
    return coord, link, round_


def _push_delta(coord: SiteCoordinator, wid: str, value: float, steps: int) -> None:
    session = coord.peers.get(wid).session
    data = np.full(N, value, dtype="<f4").tobytes()
    for part in wire.encode_update(
        JOB, wid, session, 1, 1, coord.server.version, 0.01, 8, 0.3, data, steps=steps
    ):
        coord.handle(wire.topic_up(JOB, wid), part, 2.0)


def test_the_sites_welcome_carries_the_central_local_rounds_and_card() -> None:
    card = card_fields(np.array([1, 2, 3, 4], "<f4").tobytes(), b"a\nb")
    coord, link, r = _site(LocalRounds(4, 0.0, 0.0, LR), card)

    _hello(coord, "w1", 0.0)

    welcome = next(
        m
        for t, p in link.sent
        if t == wire.topic_down(JOB, "w1")
        for m in [wire.decode(p)]
        if m.type == wire.WELCOME
    )
    assert (welcome.local_steps, welcome.local_epochs, welcome.local_time) == (
        4,
        0.0,
        0.0,
    )
    assert welcome.lr == pytest.approx(LR)
    assert welcome.scale == ((1.0, 2.0), (3.0, 4.0))
    assert welcome.classes == ("a", "b")


def test_a_site_with_local_rounds_folds_a_boards_delta_and_keeps_its_params() -> None:
    coord, link, r = _site(LocalRounds(4, 0.0, 0.0, LR))
    _hello(coord, "w1", 0.0)

    _push_delta(coord, "w1", 0.5, 4)

    assert not coord.ingest.dropped and r.count == 1
    _, params = coord.server.params_snapshot()
    np.testing.assert_array_equal(params, np.zeros(N))  # the delta was not applied
    got = r.wait(_never, clock=_clock, lr=LR)
    assert got is not None and got.steps == 4
    np.testing.assert_allclose(got.grad, np.full(N, 0.5))


def test_a_site_without_local_rounds_refuses_a_delta() -> None:
    coord, link, r = _site(LocalRounds())
    _hello(coord, "w1", 0.0)

    _push_delta(coord, "w1", 0.5, 4)

    assert r.count == 0
    assert coord.ingest.dropped["steps"] == 1


# ---- the shared worker loop on the relay's trainer --------------------------


class _Sent:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def publish(self, topic: str, payload: bytes, qos: int = 1) -> None:
        self.sent.append((topic, bytes(payload)))


def test_the_upstream_worker_takes_the_welcome_and_pushes_one_delta() -> None:
    from edgeps_worker import wire as board_wire
    from edgeps_worker import worker_link
    from edgeps_worker.worker import Worker

    r = Round(4)
    trainer = RelayTrainer(4, "linear:3", r, _never)
    link = _Sent()
    w = Worker(link, trainer, "central", "relay-x")
    welcome = wire.encode_welcome(
        "central", "relay-x", 1, w.nonce, 9, 4, "linear:3",
        local_steps=4, lr=LR, scale=([0.0] * 3, [1.0] * 3), classes=["x"],
    )  # fmt: skip

    worker_link.on_welcome(w, board_wire.decode(welcome))  # as the loop does

    assert w.stop_reason is None and w.session == 9
    assert trainer.scale is not None and len(trainer.scale) == 24
    assert trainer.classes == b"x"
    # the release: one site round of the boards' deltas, pushed as one delta
    r.fold(np.full(4, 0.5, np.float32), 6, 0.2, late=False, steps=4)
    r.close()
    w.version = 3  # what the release's PARAMS named
    w._release()

    (topic, payload), *_ = link.sent
    update = wire.decode(payload)
    assert topic == wire.topic_up("central", "relay-x")
    assert (update.type, update.steps, update.samples) == (wire.UPDATE, 4, 6)
    np.testing.assert_array_equal(np.frombuffer(update.data, "<f4"), np.full(4, 0.5))
    assert trainer.local is not None and trainer.local[0] == 4


@pytest.mark.parametrize("steps", [1, 8])
def test_a_board_that_lies_does_not_steer_the_sites_push(steps: int) -> None:
    # Prepare: 6 honest boards near one update, 1 pushing -10x it claiming 2^32-1
    rng = np.random.default_rng(4)
    honest = [np.ones(7, np.float32) + rng.normal(0, 0.1, 7).astype(np.float32)
              for _ in range(6)]  # fmt: skip
    r = Round(7)
    _fold_all(r, [*honest, np.full(7, -10.0, np.float32)], [32] * 6 + [2**32 - 1],
              [steps] * 7)  # fmt: skip
    # Execute
    assert r.close()
    got = r.wait(_never, clock=_clock, lr=LR)
    # Assert: the trimmed mean of 7 (one cut at each end) is near the honest one
    assert got is not None
    assert np.all(np.abs(got.grad - 1.0) < 0.2), got.grad
