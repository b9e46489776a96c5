"""`edgeps demo`: one command, embedded broker, ends by itself with a summary."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from edgeps.transport.broker import amqtt_available


@pytest.mark.integration
def test_demo_trains_to_target_on_the_embedded_broker() -> None:
    if not amqtt_available():
        pytest.skip("amqtt (the demo extra) is not installed")

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgeps",
            "demo",
            "--workers",
            "4",
            "--target-accuracy",
            "0.8",
            "--max-time",
            "100",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert "amqtt broker" in done.stderr
    assert summary["stop_reason"] == "target_accuracy"
    assert summary["accuracy"] >= 0.8
    assert summary["policy"].startswith("dsp")
    assert sorted(summary["workers"]) == ["w00", "w01", "w02", "w03"]
    profiles = [w["profile"] for w in summary["workers"].values()]
    assert any(p.startswith("straggler") for p in profiles)


def test_demo_rejects_bad_arguments() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "edgeps", "demo", "--workers", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert "--workers" in done.stderr


@pytest.mark.integration
def test_demo_on_a_taken_dashboard_port_is_one_line_and_exit_2(mosquitto, capsys):
    import socket

    from edgeps.cli import main

    # Prepare: something already listens on the dashboard's port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # Execute
        code = main(["demo", "--broker", f"mqtt://127.0.0.1:{mosquitto.port}",
                     "--dashboard", f"127.0.0.1:{port}", "--workers", "2",
                     "--max-time", "5"])  # fmt: skip
    # Assert
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.strip()]
    assert line.startswith(f"edgeps demo: error: --dashboard 127.0.0.1:{port}: ")
    assert "cannot listen" in line


def _finished_run(publish_dropped: int) -> object:
    from edgeps.runtime.summary import Summary

    return Summary(
        policy="dsp", stop_reason="target_accuracy", elapsed=12.5, version=40,
        accuracy=0.94, updates=40, updates_per_s=3.2, max_staleness=2,
        workers={"w00": {"accepted": 20, "clock": 20, "state": "live"},
                 "w01": {"accepted": 20, "clock": 20, "state": "live"}},
        broker={"sys": "ok", "publish_dropped": publish_dropped,
                "store_messages": 0, "inbox_full": 0},
        releases={"rounds": 30, "multi_rounds": 0, "shared_rounds": 0,
                  "code": "f32", "bytes_per_multi_round": 0.0},
    )  # fmt: skip


def test_the_demo_summary_leaves_the_operators_lines_out_unless_non_zero() -> None:
    from edgeps.runtime.summary import summary_table

    # Execute
    serve_text = summary_table(_finished_run(0))  # type: ignore[arg-type]
    demo_text = summary_table(_finished_run(0), operator=False)  # type: ignore[arg-type]
    dropped = summary_table(_finished_run(3), operator=False)  # type: ignore[arg-type]
    # Assert: serve keeps them, the demo shows what a user needs
    assert "bytes published per release" in serve_text and "broker:" in serve_text
    assert "bytes published per release" not in demo_text
    assert "broker:" not in demo_text and "$SYS" not in demo_text
    assert "accuracy 0.9400" in demo_text and "elapsed 12.5s" in demo_text
    assert "updates 40" in demo_text and "w00" in demo_text and "w01" in demo_text
    assert "dropped 3 publishes" in dropped


def test_the_demo_ends_on_the_next_steps() -> None:
    from edgeps.commands.demo import NEXT_STEPS

    assert NEXT_STEPS.startswith("next: ")
    for needed in ("edgeps serve", "edgeps worker", "--data", "--dashboard",
                   "host/README.md"):  # fmt: skip
        assert needed in NEXT_STEPS


def test_the_broker_line_never_says_none_for_a_counter_not_published() -> None:
    import dataclasses

    from edgeps.runtime.summary import summary_table

    # Prepare: an external broker that published $SYS, but not these counters
    base = _finished_run(0)
    lines = {}
    for name, dropped, held in (("neither", None, None), ("one", None, 4)):
        broker = dict(base.broker, publish_dropped=dropped, store_messages=held)
        run = dataclasses.replace(base, broker=broker)
        # Execute
        lines[name] = next(
            ln for ln in summary_table(run).splitlines() if ln.startswith("broker:")
        )  # type: ignore[arg-type]
    # Assert
    assert "None" not in lines["neither"] + lines["one"]
    assert "no drop/queue counters" in lines["neither"]
    assert "dropped publishes unknown, holds 4 messages" in lines["one"]
