"""A second serve of one job: refused at start unless --takeover, reported loudly."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time

import pytest
from edgeps.runtime.other_serves import OtherServes, Presence, look
from edgeps.transport.options import ConnectionOptions
from edgeps_worker import wire_host as wire


def _model(run: int, state: str = "running") -> bytes:
    return bytes(wire.encode_model("lab", run, state, "mlp:4-8-3", 3, 67))


def test_a_running_serve_counts_the_model_of_another_run(caplog) -> None:
    # Prepare
    watch = OtherServes("lab", run=1, ignore={7})
    # Execute
    with caplog.at_level(logging.WARNING):
        for payload in (_model(1), _model(2), _model(7), _model(3, "done"), b"junk",
                        _model(2)):  # fmt: skip
            watch.feed(payload)
    # Assert: its own, a crashed run's, a finished run's and junk do not count
    assert watch.seen == 2 and watch.runs == {2}
    assert watch.topic == "edgeps/lab/model"
    assert "another edgeps serve (run 0000000000000002)" in caplog.text


def test_the_presence_is_a_model_running_of_this_run() -> None:
    presence = Presence("lab", 5, "mlp:4-8-3", 67)
    msg = wire.decode(presence.payload())
    assert presence.topic == "edgeps/lab/host"
    assert (msg.type, msg.run, msg.state) == (wire.MODEL, 5, "running")


def _serve(url: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", url, "--job", "twice",
         "--policy", "asp", "--quiet", "--target-accuracy", "0.999", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _wait_live(url: str, timeout: float = 30.0) -> int | None:
    options = ConnectionOptions(broker=url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = look(options, "twice")
        if found.live_run is not None:
            return found.live_run
        time.sleep(0.2)
    return None


@pytest.mark.integration
@pytest.mark.slow
def test_a_second_serve_is_refused_unless_it_takes_over(mosquitto) -> None:
    # Prepare: one serve runs the job
    first = _serve(mosquitto.url, "--max-time", "20")
    procs = [first]
    try:
        run = _wait_live(mosquitto.url)
        assert run is not None, "the first serve never announced itself"
        # Execute: a second one, then one that takes over
        refused = subprocess.run(
            [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
             "--job", "twice", "--max-time", "5", "--quiet"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        second = _serve(mosquitto.url, "--max-time", "3", "--takeover")
        procs.append(second)
        _, second_err = second.communicate(timeout=60)
        # the first has seen the takeover by now: it is asked to finish rather
        # than waited for to its --max-time
        first.send_signal(signal.SIGTERM)
        _, first_err = first.communicate(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    # Assert: refused in one line naming the way out
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("edgeps serve: error: job twice is already served")
    assert f"{run:016x}" in line and "--takeover" in line
    # the takeover runs, and both say loudly that the other one is there
    assert second.returncode == 0, second_err
    assert "taking over job twice" in second_err
    assert first.returncode == 0, first_err
    assert "another edgeps serve" in first_err
    assert "another serve's MODEL was seen" in first_err
    # both ended cleanly: nothing claims the job any more
    assert look(ConnectionOptions(broker=mosquitto.url), "twice").live_run is None


@pytest.mark.integration
def test_a_crashed_serve_does_not_block_the_next_one(mosquitto) -> None:
    # Prepare: a serve that dies without a word (its last will clears the presence)
    crashed = _serve(mosquitto.url, "--max-time", "60")
    try:
        assert _wait_live(mosquitto.url) is not None
        # Execute
        crashed.kill()
        crashed.wait(timeout=10)
        options = ConnectionOptions(broker=mosquitto.url)
        deadline = time.monotonic() + 20
        while look(options, "twice").live_run is not None:
            assert time.monotonic() < deadline, "the presence outlived the serve"
            time.sleep(0.2)
        after = subprocess.run(
            [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
             "--job", "twice", "--max-time", "2", "--quiet"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        if crashed.poll() is None:
            crashed.kill()
            crashed.wait(timeout=10)
    # Assert: it runs, and the crashed run's retained MODEL is no rival
    assert after.returncode == 0, after.stderr
    assert "another edgeps serve" not in after.stderr
