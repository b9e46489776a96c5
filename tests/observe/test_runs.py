"""Metrics files read back, and the per-worker timeline derived from snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from edgeps.observe.runs import load_run, load_runs, share, staleness_counts, timeline


def _w(accepted: int, *, waiting: bool = False, state: str = "live", **kw) -> dict:
    row = {"accepted": accepted, "waiting": waiting, "state": state}
    row.update(kw)
    return row


def _rec(elapsed: float, **workers: dict) -> dict:
    return {"elapsed": elapsed, "workers": workers}


TIMED = {"compute_s": 0.075, "comm_s": 0.025}  # 0.1 s per iteration


def test_pushes_in_an_interval_are_work_and_the_rest_is_held() -> None:
    # Prepare: 4 pushes of 0.1 s in a 1 s interval
    records = [_rec(0.0, w=_w(0)), _rec(1.0, w=_w(4, waiting=True, **TIMED))]

    # Execute
    segs = timeline(records).workers["w"]

    # Assert: 0.3 s computing, 0.1 s communicating, 0.6 s held, in that order
    assert [s.kind for s in segs] == ["computing", "communicating", "held"]
    assert [round(s.duration, 6) for s in segs] == [0.3, 0.1, 0.6]
    assert segs[1].start == pytest.approx(0.3) and segs[2].start == pytest.approx(0.4)


def test_a_long_iteration_fills_the_interval_and_dead_is_dead() -> None:
    records = [
        _rec(0.0, slow=_w(0, **TIMED), gone=_w(3, **TIMED)),
        _rec(2.0, slow=_w(0, **TIMED), gone=_w(3, state="dead", **TIMED)),
    ]

    tl = timeline(records)

    assert share(tl, "slow")["computing"] == pytest.approx(0.75)
    assert share(tl, "slow")["held"] == 0.0
    assert [(s.kind, s.duration) for s in tl.workers["gone"]] == [("dead", 2.0)]


def test_held_at_both_ends_without_a_push_is_held_throughout() -> None:
    records = [_rec(0.0, w=_w(5, waiting=True)), _rec(1.0, w=_w(5, waiting=True))]

    assert share(timeline(records), "w")["held"] == 1.0


def test_more_pushes_than_fit_are_capped_at_the_interval() -> None:
    records = [_rec(0.0, w=_w(0)), _rec(0.5, w=_w(9, **TIMED))]

    segs = timeline(records).workers["w"]

    assert sum(s.duration for s in segs) == pytest.approx(0.5)
    assert "held" not in {s.kind for s in segs}


def test_files_without_timings_still_draw_as_busy() -> None:
    records = [_rec(0.0, w=_w(0)), _rec(1.0, w=_w(2))]

    assert share(timeline(records), "w")["busy"] == 1.0


def test_load_run_labels_by_policy_and_skips_broken_lines(tmp_path: Path) -> None:
    # Prepare: two snapshots, then a line cut off by a crash and a stray object
    path = tmp_path / "run.jsonl"
    recs = [
        {"elapsed": 1.0, "policy": "dsp", "workers": {}, "staleness_counts": {}},
        {
            "elapsed": 2.0,
            "policy": "dsp",
            "workers": {},
            "staleness_counts": {"10": 1, "2": 5},
        },
    ]
    path.write_text(
        "".join(json.dumps(r) + "\n" for r in recs) + '{"elapsed": 3.0, "wor\n[1]\n'
    )

    # Execute
    run = load_run(path)

    # Assert
    assert run.label == "dsp" and len(run.records) == 2 and run.skipped == 2
    assert staleness_counts(run) == {2: 5, 10: 1}
    assert list(staleness_counts(run)) == [2, 10]  # numeric order, not text order


def test_two_runs_of_one_policy_get_their_file_names(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_text(
            json.dumps({"elapsed": 1.0, "policy": "bsp", "workers": {}}) + "\n"
        )

    runs = load_runs([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")])

    assert [r.label for r in runs] == ["bsp (a)", "bsp (b)"]


def test_a_file_with_no_snapshot_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("not json\n")

    with pytest.raises(ValueError, match="no metrics snapshots"):
        load_run(path)
    with pytest.raises(FileNotFoundError):
        load_run(tmp_path / "missing.jsonl")


def test_runs_appended_to_one_file_come_apart(tmp_path: Path) -> None:
    # Prepare: two runs of serve --metrics-out into one file, then a third
    # whose clock had not gone back but whose run id is another
    path = tmp_path / "m.jsonl"
    snaps = [(0.5, "dsp", None), (1.5, "dsp", None), (2.5, "dsp", None),
             (0.4, "bsp", None), (1.4, "bsp", None),
             (1.9, "bsp", 7), (2.9, "bsp", 7)]  # fmt: skip
    path.write_text(
        "".join(
            json.dumps({"elapsed": t, "policy": pol, "workers": {}, "run": run}) + "\n"
            for t, pol, run in snaps
        )
    )
    # Execute
    runs = load_runs([str(path)])
    # Assert: three lines, each going forward in time, each with its own label
    assert [len(r.records) for r in runs] == [3, 2, 2]
    for r in runs:
        xs, _ = r.series("elapsed")
        assert xs == sorted(xs)
    assert [r.label for r in runs] == [
        "dsp (run 1 of m.jsonl)", "bsp (run 2 of m.jsonl)", "bsp (run 3 of m.jsonl)"
    ]  # fmt: skip
    assert load_run(path).records == runs[0].records
