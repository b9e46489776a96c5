"""The matrix's local-steps dimension: row names, configs, DSP's peers."""

from __future__ import annotations

import pytest
from edgeps.lab.matrix.grid import POLICIES, Cell, config, row_name, split_row
from edgeps.lab.matrix.report import per_gradient


def test_a_row_names_its_policy_and_local_steps() -> None:
    assert row_name("fedavg", 1) == "fedavg"
    assert row_name("fedbuff:k=8", 8) == "fedbuff:k=8/h8"
    assert split_row("fedbuff:k=8/h8") == ("fedbuff:k=8", 8)
    assert split_row("dsp:w=2") == ("dsp:w=2", 1)
    with pytest.raises(ValueError):
        split_row("asp/h0")


def test_a_row_runs_its_local_steps() -> None:
    cfg = config(Cell("sensors", 8, "mixed", False), "fedavg/h4", 0, 10.0)
    assert (cfg.policy, cfg.local_steps) == ("fedavg", 4)


def test_the_matrix_has_federated_rows_and_dsp_is_held_to_its_peers() -> None:
    assert {"fedavg", "fedbuff:k=8", "fedasync:a=0.6"} <= set(POLICIES)
    assert per_gradient("bsp") and per_gradient("dsp")
    assert not per_gradient("asp/h8")
    assert not per_gradient("fedbuff:k=8")
