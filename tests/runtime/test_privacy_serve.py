"""Serve with differential privacy: config, flags, metrics records, summary, budget."""

from __future__ import annotations

import json
import queue
from pathlib import Path

import numpy as np
import pytest
from edgeps.cli import build_parser
from edgeps.core import ParameterServer
from edgeps.core.defaults import JOB as DEFAULTS
from edgeps.core.privacy import DPMechanism
from edgeps.observe.prometheus import privacy_epsilon
from edgeps.policy import parse_policy
from edgeps.runtime.config import ServeConfig, merge
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps.runtime.job import serve_dp
from edgeps.runtime.summary import summary_dict, summary_table
from edgeps_worker import wire_host as wire

pytest.importorskip("dp_accounting")

JOB = "jp"
N = 20


class Link:
    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[str, bytes]] = queue.Queue()

    def get(self, timeout: float) -> tuple[str, bytes] | None:
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def get_nowait(self) -> tuple[str, bytes] | None:
        return self.get(0.0)

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False):
        return None


def _coordinator(**kw: object) -> tuple[Coordinator, Link]:
    server = ParameterServer(
        np.zeros(N, np.float32),
        policy=parse_policy("asp"),
        dp=DPMechanism(1.0, 1.0, seed=0),
    )
    link = Link()
    settings = Settings(job=JOB, model=f"linear:{N - 1}", **kw)  # type: ignore[arg-type]
    return Coordinator(server, link, settings, policy_name="asp"), link


def _fill(link: Link, coord: Coordinator, n: int) -> None:
    up = wire.topic_up(JOB, "w1")
    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1), 0.0)
    session = coord.peers.get("w1").session
    grad = np.full(N, 0.5, dtype="<f4").tobytes()
    for seq in range(1, n + 1):
        for part in wire.encode_update(
            JOB, "w1", session, seq, seq, seq - 1, 0.0, 8, 0.1, grad
        ):
            link.inbox.put((up, part))


def test_records_and_the_summary_carry_the_spent_budget(tmp_path: Path) -> None:
    from edgeps.observe.metrics import MetricsWriter

    coord, link = _coordinator(max_updates=5, max_time=30.0, dp_delta=1e-6)
    out = tmp_path / "m.jsonl"
    coord.metrics = MetricsWriter(out)
    _fill(link, coord, 5)
    summary = coord.run()
    coord.metrics.close()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    p = records[-1]["privacy"]
    assert (p["delta"], p["sigma"], p["clip"], p["steps"]) == (1e-6, 1.0, 1.0, 5)
    assert p["epsilon"] > 0 and privacy_epsilon(records[-1]) == p["epsilon"]
    assert summary_dict(summary)["privacy"] == p
    assert "privacy (central): epsilon" in summary_table(summary)


def test_the_budget_stops_the_job() -> None:
    coord, link = _coordinator(max_time=30.0, dp_epsilon_budget=50.0)
    _fill(link, coord, 200)  # sigma 1 at q = 1: past 50 within a few updates
    summary = coord.run()
    assert summary.stop_reason == "privacy_budget"
    # it stops at the last update within the budget: one more would pass it
    assert summary.privacy["epsilon"] <= 50.0 and 0 < summary.updates < 200
    from edgeps.observe.privacy import epsilon

    assert epsilon(0.5, {1.0: summary.updates + 1}, 1e-5) > 50.0


def test_a_budget_that_allows_no_update_is_refused() -> None:
    with pytest.raises(ValueError, match="allows no update"):
        _coordinator(max_time=30.0, dp_epsilon_budget=1.0)


def test_without_dp_there_is_no_privacy_field() -> None:
    server = ParameterServer(np.zeros(N, np.float32), policy=parse_policy("asp"))
    coord = Coordinator(server, Link(), Settings(job=JOB, model="m"), policy_name="a")
    assert coord.privacy is None and "privacy" not in coord.record(0.0)


def test_the_flags_reach_the_config_and_the_mechanism() -> None:
    args = build_parser("serve").parse_args(
        ["serve", "--dp", "local", "--dp-clip", "2", "--dp-noise", "0.8",
         "--dp-delta", "1e-6", "--dp-epsilon-budget", "4"]
    )  # fmt: skip
    from edgeps.commands.serve import given

    cfg = merge(given(args))
    assert (cfg.dp, cfg.dp_clip, cfg.dp_noise) == ("local", 2.0, 0.8)
    assert (cfg.dp_delta, cfg.dp_epsilon_budget) == (1e-6, 4.0)
    mech = serve_dp(cfg)
    assert mech is not None and (mech.mode, mech.clip, mech.noise) == ("local", 2, 0.8)
    assert serve_dp(ServeConfig()) is None


def test_the_defaults_are_off_and_the_job_defaults() -> None:
    cfg = ServeConfig()
    assert cfg.dp == DEFAULTS.dp == "off"
    assert (cfg.dp_clip, cfg.dp_noise, cfg.dp_delta) == (
        DEFAULTS.dp_clip,
        DEFAULTS.dp_noise,
        DEFAULTS.dp_delta,
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"dp": "yes"}, "--dp must be"),
        ({"dp_clip": 0.0}, "--dp-clip"),
        ({"dp_noise": -1.0}, "--dp-noise"),
        ({"dp_delta": 0.0}, "--dp-delta"),
        ({"dp_delta": 0.9}, "--dp-delta"),
        ({"dp_epsilon_budget": -1.0}, "--dp-epsilon-budget"),
    ],
)
def test_bad_settings_are_refused(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        merge({"max_time": 5.0, **flags})


def test_without_dp_accounting_serve_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(RuntimeError, match=r"pip install 'edgeps\[privacy\]'"):
        serve_dp(merge({"max_time": 5.0, "dp": "central"}))
