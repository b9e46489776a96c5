"""tools/peers/peer_table.py: medians, speed-ups and the goals of the side by side."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.helpers.peers import load_peer


@pytest.fixture(scope="module")
def pt() -> ModuleType:
    return load_peer("peers_peer_table", "peer_table.py")


def _runs(pt: ModuleType, side: str, row: str, times: list[float | None]) -> list:
    return [
        pt.PeerRun(side, row, "stragglers", seed, t, 0.91 if t else 0.85)
        for seed, t in enumerate(times)
    ]


def test_a_missed_target_counts_as_slower_than_any_reached(pt: ModuleType) -> None:
    assert pt.median_time([3.0, None, 5.0]) == 5.0
    assert pt.median_time([3.0, None, None]) is None
    assert pt.median_time([]) is None


def test_speedup_is_peer_seconds_over_ours(pt: ModuleType) -> None:
    assert pt.speedup(12.0, 4.0) == 3.0
    assert pt.speedup(None, 4.0) is None
    assert pt.speedup(12.0, None) is None


def test_rows_name_their_local_steps(pt: ModuleType) -> None:
    assert pt.local_steps("fedavg/h8") == 8
    assert pt.local_steps("fedbuff:k=4/h8") == 8
    assert pt.local_steps("dsp") == 1
    assert pt.local_steps("FedAvg/h1") == 1


def test_equal_compares_same_h_and_best_compares_best_rows(pt: ModuleType) -> None:
    # Prepare: Flower at H=8 and H=1, edgeps' fedavg at H=8 and two more rows
    runs = [
        *_runs(pt, "flower", "FedAvg/h8", [9.0, 10.0, 11.0]),
        *_runs(pt, "flower", "FedAvg/h1", [8.0, 8.0, 30.0]),
        *_runs(pt, "edgeps", "fedavg/h8", [7.5, 8.0, None]),
        *_runs(pt, "edgeps", "fedbuff:k=4/h8", [3.0, 4.0, 5.0]),
        *_runs(pt, "edgeps", "dsp", [2.0, 2.5, 40.0]),
    ]

    # Execute
    (c,) = pt.compare(runs, ["stragglers"])
    d = c.to_dict()

    # Assert: fedavg/h8 (median 8.0) against FedAvg/h8 (10.0); dsp (2.5) against
    # Flower's best, FedAvg/h1 (8.0), not against the slower FedAvg/h8
    assert d["equal_row"] == "fedavg/h8" and d["peer_equal_row"] == "FedAvg/h8"
    assert d["speedup_equal"] == pytest.approx(10.0 / 8.0)
    assert d["met_equal"] is True
    assert d["best_row"] == "dsp" and d["peer_best_row"] == "FedAvg/h1"
    assert d["speedup_best"] == pytest.approx(8.0 / 2.5)
    assert d["met_best"] is True


def test_goals_not_met_are_reported_not_hidden(pt: ModuleType) -> None:
    runs = [
        *_runs(pt, "flower", "FedAvg/h8", [8.4, 8.5, 8.6]),
        *_runs(pt, "edgeps", "fedavg/h8", [8.0, 8.1, 8.2]),
    ]
    (c,) = pt.compare(runs, ["stragglers"])
    d = c.to_dict()
    assert d["speedup_equal"] == pytest.approx(8.5 / 8.1)
    assert d["met_equal"] is False
    lines = pt.goal_lines([c])
    assert any("same algorithm" in line and "NOT met" in line for line in lines)


def test_failed_runs_are_counted_apart_from_the_median(pt: ModuleType) -> None:
    runs = _runs(pt, "edgeps", "dsp", [2.0, 3.0])
    runs.append(pt.PeerRun("edgeps", "dsp", "stragglers", 9, error="serve exited 2"))
    (c,) = pt.compare(runs, ["stragglers"])
    (row,) = c.ours
    assert row.time == 2.5 and len(row.failures) == 1
    assert "(1 failed)" in pt.table([c])


def test_table_marks_best_rows_and_shows_speedups(pt: ModuleType) -> None:
    runs = [
        *_runs(pt, "flower", "FedAvg/h8", [12.0]),
        *_runs(pt, "edgeps", "fedavg/h8", [10.0]),
        *_runs(pt, "edgeps", "dsp", [4.0]),
    ]
    text = pt.table(pt.compare(runs, ["stragglers"]))
    assert "| stragglers | flower | FedAvg/h8 * | 12.0 |" in text
    assert (
        "| stragglers | edgeps | dsp * | 4.0 | 0.910 | 1/1 | - | 3.00x vs best |"
        in text
    )
    assert "1.20x vs same H" in text


def test_same_algorithm_prefers_fedavg_with_mcmahans_mean(pt: ModuleType) -> None:
    # Prepare: edgeps' default fedavg (a trimmed mean) listed first
    runs = [
        *_runs(pt, "flower", "FedAvg/h8", [20.0]),
        *_runs(pt, "edgeps", "fedavg/h8", [40.0]),
        *_runs(pt, "edgeps", "fedavg:agg=mean/h8", [10.0]),
    ]

    # Act
    (c,) = pt.compare(runs, ["stragglers"])

    # Assert: the mean is the peer's algorithm; the trimmed mean a row of its own
    assert c.equal().row == "fedavg:agg=mean/h8"
    assert c.speedups()["equal"] == 2.0
    (only,) = pt.compare(runs[:2], ["stragglers"])
    assert only.equal().row == "fedavg/h8"


def test_a_row_may_carry_its_own_lr(pt: ModuleType) -> None:
    assert pt.split_lr("dsp") == ("dsp", None)
    assert pt.split_lr("dsp@lr=0.02") == ("dsp", 0.02)
    assert pt.split_lr("fedbuff:k=4/h8@lr=0.1") == ("fedbuff:k=4/h8", 0.1)
    assert pt.local_steps("fedbuff:k=4/h8@lr=0.1") == 8
    for bad in ("dsp@lr=0", "dsp@lr=x", "dsp@mom=0.9", "@lr=0.1", "dsp@lr=nan"):
        with pytest.raises(ValueError, match="bad row"):
            pt.split_lr(bad)


def test_bytes_per_worker_is_the_median_of_the_runs_that_counted_them(
    pt: ModuleType,
) -> None:
    # Prepare: three seeds, one of them without a byte count (a failed sniffer)
    runs = _runs(pt, "edgeps", "dsp", [4.0, 5.0, 6.0])
    for r, b in zip(runs, (1.0e6, None, 3.0e6), strict=True):
        r.bytes_per_worker = b

    # Act
    (c,) = pt.compare(runs, ["stragglers"])

    # Assert: the median of the two counted, in MB in the table
    assert c.ours[0].bytes_per_worker == 2.0e6
    assert c.to_dict()["edgeps"][0]["bytes_per_worker"] == 2.0e6
    assert "| 3/3 | 2.00 |" in pt.table([c])


def test_a_scenario_without_runs_has_no_speedups(pt: ModuleType) -> None:
    (c,) = pt.compare([], ["homogeneous"])
    d = c.to_dict()
    assert d["speedup_equal"] is None and d["speedup_best"] is None
    assert d["met_equal"] is False and d["met_best"] is False


def test_runs_from_an_earlier_output_take_one_side_where_asked(
    pt: ModuleType,
) -> None:
    # Prepare: what `compare.py --json` printed, one field more than a run has
    data = {
        "runs": [
            {"side": "flower", "row": "FedAvg/h8", "scenario": "stragglers",
             "seed": 0, "time_to_target": 33.2, "final_accuracy": 0.91,
             "rounds": 10, "error": "", "extra": 1},
            {"side": "flower", "row": "FedAvg/h8", "scenario": "stragglers",
             "seed": 5, "time_to_target": 30.0},
            {"side": "edgeps", "row": "dsp", "scenario": "stragglers", "seed": 0},
        ]
    }  # fmt: skip

    # Execute
    runs = pt.runs_from(data, "flower", ["stragglers"], [0, 1, 2])

    # Assert
    assert [(r.row, r.seed, r.time_to_target, r.rounds) for r in runs] == [
        ("FedAvg/h8", 0, 33.2, 10)
    ]
