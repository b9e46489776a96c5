"""The accountant: epsilon as dp-accounting's RDP accountant computes it directly."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from edgeps.core.privacy import DPMechanism
from edgeps.observe.privacy import (
    INSTALL_HINT,
    PrivacyLedger,
    epsilon,
    make_ledger,
    privacy_line,
    require_accountant,
)
from edgeps.observe.prometheus import privacy_epsilon

dp_accounting = pytest.importorskip("dp_accounting")


def _direct(sigma: float, q: float, steps: int, delta: float) -> float:
    acc = dp_accounting.rdp.RdpAccountant()
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    acc.compose(event, steps)
    return float(acc.get_epsilon(delta))


@pytest.mark.parametrize(
    ("sigma", "q", "steps"), [(1.0, 0.01, 1000), (0.7, 0.064, 300), (2.0, 1.0, 50)]
)
def test_epsilon_is_the_rdp_accountants(sigma: float, q: float, steps: int) -> None:
    assert epsilon(sigma, {q: steps}, 1e-5) == pytest.approx(
        _direct(sigma, q, steps, 1e-5), rel=1e-9
    )


def test_several_rates_compose() -> None:
    acc = dp_accounting.rdp.RdpAccountant()
    gauss = dp_accounting.GaussianDpEvent(1.1)
    acc.compose(dp_accounting.PoissonSampledDpEvent(0.02, gauss), 200)
    acc.compose(gauss, 10)
    want = float(acc.get_epsilon(1e-6))
    assert epsilon(1.1, {0.02: 200, 1.0: 10}, 1e-6) == pytest.approx(want, rel=1e-9)


def test_no_update_is_no_loss_and_no_noise_is_no_privacy() -> None:
    assert epsilon(1.0, {}, 1e-5) == 0.0
    assert epsilon(0.0, {0.1: 5}, 1e-5) == math.inf
    with pytest.raises(ValueError):
        epsilon(1.0, {1.0: 1}, 0.0)


def test_more_steps_or_less_noise_spend_more() -> None:
    assert epsilon(1.0, {0.05: 100}, 1e-5) < epsilon(1.0, {0.05: 200}, 1e-5)
    assert epsilon(2.0, {0.05: 100}, 1e-5) < epsilon(1.0, {0.05: 100}, 1e-5)


def test_the_ledger_reports_every_field_and_the_budget() -> None:
    mech = DPMechanism(0.5, 1.0, rates={"a": 0.1, "b": 0.1})
    g = np.ones(4, np.float32)
    for wid in ("a", "b", "a"):
        mech.apply(g, wid)
    ledger = PrivacyLedger(1e-5, budget=1e-3)
    rep = ledger.report(mech)
    assert set(rep) >= {"epsilon", "delta", "sigma", "clip", "steps"}
    assert (rep["delta"], rep["sigma"], rep["clip"], rep["steps"]) == (
        1e-5,
        1.0,
        0.5,
        3,
    )
    # one record moves a clipped update by up to 2C: sigma C is worth sigma / 2
    assert rep["epsilon"] == pytest.approx(_direct(0.5, 0.1, 3, 1e-5), rel=1e-9)
    # per shard: only the busiest worker's two updates
    assert rep["epsilon_per_shard"] == pytest.approx(_direct(0.5, 0.1, 2, 1e-5))
    assert ledger.spent(mech) and not PrivacyLedger(1e-5).spent(mech)
    assert "epsilon" in privacy_line(rep) and "budget 0.001" in privacy_line(rep)
    assert privacy_epsilon({"privacy": rep}) == rep["epsilon"]
    assert privacy_epsilon({"privacy": {**rep, "epsilon": None}}) == math.inf
    assert privacy_epsilon({}) is None


def test_off_has_no_ledger() -> None:
    assert make_ledger("off", 1e-5, 0.0) is None
    assert make_ledger("central", 1e-5, 0.0).budget is None  # type: ignore[union-attr]
    assert make_ledger("local", 1e-5, 3.0).budget == 3.0  # type: ignore[union-attr]


def test_without_dp_accounting_one_line_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "dp_accounting", None)  # import fails
    with pytest.raises(RuntimeError) as err:
        require_accountant()
    assert str(err.value) == INSTALL_HINT
    assert "pip install 'edgeps[privacy]'" in INSTALL_HINT and "\n" not in INSTALL_HINT
    with pytest.raises(RuntimeError, match="edgeps\\[privacy\\]"):
        epsilon(1.0, {1.0: 1}, 1e-5)
