"""A forged retained MODEL "done" stops no worker (a real mosquitto without ACLs).

Observed before: an unsigned MODEL "done" with the run id copied from the
host's replaced the retained one; a worker started afterwards exited at once
and serve did not republish until its link dropped.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from edgeps.pyworker.model_fetch import fetch_model
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink
from edgeps_worker import wire_host as wire

from tests.conftest import REPO
from tests.e2e.test_hostile_clients import JOB, Run, wait_until

pytestmark = pytest.mark.integration


def retained_model(broker: Any) -> wire.Message | None:
    """The retained MODEL a new subscriber reads first (None within 5 s)."""
    got: list[bytes] = []
    heard = threading.Event()

    def on_message(client: Any, userdata: Any, message: Any) -> None:
        got.append(bytes(message.payload))
        heard.set()

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    client.on_message = on_message
    client.connect(broker.host, broker.port)
    client.subscribe(wire.topic_model(JOB), qos=1)
    client.loop_start()
    try:
        heard.wait(5.0)
    finally:
        client.loop_stop()
        client.disconnect()
    return wire.decode(got[0]) if got else None


@pytest.mark.slow
def test_serve_puts_its_model_back_over_a_forged_done(mosquitto: Any) -> None:
    # Prepare: a job runs with two sensors
    run = Run(mosquitto, "bsp", 2)
    try:
        assert wait_until(lambda: run.accepted("w00") >= 2 or run.accepted("w01") >= 2)
        run_id = run.coord.run_id
        forged = wire.encode_model(JOB, run_id, "done", "", 0, 0)
        # Execute: the intruder retains a MODEL "done" of this run
        run.intruder.publish(wire.topic_model(JOB), forged, retain=True)
        replaced = wait_until(lambda: run.coord.model_guard.replaced >= 1, 10.0)

        def ours() -> bool:
            m = retained_model(mosquitto)
            return m is not None and m.run == run_id and m.state == "running"

        wait_until(ours, 10.0)
        after = retained_model(mosquitto)
        link = MqttLink(ConnectionOptions(broker=mosquitto.url), "late")
        late = fetch_model(link, JOB, timeout=10.0)
    finally:
        summary = run.finish()

    # Assert: serve's own MODEL is retained again, and a late worker reads it
    assert replaced, "NOT HELD: serve did not notice the forged MODEL"
    assert after is not None and after.state == "running" and after.run == run_id, (
        f"NOT HELD: the forged MODEL stayed retained ({after})"
    )
    assert late is not None and late.state == "running", f"NOT HELD: {late}"
    assert summary.dropped.get("foreign_model", 0) >= 1
    print("HELD: serve republished its MODEL over a forged done")


def test_a_worker_that_finds_the_job_done_keeps_waiting(mosquitto: Any) -> None:
    # Prepare: only a retained MODEL "done" is on the broker
    forger = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    forger.connect(mosquitto.host, mosquitto.port)
    forger.loop_start()
    done = wire.encode_model(JOB, 12345, "done", "", 0, 0)
    forger.publish(wire.topic_model(JOB), bytes(done), 1, True).wait_for_publish(10)
    cmd = [sys.executable, "-m", "edgeps", "worker", "--broker", mosquitto.url,
           "--job", JOB, "--id", "late", "--emulated", "sensors:0/4"]  # fmt: skip
    # Execute: a worker starts
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        exited = proc.wait(timeout=4.0)
    except subprocess.TimeoutExpired:
        exited = None
    finally:
        proc.kill()
        out = proc.communicate(timeout=10)[0]
        forger.loop_stop()
        forger.disconnect()

    # Assert: it did not take the unsigned MODEL as an order to exit
    assert exited is None, f"NOT HELD: the worker exited ({exited}): {out[-400:]}"
    assert "says done; waiting" in out, out[-400:]
    print("HELD: a worker that found the job done waits for it to run")
