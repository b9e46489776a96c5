"""CPython workers against a real mosquitto and a small scripted parameter server.

``ScriptedPS`` is an asynchronous (ASP) parameter server in a few lines: it
publishes the retained MODEL, answers HELLO with PARAMS, applies each new
UPDATE once (SGD) and releases its sender. The tests drive the real shared
worker loop through the paho transport, in threads and as `edgeps worker`
processes (killed by pid), across a broker restart.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from edgeps.kernels import ModelSpec
from edgeps.pyworker.localdata import load_emulated
from edgeps.pyworker.trainer import NativeTrainer
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink
from edgeps_worker import wire_host as wire
from edgeps_worker.worker import Worker
from paho.mqtt.enums import CallbackAPIVersion

SPEC = "mlp:33-32-6"  # the built-in "sensors" dataset's model


def wait_until(cond: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``cond`` until true or ``timeout`` seconds passed (bounded wait)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


class ScriptedPS:
    """An ASP parameter server over paho: enough protocol to drive workers."""

    def __init__(self, port: int, job: str, spec: str = SPEC, lr: float = 0.1) -> None:
        self.job = job
        self.spec = ModelSpec.parse(spec)
        self.params = self.spec.init_params(0)
        self.version = 0
        self.lr = lr
        self.state = "running"
        self.updates: Counter[str] = Counter()
        self.hellos: Counter[str] = Counter()
        self.byes: list[tuple[str, str]] = []
        self.instances: dict[str, list[int]] = {}
        self.run = 0xC0FFEE
        self.sessions: dict[str, tuple[int, int]] = {}  # wid -> (nonce, session)
        self.losses: dict[str, list[float]] = {}
        self.duplicates = 0
        # when set, updates are applied but nobody is released (a stuck host)
        self.hold = False
        self._seen: set[tuple[str, int, int]] = set()
        self._rx = wire.Reassembler()
        self._inbox: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self._stop = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
        self.client.on_connect = self._on_connect
        self.client.on_message = lambda c, u, m: self._inbox.put(
            (m.topic, bytes(m.payload))
        )
        self.client.reconnect_delay_set(0.1, 0.5)  # type: ignore[arg-type]
        # without TCP_NODELAY every chunked PARAMS waits for a delayed ACK
        self.client.on_socket_open = lambda c, u, sock: sock.setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
        )
        self.client.connect("127.0.0.1", port, keepalive=10)
        self.client.loop_start()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _on_connect(self, client, userdata, flags, rc, props) -> None:  # type: ignore[no-untyped-def]
        # the broker forgets retained messages and subscriptions on restart
        client.subscribe(wire.topic_up_wildcard(self.job), qos=1)
        self._publish_model()

    def _publish_model(self) -> None:
        payload = wire.encode_model(
            self.job,
            self.run,
            self.state,
            str(self.spec),
            self.version,
            self.spec.n_params,
        )
        self.client.publish(wire.topic_model(self.job), payload, qos=1, retain=True)

    def _release(self, wid: str) -> None:
        session = self.sessions[wid][1]
        for chunk in wire.encode_params(
            self.job, wid, self.run, session, self.version, self.params.tobytes()
        ):
            self.client.publish(wire.topic_down(self.job, wid), chunk, qos=1)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                _topic, payload = self._inbox.get(timeout=0.05)
            except queue.Empty:
                continue
            msg = self._rx.add(wire.decode(payload), time.monotonic())
            if msg is None:
                continue
            if msg.type == wire.HELLO:
                self.hellos[msg.wid] += 1
                incs = self.instances.setdefault(msg.wid, [])
                if msg.instance not in incs:
                    incs.append(msg.instance)
                old = self.sessions.get(msg.wid)
                if old is None or old[0] != msg.nonce:
                    self.sessions[msg.wid] = (msg.nonce, sum(self.hellos.values()))
                welcome = wire.encode_welcome(
                    self.job,
                    msg.wid,
                    self.run,
                    msg.nonce,
                    self.sessions[msg.wid][1],
                    self.spec.n_params,
                    str(self.spec),
                )
                self.client.publish(wire.topic_down(self.job, msg.wid), welcome, 1)
                self._release(msg.wid)
            elif msg.type == wire.UPDATE:
                if msg.session != self.sessions[msg.wid][1]:
                    continue  # an earlier session's update
                key = (msg.wid, msg.session, msg.seq)
                if key in self._seen:
                    self.duplicates += 1
                    continue
                self._seen.add(key)
                grad = np.frombuffer(bytes(msg.data), dtype="<f4")
                self.params -= self.lr * grad
                self.version += 1
                self.updates[msg.wid] += 1
                self.losses.setdefault(msg.wid, []).append(float(msg.loss))
                if not self.hold:
                    self._release(msg.wid)
            elif msg.type == wire.BYE:
                self.byes.append((msg.wid, str(msg.reason)))

    def finish(self) -> None:
        """Mark the job done (retained) and STOP each session, as the host does."""
        self.state = "done"
        self._publish_model()
        for wid, (_, session) in list(self.sessions.items()):
            stop = wire.encode_stop(self.job, wid, self.run, session, "done")
            self.client.publish(wire.topic_down(self.job, wid), stop, qos=1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.client.loop_stop()
        self.client.disconnect()


@pytest.fixture
def ps(mosquitto):  # type: ignore[no-untyped-def]
    server = ScriptedPS(mosquitto.port, "job1")
    try:
        yield server
    finally:
        server.close()


def _worker(port: int, wid: str, part: int, **kw):  # type: ignore[no-untyped-def]
    data, spec = load_emulated(f"sensors:{part}/4", 0)
    trainer = NativeTrainer(spec, data, batch=16, seed=part)
    transport = MqttLink(
        ConnectionOptions(f"mqtt://127.0.0.1:{port}", keepalive=5), wid
    )
    kw.setdefault("backoff_min_ms", 50)
    kw.setdefault("backoff_max_ms", 400)
    return Worker(transport, trainer, "job1", wid, instance=7, **kw)


def _cli(port: int, wid: str, *args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "edgeps", "worker", "--broker",
           f"mqtt://127.0.0.1:{port}", "--job", "job1", "--id", wid, *args]  # fmt: skip
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.integration
def test_worker_joins_pushes_and_is_released(mosquitto, ps) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    w = _worker(mosquitto.port, "w1", 0, max_iterations=40)
    # Execute
    reason = w.run()
    # Assert
    assert reason == "iterations"
    assert wait_until(lambda: ("w1", "bye") in ps.byes)
    assert ps.updates["w1"] == 40 and w.stats["pushes"] == 40
    assert w.stats["releases"] == 40 and w.clock == 40
    assert ps.duplicates == 0
    losses = ps.losses["w1"]
    assert np.mean(losses[-10:]) < np.mean(losses[:10])  # it learns


@pytest.mark.integration
def test_worker_reconnects_after_broker_restart(mosquitto, ps) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    stop = threading.Event()
    w = _worker(mosquitto.port, "w1", 0, stop=stop.is_set, release_timeout_ms=2000)
    th = threading.Thread(target=w.run, daemon=True)
    th.start()
    assert wait_until(lambda: ps.updates["w1"] >= 5)
    # Execute
    mosquitto.restart()
    before = ps.updates["w1"]
    resumed = wait_until(lambda: ps.updates["w1"] >= before + 10, timeout=30)
    stop.set()
    th.join(timeout=10)
    # Assert
    assert resumed, f"no pushes after the restart ({w.stats})"
    assert w.stats["reconnects"] >= 1
    assert not th.is_alive() and w.stop_reason == "stopped"
    assert ps.instances["w1"] == [7]


@pytest.mark.integration
def test_worker_stops_when_the_job_is_done(mosquitto, ps) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    w = _worker(mosquitto.port, "w1", 0)
    th = threading.Thread(target=w.run, daemon=True)
    th.start()
    assert wait_until(lambda: ps.updates["w1"] >= 3)
    # Execute
    ps.finish()
    th.join(timeout=20)
    # Assert
    assert not th.is_alive() and w.stop_reason == "done"


@pytest.mark.integration
def test_killed_worker_process_does_not_break_the_others(mosquitto, ps) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    procs = [_cli(mosquitto.port, f"p{i}", "--emulated", f"sensors:{i}/3")
             for i in range(3)]  # fmt: skip
    try:
        assert wait_until(lambda: all(ps.updates[f"p{i}"] >= 3 for i in range(3)))
        # Execute
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].wait(timeout=10)
        assert wait_until(lambda: ("p0", "lost") in ps.byes, timeout=30)
        counts = {w: ps.updates[w] for w in ("p1", "p2")}
        going = wait_until(lambda: all(ps.updates[w] >= counts[w] + 10 for w in counts))
        ps.finish()
        codes = [p.wait(timeout=30) for p in procs[1:]]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    # Assert
    assert going
    assert codes == [0, 0]
    assert procs[0].returncode == -signal.SIGKILL


@pytest.mark.integration
def test_cli_worker_with_a_csv_file_and_sigterm(mosquitto, ps, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    data, _ = load_emulated("sensors:0/4", 0)
    f = tmp_path / "local.csv"
    table = np.column_stack([data.X, data.y])
    header = ",".join([f"f{i}" for i in range(data.n_features)] + ["label"])
    np.savetxt(f, table, delimiter=",", header=header, comments="")
    proc = _cli(mosquitto.port, "csv1", "--data", str(f), "--incarnation", "42")
    try:
        assert wait_until(lambda: ps.updates["csv1"] >= 5)
        # Execute
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    # Assert
    assert code == 0
    assert wait_until(lambda: ("csv1", "bye") in ps.byes)
    assert ps.instances["csv1"] == [42]


@pytest.mark.integration
def test_cli_refuses_data_that_does_not_fit_the_job_model(
    mosquitto, ps, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    f = tmp_path / "small.csv"
    f.write_text("1,2,0\n3,4,1\n")
    # Execute
    proc = _cli(mosquitto.port, "bad1", "--data", str(f))
    _, err = proc.communicate(timeout=30)
    # Assert
    assert proc.returncode == 2
    assert "2 features but model mlp:33-32-6 expects 33" in err
    assert ps.hellos["bad1"] == 0


@pytest.mark.parametrize(
    "args",
    [
        ["--data", "/nonexistent/file.csv"],
        ["--emulated", "sensors:5/2"],
        ["--emulated", "sensors", "--batch", "0"],
        ["--emulated", "sensors", "--tls-ca", "/tmp/x.pem"],
        ["--emulated", "sensors", "--max-chunk", "10"],
        ["--emulated", "sensors", "--hmac-key-file", "/nonexistent/key"],
        ["--data", "x.csv", "--non-iid"],
        ["--data", "x.csv", "--emulated", "sensors"],
        ["--emulated", "sensors", "--model", "mlp:"],
        ["--emulated", "sensors", "--incarnation", "-1"],
        ["--emulated", "sensors", "--username", "u", "--password-file", "/no/pw"],
        ["--emulated", "sensors", "--password", "p"],
    ],
)
def test_cli_bad_flags_exit_2_without_a_broker(args: list[str]) -> None:
    # Execute: port 9 (discard) is never contacted, every check comes first
    proc = _cli(9, "x1", *args)
    _, err = proc.communicate(timeout=30)
    # Assert
    assert proc.returncode == 2, err
    assert "error" in err.lower()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("model", "code", "message"),
    [("mlp", 0, ""), ("mlp:32", 0, ""), ("softmax", 2, "not softmax:33x6")],
)
def test_cli_short_model_form_is_checked_against_the_job(  # type: ignore[no-untyped-def]
    mosquitto, ps, model: str, code: int, message: str
) -> None:
    # Execute: the job trains mlp:33-32-6
    proc = _cli(mosquitto.port, "m1", "--emulated", "sensors:0/2", "--model", model,
                "--max-iterations", "3")  # fmt: skip
    _, err = proc.communicate(timeout=60)
    # Assert
    assert proc.returncode == code, err
    assert message in err
    assert ps.updates["m1"] == (3 if code == 0 else 0)
