"""`edgeps bench paper` at other worker counts: the recipe per N and the start gate."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from edgeps.lab.bench.paper import POLICIES, settings
from edgeps.lab.bench.paper_plan import (
    RECIPES,
    Recipe,
    recipe_for,
    step_lr,
    targets_at,
)
from edgeps.lab.bench.paper_start import (
    READY_MARK,
    join_spread,
    ready_count,
    rss_sum_kb,
    start_line,
    vm_rss_kb,
    wait_ready,
)  # fmt: skip
from edgeps.lab.bench.paper_table import PaperRun, header


def _args(**kw: object) -> argparse.Namespace:
    base = dict(policies=",".join(POLICIES), workers="3", seeds=1, targets=None,
                quick=False, dataset="mnist", stop_at=None, disturb="",
                eval_interval=None, model="lenet5", optimizer="sgd", lr=None,
                batch=256, max_time=None, sim_seeds=1)  # fmt: skip
    base.update(kw)
    return argparse.Namespace(**base)


def test_each_measured_worker_count_has_its_own_recipe() -> None:
    assert {3, 8, 32} <= set(RECIPES)
    assert recipe_for(3) == RECIPES[3]
    assert recipe_for(32) == RECIPES[32]
    # more workers: never a larger step per push, never less time
    lrs = [step_lr(RECIPES[n].lr, n) for n in sorted(RECIPES)]
    assert lrs == sorted(lrs, reverse=True)
    times = [RECIPES[n].max_time for n in sorted(RECIPES)]
    assert times == sorted(times)


def test_a_count_between_the_measured_ones_scales_the_smaller_ones_lr() -> None:
    # 16 workers: 8's recipe, its lr x 8 / 16; 2 workers: 3's recipe as it is
    assert recipe_for(16) == Recipe(
        RECIPES[8].lr / 2, RECIPES[8].max_time, RECIPES[8].targets
    )
    assert recipe_for(2) == RECIPES[3]
    assert recipe_for(64).lr == pytest.approx(RECIPES[32].lr / 2)


def test_lr_and_max_time_given_override_the_recipe() -> None:
    assert recipe_for(8, lr=0.1).lr == 0.1
    assert recipe_for(8, max_time=5.0).max_time == 5.0
    with pytest.raises(ValueError, match="--workers"):
        recipe_for(1)


def test_a_push_steps_by_serves_scaled_lr_past_16_workers() -> None:
    assert step_lr(0.02, 8) == pytest.approx(0.02)
    assert step_lr(0.01, 32) == pytest.approx(0.005)


def test_the_header_names_the_recipe_and_the_step_of_a_push() -> None:
    # Arrange
    args = _args(workers="32")
    s = settings(args)

    # Execute
    text = header(args, s, "32", {"runs": [], "lr": 0.01, "max_time": 120.0})
    given = header(_args(lr=0.03), s, "8", {"runs": [], "lr": 0.03,
                                             "max_time": 60.0})  # fmt: skip

    # Assert
    assert "lr 0.01 (each push 0.005" in text and "the recipe for 32 workers" in text
    assert "or 120 s" in text
    assert "lr 0.03, batch 256 (--lr)" in given


def test_ready_counts_the_workers_whose_log_says_their_data_is_in(
    tmp_path: Path,
) -> None:
    # Arrange: one loaded, one still importing, one file missing
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(f"INFO worker w00: 500 {READY_MARK} mnist\n")
    b.write_text("")

    # Execute / Assert
    assert ready_count([a, b, tmp_path / "none.log"]) == 1
    ready, waited = wait_ready([a], alive=lambda: 1, timeout=5.0, poll=0.01)
    assert ready == 1 and waited < 5.0


def test_waiting_stops_when_a_worker_died_or_the_time_is_up(tmp_path: Path) -> None:
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    assert wait_ready(logs, alive=lambda: 1, timeout=5.0, poll=0.01)[0] == 0
    ready, waited = wait_ready(logs, alive=lambda: 2, timeout=0.05, poll=0.01)
    assert ready == 0 and waited >= 0.05


def test_resident_memory_is_read_from_proc_status() -> None:
    assert vm_rss_kb("Name:\tpython\nVmRSS:\t  81234 kB\nThreads: 3\n") == 81234
    assert vm_rss_kb("Name:\tkthread\n") is None
    # this process is resident; a pid that is gone counts nothing
    assert rss_sum_kb([os.getpid()]) > 1000
    assert rss_sum_kb([2**22 + 7]) == 0


def test_the_join_spread_is_first_to_nth_hello() -> None:
    hellos = {"w00": 10.0, "w02": 10.4, "w01": 10.1}
    assert join_spread(hellos, 3) == pytest.approx(0.4)
    assert join_spread(hellos, 4) is None


def test_the_start_line_reports_load_spread_and_memory() -> None:
    # Arrange
    a = PaperRun("bsp", 0, load_s=12.0, join_spread_s=0.3, rss_mb=2900.0)
    b = PaperRun("asp", 0, load_s=14.5, join_spread_s=0.6, rss_mb=3100.0)

    # Execute
    line = start_line([a, b], 32)

    # Assert
    assert line is not None
    assert "loaded their data in 12.0-14.5 s" in line
    assert "within 0.60 s of the first" in line and "up to 3100 MB" in line
    assert start_line([PaperRun("bsp", 0)], 3) is None


def test_the_recipes_targets_replace_mnists_unless_targets_were_given() -> None:
    # Arrange
    r8 = Recipe(0.02, 75.0, (0.95, 0.9))

    # Execute / Assert: sorted, the run stops at the highest
    assert targets_at(r8, "mnist", [0.95, 0.97], 0.95, False) == ([0.9, 0.95], 0.95)
    assert targets_at(r8, "mnist", [0.95, 0.97], 0.95, True) == ([0.95, 0.97], 0.95)
    assert targets_at(r8, "fashion-mnist", [0.8, 0.85], 0.85, False) == (
        [0.8, 0.85],
        0.85,
    )
    assert targets_at(RECIPES[3], "mnist", [0.95, 0.97], 0.95, False) == (
        [0.95, 0.97],
        0.95,
    )
