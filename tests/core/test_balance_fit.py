"""Work assignment: the fit of a board's fixed and per-sample compute."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core.balance import Balancer

from tests.core.test_balance import (
    run,  # each round every board runs its assigned batch
)


class FixedCostBoard:
    """A board whose compute at batch b is fixed + b * per_sample, over a link."""

    def __init__(self, fixed: float, per_sample: float, link: float = 0.01) -> None:
        self.fixed = fixed
        self.per_sample = per_sample
        self.link = link

    def compute(self, batch: int) -> float:
        return self.fixed + batch * self.per_sample

    def push(self, bal: Balancer, wid: str, batch: int, spike: float = 1.0) -> None:
        compute = self.compute(batch) * spike
        bal.observe(wid, batch, compute, compute + self.link)


def normal() -> FixedCostBoard:
    # 0.1 s at batch 32, a tenth of it fixed (the simulator's boards)
    return FixedCostBoard(0.01, 0.09 / 32)


def straggler() -> FixedCostBoard:
    return FixedCostBoard(0.04, 0.36 / 32)  # the same board, 4x slower


def cluster(n_slow: int = 1) -> dict[str, FixedCostBoard]:
    boards = {f"f{i}": normal() for i in range(6)}
    return boards | {f"s{i}": straggler() for i in range(n_slow)}


def joined(boards: dict[str, FixedCostBoard], **kw) -> Balancer:
    bal = Balancer(**kw)
    for wid in boards:
        bal.joined(wid)
    return bal


def test_a_straggler_settles_at_the_fitted_batch_after_one_smaller_push() -> None:
    boards = cluster()
    bal = joined(boards)
    slow = [h["s0"] for h in run(bal, boards, 30)]
    # proportional from one batch size: T* / (0.4 s / 32) = 8.8 less its link
    assert slow[:4] == [32, 32, 32, 8]
    # one push at 8 gives the slope: (0.11 - 0.01 - 0.04) / (0.36 / 32) = 5.3
    assert slow[4:] == [5] * 26
    assert bal.changes == 2
    t = {w: b.link + b.compute(32 if w != "s0" else 5) for w, b in boards.items()}
    assert max(t.values()) / min(t.values()) < 1.05


def test_with_one_batch_size_seen_the_model_stays_proportional() -> None:
    boards = {"a": normal(), "b": normal(), "s": straggler()}
    bal = joined(boards, eager=True)
    history = run(bal, boards, 2)
    # its first push is all it has: the fixed part counts as per-sample time
    assert history[1]["s"] == round(0.11 / (0.4 / 32))


def test_a_board_at_one_size_keeps_its_batch_whatever_its_fixed_cost() -> None:
    boards = {f"w{i}": FixedCostBoard(0.05, 0.05 / 32) for i in range(4)}
    bal = joined(boards)
    assert all(b == 32 for h in run(bal, boards, 40) for b in h.values())
    assert bal.changes == 0


def test_a_spike_on_the_first_smaller_push_neither_breaks_the_fit_nor_sticks() -> None:
    boards = cluster()
    spikes = {("s0", 3): 5.0}  # its first push at 8 hit by another task
    bal = joined(boards)
    slow = [h["s0"] for h in run(bal, boards, 30, spikes)]
    assert slow[3] == 8
    assert all(2 <= b <= 8 for b in slow[4:])
    assert slow[-20:] == [5] * 20


def test_fitted_stragglers_under_interference_settle_and_stay_put() -> None:
    rng = np.random.default_rng(11)
    boards = cluster(n_slow=2)
    spikes = {(w, r): 5.0 for w in boards for r in range(300) if rng.random() < 0.1}
    bal = joined(boards)
    history = run(bal, boards, 300, spikes)
    assert all(h[w] == 32 for h in history for w in boards if w.startswith("f"))
    assert all(history[-1][s] == pytest.approx(5, abs=1) for s in ("s0", "s1"))
    # no oscillation: once settled, spikes (10% of pushes) move nothing
    assert all(h == history[-1] for h in history[30:])
    assert bal.changes <= 6


def test_eager_fits_from_its_second_push() -> None:
    boards = cluster()
    history = run(joined(boards, eager=True), boards, 20)
    slow = [h["s0"] for h in history]
    assert slow[0] == 32
    assert slow[1] == 9  # its link legs left out until its warmup ends
    assert slow[2] == pytest.approx(6, abs=1)
    assert len(set(slow[2:])) == 1


def test_eager_a_first_push_spike_gives_the_batch_back_at_the_next_push() -> None:
    # Prepare: normal boards with a fixed cost, one of them 5x slower on its
    # first push only (another task), then 10% spikes on every board
    rng = np.random.default_rng(13)
    boards = cluster(n_slow=0)
    spikes = {(w, r): 5.0 for w in boards for r in range(3, 200) if rng.random() < 0.1}
    spikes[("f0", 0)] = 5.0
    bal = joined(boards, eager=True)
    # Execute
    history = run(bal, boards, 200, spikes)
    # Assert: one iteration at a small batch, then its batch back for good
    f0 = [h["f0"] for h in history]
    assert f0[1] < 32
    assert f0[2:] == [32] * 198
    assert all(b == 32 for h in history for w, b in h.items() if w != "f0")
    assert bal.changes == 2


def test_a_true_straggler_is_not_mistaken_for_a_first_push_spike() -> None:
    boards = cluster()
    boards["s0"].fixed = 0.0  # all of its compute grows with the batch
    history = run(joined(boards, eager=True), boards, 30)
    slow = [h["s0"] for h in history]
    assert slow[1] < 12 and all(b < 12 for b in slow[1:])
