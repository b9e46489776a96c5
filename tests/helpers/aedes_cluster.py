"""A real two-node aedes cluster for tests: redis plus tools/aedes/node.js twice.

Each node is its own Node.js process on a fresh 127.0.0.1 port; both share one
redis-server (also on 127.0.0.1, no disk) for subscriptions, retained
messages, QoS 1 queues and last wills. Every process is stopped by pid.
Without node, redis-server or `npm ci --prefix tools/aedes`, the tests skip
with the reason; .ci/run installs all three and sets EDGEPS_REQUIRE_BROKERS=1,
which turns such a skip into a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import _wait_listening, free_port

ROOT = Path(__file__).resolve().parents[2]
AEDES_DIR = ROOT / "tools" / "aedes"
START_TIMEOUT = 20.0


def skip_unless_ci(why: str) -> None:
    """Skip with the reason, or fail where CI has installed the brokers."""
    if os.environ.get("EDGEPS_REQUIRE_BROKERS") == "1":
        pytest.fail(f"EDGEPS_REQUIRE_BROKERS=1 but {why}")
    pytest.skip(why)


def missing() -> str | None:
    """Why the cluster cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install redis-server)"
    if not (AEDES_DIR / "node_modules" / "aedes").is_dir():
        return "aedes is not installed (npm ci --prefix tools/aedes)"
    return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@dataclass
class Node:
    name: str
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """Kill the node outright (SIGKILL by pid), as a crashed machine would."""
        self.proc.kill()
        self.proc.wait(timeout=10)


@dataclass
class Cluster:
    redis: subprocess.Popen[bytes]
    redis_port: int
    nodes: list[Node] = field(default_factory=list)

    def url(self, *order: int) -> str:
        """The nodes' URLs as one --broker list, in the given order."""
        return ",".join(self.nodes[i].url for i in order or range(len(self.nodes)))

    def add_node(self, name: str, log_dir: Path, heartbeat_ms: int = 500) -> Node:
        port = free_port()
        log = open(log_dir / f"aedes-{name}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            ["node", str(AEDES_DIR / "node.js"), "--port", str(port),
             "--redis", f"127.0.0.1:{self.redis_port}", "--id", name,
             "--heartbeat-ms", str(heartbeat_ms)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        node = Node(name, port, proc)
        self.nodes.append(node)
        if not _wait_listening(port, START_TIMEOUT) or proc.poll() is not None:
            raise RuntimeError(f"aedes node {name} did not start listening")
        return node

    def stop(self) -> None:
        for node in self.nodes:
            _stop(node.proc)
        _stop(self.redis)


def start_cluster(tmp_path: Path, n_nodes: int = 2) -> Cluster:
    """redis on a fresh port, then ``n_nodes`` aedes nodes sharing it."""
    why = missing()
    if why is not None:
        skip_unless_ci(why)
    port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    cluster = Cluster(redis, port)
    try:
        if not _wait_listening(port, START_TIMEOUT):
            raise RuntimeError("redis-server did not start listening")
        for i in range(n_nodes):
            cluster.add_node("ab"[i] if i < 2 else f"n{i}", tmp_path)
    except BaseException:
        cluster.stop()
        raise
    return cluster
