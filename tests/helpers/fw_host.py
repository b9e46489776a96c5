"""Host side of firmware integration tests: a paho mini-PS, worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import paho.mqtt.client as mqtt
from edgeps_worker import wire_host as wire
from paho.mqtt.enums import CallbackAPIVersion

from tests.conftest import FIRMWARE, REPO

WORKER_SCRIPT = str(REPO / "tests" / "helpers" / "mpy" / "fw_worker.py")


class MiniPS:
    """Plays the parameter server over a real broker with paho and the wire module.

    Publishes the retained MODEL (again after every reconnect), answers HELLO
    with WELCOME (a session per link nonce) and PARAMS, each new UPDATE of the
    current session with PARAMS, applies SGD, drops duplicate seqs; ``stop``
    sends each worker STOP done. ``key`` is the worker's own key.
    """

    def __init__(
        self,
        port: int,
        job: str,
        spec: str,
        params: np.ndarray,
        lr: float = 0.1,
        key: bytes | None = None,
    ):
        self.port = port
        self.job = job
        self.spec = spec
        self.params = params.astype(np.float32).copy()
        self.history = {0: self.params.copy()}
        self.version = 0
        self.lr = lr
        self.key = key
        self.bad = 0  # messages that failed to decode (e.g. a wrong HMAC tag)
        self.inject: list[bytes] = []  # sent down before the first release
        self.lock = threading.Lock()
        self.hellos: list[wire.Message] = []
        self.updates: list[wire.Message] = []
        self.byes: list[str] = []
        self.duplicates = 0
        self.hold_after: int | None = None  # stop releasing after this many updates
        self.seen: set[tuple[str, int, int]] = set()
        self.run = 0x5EED
        self.sessions: dict[str, tuple[int, int]] = {}  # wid -> (nonce, session)
        self.stale = 0  # UPDATEs of a session that is not the current one
        self.asm = wire.Reassembler(1 << 20, 30.0, 16)
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="mini-ps")
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(0.1, 0.5)

    def start(self) -> None:
        self.client.connect("127.0.0.1", self.port, keepalive=10)
        self.client.loop_start()

    def stop(self, done: bool = True) -> None:
        if done:
            info = self.client.publish(
                wire.topic_model(self.job), self._model("done"), qos=1, retain=True
            )
            info.wait_for_publish(5)
            with self.lock:
                live = dict(self.sessions)
            for wid, (_, session) in live.items():
                stop = wire.encode_stop(
                    self.job, wid, self.run, session, "done", key=self.key
                )
                self.client.publish(wire.topic_down(self.job, wid), stop, 1)
            time.sleep(0.3)
        self.client.loop_stop()
        self.client.disconnect()

    def _model(self, state: str) -> bytes:
        return wire.encode_model(
            self.job, self.run, state, self.spec, self.version, self.params.size
        )

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        client.subscribe(wire.topic_up_wildcard(self.job), qos=1)
        client.publish(
            wire.topic_model(self.job), self._model("running"), qos=1, retain=True
        )

    def _release(self, wid: str) -> None:
        if self.hold_after is not None and len(self.updates) >= self.hold_after:
            return
        session = self.sessions[wid][1]
        for chunk in wire.encode_params(
            self.job, wid, self.run, session, self.version, self.params.tobytes(),
            512, key=self.key,
        ):  # fmt: skip
            self.client.publish(wire.topic_down(self.job, wid), chunk, qos=1)

    def _on_message(self, client, userdata, message) -> None:
        try:
            msg = wire.decode(message.payload, self.key)
        except wire.WireError:
            with self.lock:
                self.bad += 1
            return
        with self.lock:
            if msg.type == wire.HELLO:
                self.hellos.append(msg)
                old = self.sessions.get(msg.wid)
                if old is None or old[0] != msg.nonce:
                    self.sessions[msg.wid] = (msg.nonce, len(self.hellos) + 1000)
                session = self.sessions[msg.wid][1]
                welcome = wire.encode_welcome(
                    self.job, msg.wid, self.run, msg.nonce, session,
                    int(self.params.size), self.spec, key=self.key,
                )  # fmt: skip
                client.publish(wire.topic_down(self.job, msg.wid), welcome, 1)
                for payload in self.inject:
                    client.publish(wire.topic_down(self.job, msg.wid), payload, 1)
                self.inject = []
                self._release(msg.wid)
            elif msg.type == wire.BYE:
                self.byes.append(msg.reason)
            elif msg.type == wire.UPDATE:
                done = self.asm.add(msg, time.monotonic())
                if done is None:
                    return
                if done.session != self.sessions[done.wid][1]:
                    self.stale += 1
                    return
                key = (done.wid, done.session, done.seq)
                if key in self.seen:
                    self.duplicates += 1
                    return
                self.seen.add(key)
                done.data = bytes(done.data)
                self.updates.append(done)
                grad = np.frombuffer(done.data, dtype="<f4")
                self.params -= self.lr * grad
                self.version += 1
                self.history[self.version] = self.params.copy()
                self._release(done.wid)

    def wait_for(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self):
                    return True
            time.sleep(0.05)
        return False


class PushWatch:
    """Watches one worker's up topic on the broker: has it pushed an UPDATE?"""

    def __init__(self, port: int, job: str, worker_id: str) -> None:
        self.topic = wire.topic_up(job, worker_id)
        self.subscribed = threading.Event()
        self.pushed = threading.Event()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"watch-{worker_id}"
        )
        self.client.on_connect = lambda c, *_: c.subscribe(self.topic, qos=0)
        self.client.on_subscribe = lambda *_: self.subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port, keepalive=10)
        self.client.loop_start()
        if not self.subscribed.wait(10):
            self.close()
            raise AssertionError(f"could not subscribe to {self.topic}")

    def _on_message(self, client, userdata, message) -> None:
        try:
            msg = wire.decode(message.payload)
        except wire.WireError:
            return
        if msg.type == wire.UPDATE:
            self.pushed.set()

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


class Started:
    """A process whose output (stdout and stderr) a thread reads line by line,
    so a test can wait until the process says it is ready."""

    def __init__(self, cmd: list[str], **kw: Any) -> None:
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw
        )
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    @property
    def output(self) -> str:
        with self.cond:
            return "".join(self.lines)

    def wait_for(self, text: str, timeout: float) -> bool:
        """True once a line containing ``text`` was printed; False if the
        process ended or ``timeout`` passed first."""

        def said() -> bool:
            return any(text in line for line in self.lines)

        def over() -> bool:
            return said() or not self.reader.is_alive()

        with self.cond:
            self.cond.wait_for(over, timeout)
            return said()

    def finish(self, timeout: float) -> tuple[int, str]:
        """Wait for the process to end (TimeoutExpired past ``timeout``); its
        exit status and whole output."""
        self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return self.proc.returncode, self.output

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.reader.join(timeout=10)


def write_worker_config(tmp_path: Path, port: int, **changes: Any) -> Path:
    cfg = {
        "job": "fwjob",
        "worker_id": "mpy-1",
        "model": "mlp:8-6-3",
        "broker_host": "127.0.0.1",
        "broker_port": port,
        "data": str(tmp_path / "data.bin"),
        "batch": 5,
        "seed": 3,
        "max_iterations": 4,
        "heartbeat_ms": 1000,
        "release_timeout_ms": 3000,
        "keepalive": 10,
        "max_chunk": 1024,
        "verbose": True,
    }
    cfg.update(changes)
    path = tmp_path / "worker.json"
    path.write_text(json.dumps(cfg))
    return path


def start_worker(exe: str, config: Path, limit_ms: int) -> subprocess.Popen[str]:
    """tests/helpers/mpy/fw_worker.py under MicroPython, with firmware/ on its path."""
    env = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:.frozen")
    return subprocess.Popen(
        [exe, WORKER_SCRIPT, str(config), str(limit_ms)], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=env, cwd=FIRMWARE,
    )  # fmt: skip


def finish_worker(proc: subprocess.Popen[str], timeout: float) -> tuple[dict, str]:
    """Wait for the worker (killing it past timeout); its REPORT and full output."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
    for line in out.splitlines():
        if line.startswith("REPORT "):
            return json.loads(line[7:]), out
    raise AssertionError("worker printed no report:\n" + out)
