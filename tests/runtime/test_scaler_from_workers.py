"""serve --scaler-from workers: the coordinator holds HELLOs, the job fixes its card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.types import Join
from edgeps.kernels import ModelSpec
from edgeps.model.card import ModelCard
from edgeps.model.scaler import Scaler
from edgeps.policy import parse_policy
from edgeps.runtime.checkpoint import Checkpoint, save_checkpoint
from edgeps.runtime.config import ServeConfig, merge
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps.runtime.job import build_server, load_model, scaler_gate
from edgeps.runtime.scaler_gate import ScalerGate
from edgeps_worker import wire_host as wire

JOB = "sw"
NF = 4
SPEC = ModelSpec.parse(f"logistic:{NF}")


class _Link:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def get(self, timeout: float) -> tuple[str, bytes] | None:
        return None

    def get_nowait(self) -> tuple[str, bytes] | None:
        return None

    def publish(self, topic: str, payload: Any, qos: int = 1, retain: bool = False):
        self.sent.append((topic, bytes(payload)))

    def welcomes(self) -> dict[str, wire.Message]:
        out = {}
        for topic, payload in self.sent:
            if "/down/" in topic:
                msg = wire.decode(payload)
                if msg.type == wire.WELCOME:
                    out[msg.wid] = msg
        return out


def _coordinator(gate: ScalerGate | None) -> tuple[Coordinator, _Link]:
    server = ParameterServer(SPEC.init_params(0), policy=parse_policy("asp"), lr=0.1)
    link = _Link()
    card = ModelCard(SPEC, ("no", "yes"), None)
    settings = Settings(job=JOB, model=str(SPEC), card=card)
    coord = Coordinator(server, link, settings, policy_name="asp", gate=gate)
    return coord, link


def _hello(coord: Coordinator, wid: str, moments: Any, now: float, nonce: int = 5):
    payload = wire.encode_hello(
        JOB, wid, 1, nonce, str(SPEC), dtypes=(1,), codecs=(1,), moments=moments
    )
    coord.handle(wire.topic_up(JOB, wid), payload, now)


def _moments(X: np.ndarray) -> tuple[int, list[float], list[float]]:
    return int(X.shape[0]), X.mean(axis=0).tolist(), X.var(axis=0).tolist()


def _data(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, NF)) * [1.0, 40.0, 3.0, 0.5] + [5.0, 200.0, 0.0, -1]


def test_nobody_is_welcomed_before_the_scaler_then_all_with_the_same() -> None:
    # Prepare
    fixed: list[Scaler] = []
    gate = ScalerGate(NF, workers=2, wait=30.0, grace=0.0, on_fixed=fixed.append)
    coord, link = _coordinator(gate)
    a, b = _data(1, 30), _data(2, 50)
    # Execute
    _hello(coord, "board", None, 0.0)
    _hello(coord, "a", _moments(a), 1.0)
    before = dict(link.welcomes())
    _hello(coord, "b", _moments(b), 2.0)
    after = link.welcomes()
    # Assert
    assert before == {}
    assert sorted(after) == ["a", "b", "board"]
    assert len(fixed) == 1 and fixed[0].n == 80
    want = Scaler.fit(np.concatenate([a, b]).astype(np.float32))
    offset, inv = want.offset_scale()
    for msg in after.values():
        np.testing.assert_allclose(msg.scale[0], offset, rtol=1e-5)
        np.testing.assert_allclose(msg.scale[1], inv, rtol=1e-5)
        assert msg.classes == ("no", "yes")
    assert coord.settings.card is not None
    assert coord.settings.card.scaler is fixed[0]
    assert sorted(coord.server.stats()) == ["a", "b", "board"]
    record = coord.record(3.0)
    assert record["scaler"]["state"] == "fixed" and record["scaler"]["rows"] == 80


def test_the_wait_fixes_it_on_a_tick_with_fewer_workers() -> None:
    gate = ScalerGate(NF, workers=2, wait=10.0)
    coord, link = _coordinator(gate)
    _hello(coord, "a", _moments(_data(1, 30)), 0.0)
    coord.tick(9.0)
    assert link.welcomes() == {}
    coord.tick(10.5)
    assert list(link.welcomes()) == ["a"] and gate.fixed is not None


def test_a_held_worker_whose_link_ends_is_never_welcomed() -> None:
    # Prepare
    gate = ScalerGate(NF, workers=2, wait=30.0, grace=0.0)
    coord, link = _coordinator(gate)
    _hello(coord, "gone", None, 0.0, nonce=8)
    # Execute
    bye = wire.encode_bye(JOB, "gone", 8, "lost")  # its last will
    coord.handle(wire.topic_up(JOB, "gone"), bye, 1.0)
    _hello(coord, "a", _moments(_data(1, 30)), 2.0)
    _hello(coord, "b", _moments(_data(2, 30)), 3.0)
    # Assert
    assert sorted(link.welcomes()) == ["a", "b"]
    assert sorted(coord.server.stats()) == ["a", "b"]


def test_moments_of_another_feature_count_never_crash_the_loop() -> None:
    # Prepare
    gate = ScalerGate(NF, workers=1, wait=1.0)
    coord, link = _coordinator(gate)
    # Execute
    _hello(coord, "odd", _moments(np.ones((6, NF + 2))), 0.0)
    coord.tick(5.0)
    # Assert
    assert link.welcomes() == {}
    assert coord.record(5.0)["scaler"]["refused"] == {"odd": {"moments_features": 1}}


def test_without_a_gate_the_welcome_comes_at_once() -> None:
    coord, link = _coordinator(None)
    _hello(coord, "a", _moments(_data(1, 30)), 0.0)
    assert list(link.welcomes()) == ["a"]
    assert "scaler" not in coord.record(1.0)


def _csv(path: Path, X: np.ndarray, y: np.ndarray) -> Path:
    names = ("no", "yes")
    lines = ["f0,f1,f2,f3,label"]
    lines += [
        ",".join([*(f"{v:.9g}" for v in row), names[int(t)]])
        for row, t in zip(X, y, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def test_csv(tmp_path: Path) -> Path:
    X = _data(3, 40)
    return _csv(tmp_path / "test.csv", X, (X[:, 0] > 5.0).astype(int))


def test_the_job_waits_for_its_scaler_and_scales_its_test_rows_once(
    test_csv: Path,
) -> None:
    # Prepare
    cfg = merge({"test_data": str(test_csv), "scaler_from": "workers", "max_time": 5.0})
    model = load_model(cfg)
    raw = model.X_test.copy()
    gate = scaler_gate(cfg, model)
    assert gate is not None and model.card is not None
    assert model.card.scaler is None
    # Execute
    gate.hold(Join("a"), _moments(_data(4, 100)), 0.0)
    gate.hold(Join("b"), _moments(_data(5, 1)), 0.0)
    gate.admit(gate.grace)  # the K-th moments and then the grace
    # Assert
    assert model.card is not None and model.card.scaler is gate.fixed
    # each worker's rows count at most twice the lower median: 2 + 1
    assert gate.fixed is not None and gate.fixed.n == 3
    np.testing.assert_allclose(
        model.X_test, gate.fixed.transform(raw), rtol=1e-6, atol=1e-6
    )
    assert not model.awaits_scaler
    with pytest.raises(ValueError, match="fixed already"):
        model.fix_scaler(gate.fixed)


def test_jobs_that_do_not_ask_wait_for_nothing(test_csv: Path) -> None:
    model = load_model(ServeConfig(test_data=str(test_csv)))
    assert not model.awaits_scaler
    assert scaler_gate(ServeConfig(test_data=str(test_csv)), model) is None


def test_a_resumed_job_takes_its_checkpoints_scaler_without_waiting(
    test_csv: Path, tmp_path: Path
) -> None:
    # Prepare
    scaler = Scaler.fit(_data(6, 70))
    card = ModelCard(SPEC, ("no", "yes"), scaler)
    ckpt = tmp_path / "job.npz"
    meta = {**card.to_dict(), "job": "default"}
    save_checkpoint(ckpt, Checkpoint(SPEC.init_params(1), 12, meta=meta))
    cfg = ServeConfig(test_data=str(test_csv), scaler_from="workers", resume=str(ckpt))
    # Execute
    model = load_model(cfg)
    server, _ = build_server(cfg, model)
    # Assert
    assert not model.awaits_scaler and scaler_gate(cfg, model) is None
    assert model.card is not None and model.card.scaler is not None
    assert model.card.scaler.n == 70 and server.version == 12


def test_resuming_a_trained_checkpoint_without_a_scaler_is_refused(
    test_csv: Path, tmp_path: Path
) -> None:
    card = ModelCard(SPEC, ("no", "yes"), None)
    ckpt = tmp_path / "raw.npz"
    save_checkpoint(ckpt, Checkpoint(SPEC.init_params(1), 3, meta=card.to_dict()))
    cfg = ServeConfig(test_data=str(test_csv), scaler_from="workers", resume=str(ckpt))
    with pytest.raises(ValueError, match="without a feature scaler"):
        load_model(cfg)


def test_scaler_from_workers_contradicts_no_scale(test_csv: Path) -> None:
    cfg = ServeConfig(test_data=str(test_csv), scaler_from="workers", scale=False)
    with pytest.raises(ValueError, match="contradict"):
        load_model(cfg)


def test_the_wait_flags_go_with_scaler_from_workers(test_csv: Path) -> None:
    cfg = merge({"test_data": str(test_csv), "max_time": 5.0})
    assert cfg.scaler_from is None  # no such file is looked for, nothing waits
    ok = merge({"scaler_from": "workers", "scaler_workers": 3, "max_time": 5.0})
    assert (ok.scaler_workers, ok.scaler_wait) == (3, 30.0)
    with pytest.raises(ValueError, match="--scaler-wait goes with --scaler-from"):
        merge({"scaler_wait": 5.0, "max_time": 5.0})
