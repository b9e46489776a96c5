"""Pick or launch the MQTT broker a run talks to: mosquitto, embedded amqtt, or a URL.

`open_broker("auto")` starts a private mosquitto on a free 127.0.0.1 port when
one is installed, else the embedded amqtt broker in a child process (so its
asyncio loop never competes with the coordinator for the GIL); a
``mqtt://host:port`` or ``mqtts://`` URL names a broker someone else runs, and
a comma-separated list of URLs the nodes of one broker cluster.
Launched brokers are stopped by pid when the handle is closed.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from edgeps.transport.broker_tuning import (
    DEFAULT_SENSORS,
    mosquitto_lines,
    raise_fd_limit,
)

log = logging.getLogger(__name__)

BROKER_KINDS = ("auto", "mosquitto", "amqtt")
_START_TIMEOUT = 15.0


@dataclass(frozen=True)
class BrokerAddress:
    """Where a broker listens and whether the link is TLS."""

    host: str
    port: int
    tls: bool = False

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"


def parse_broker_url(url: str) -> BrokerAddress:
    """Parse ``mqtt://host[:port]`` / ``mqtts://host[:port]`` (ports 1883 / 8883)."""
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(
            f"broker must be 'auto', 'mosquitto', 'amqtt' or mqtt[s]://host:port, "
            f"got {url!r}"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "mqtts"):
        raise ValueError(
            f"broker URL scheme must be mqtt or mqtts, got {parts.scheme!r}"
        )
    if not parts.hostname:
        raise ValueError(f"broker URL has no host: {url!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"broker URL has a bad port: {url!r}") from exc
    if port == 0:
        raise ValueError(f"broker URL has a bad port: {url!r}")
    tls = parts.scheme == "mqtts"
    return BrokerAddress(parts.hostname, port or (8883 if tls else 1883), tls)


def parse_broker_urls(spec: str) -> tuple[BrokerAddress, ...]:
    """Parse one URL or a comma-separated list of the nodes of one broker cluster.

    A client connects to the first that answers and fails over to the next
    when the link is lost; every node must use the same scheme (all TLS or
    none), since one set of TLS options serves them all.
    """
    if not isinstance(spec, str):
        raise ValueError(f"broker must be a string, got {spec!r}")
    found = tuple(parse_broker_url(part.strip()) for part in spec.split(","))
    if len({a.tls for a in found}) > 1:
        raise ValueError(f"broker list mixes mqtt:// and mqtts:// nodes: {spec!r}")
    if len(set(found)) != len(found):
        raise ValueError(f"broker list names a node twice: {spec!r}")
    return found


@dataclass
class BrokerHandle:
    """A broker address plus, when we launched it, the process to stop."""

    address: BrokerAddress
    kind: str  # "mosquitto", "amqtt" or "external"
    proc: subprocess.Popen[bytes] | None = None
    workdir: Path | None = None
    others: tuple[BrokerAddress, ...] = ()  # further nodes of an external cluster
    _closed: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        """The broker's URL; for a cluster, all of its nodes' URLs, comma-separated."""
        return ",".join(a.url for a in (self.address, *self.others))

    @property
    def host(self) -> str:
        return self.address.host

    @property
    def port(self) -> int:
        return self.address.port

    def close(self) -> None:
        """Stop the broker we launched (by pid) and remove its files; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.proc is not None:
            _stop_process(self.proc)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> BrokerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mosquitto_path() -> str | None:
    """The mosquitto executable, if installed (Debian puts it in /usr/sbin)."""
    found = shutil.which("mosquitto")
    if found:
        return found
    return "/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None


def amqtt_available() -> bool:
    """True when the embedded broker (the `demo` extra) can be imported."""
    try:
        import amqtt.broker  # noqa: F401
    except Exception:  # any import failure means "not usable here"
        return False
    return True


def wait_listening(host: str, port: int, timeout: float) -> bool:
    """Poll until something accepts TCP connections on host:port (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def _stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def start_mosquitto(
    *, exe: str | None = None, sensors: int = DEFAULT_SENSORS
) -> BrokerHandle:
    """Start a private mosquitto on a free loopback port with a generated config.

    The config and the open-files limit are sized for ``sensors``
    connections (`edgeps.transport.broker_tuning` says what and why).
    """
    exe = exe or mosquitto_path()
    if exe is None:
        raise FileNotFoundError(
            "mosquitto is not installed (apt-get install mosquitto)"
        )
    fds = raise_fd_limit(sensors)
    if fds < sensors + 16:
        log.warning(
            "open files limit %d is below %d sensors: raise it (ulimit -n)",
            fds,
            sensors,
        )
    workdir = Path(tempfile.mkdtemp(prefix="edgeps-mosquitto-"))
    for _attempt in range(3):
        port = free_port()
        conf = workdir / "mosquitto.conf"
        lines = [f"listener {port} 127.0.0.1", "allow_anonymous true"]
        conf.write_text("\n".join([*lines, *mosquitto_lines(sensors)]) + "\n")
        proc = subprocess.Popen(
            [exe, "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if wait_listening("127.0.0.1", port, _START_TIMEOUT) and proc.poll() is None:
            log.info("started mosquitto pid %d on 127.0.0.1:%d", proc.pid, port)
            return BrokerHandle(
                BrokerAddress("127.0.0.1", port), "mosquitto", proc, workdir
            )
        _stop_process(proc)  # lost the port race or failed to start: try another
    shutil.rmtree(workdir, ignore_errors=True)
    raise RuntimeError("mosquitto did not start listening on 127.0.0.1")


def launch_mosquitto(
    conf: Path, address: BrokerAddress, *, sensors: int = DEFAULT_SENSORS
) -> BrokerHandle:
    """Start mosquitto with a config someone wrote (``edgeps serve --lan``).

    ``address`` is where this host reaches it (its listener, or 127.0.0.1 for
    one on every interface). The config's files are the caller's: closing the
    handle stops the broker and leaves them.
    """
    exe = mosquitto_path()
    if exe is None:
        raise FileNotFoundError(
            "mosquitto is not installed (apt-get install mosquitto)"
        )
    raise_fd_limit(sensors)
    proc = subprocess.Popen(
        [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    if (
        wait_listening(address.host, address.port, _START_TIMEOUT)
        and proc.poll() is None
    ):
        log.info("started mosquitto pid %d with %s", proc.pid, conf)
        return BrokerHandle(address, "mosquitto", proc)
    _stop_process(proc)
    raise RuntimeError(
        f"mosquitto -c {conf} did not start listening on port {address.port} "
        "(is the port taken?)"
    )


def start_amqtt() -> BrokerHandle:
    """Start the embedded amqtt broker in a child process on a free loopback port."""
    if not amqtt_available():
        raise RuntimeError(
            "no broker available: install mosquitto or the embedded broker "
            "(pip install 'edgeps[demo]')"
        )
    raise_fd_limit()  # one file per connection, as for mosquitto
    for _attempt in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edgeps.transport.broker",
                "--amqtt-port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if wait_listening("127.0.0.1", port, _START_TIMEOUT) and proc.poll() is None:
            log.info("started amqtt pid %d on 127.0.0.1:%d", proc.pid, port)
            return BrokerHandle(BrokerAddress("127.0.0.1", port), "amqtt", proc)
        _stop_process(proc)
    raise RuntimeError("the embedded amqtt broker did not start listening")


def open_broker(spec: str, *, prefer: str = "mosquitto") -> BrokerHandle:
    """Resolve a broker spec: "auto", "mosquitto", "amqtt" or an mqtt[s]:// URL.

    ``prefer`` decides what "auto" tries first ("mosquitto" for `serve` and the
    tests, "amqtt" for the no-install demo); the other is the fallback.
    """
    if prefer not in ("mosquitto", "amqtt"):
        raise ValueError(f"prefer must be 'mosquitto' or 'amqtt', got {prefer!r}")
    if spec == "mosquitto":
        return start_mosquitto()
    if spec == "amqtt":
        return start_amqtt()
    if spec == "auto":
        order = ("amqtt", "mosquitto") if prefer == "amqtt" else ("mosquitto", "amqtt")
        for kind in order:
            if kind == "mosquitto" and mosquitto_path() is not None:
                return start_mosquitto()
            if kind == "amqtt" and amqtt_available():
                return start_amqtt()
        raise RuntimeError(
            "no broker available: install mosquitto, or pip install 'edgeps[demo]' "
            "for the embedded broker, or pass --broker mqtt://host:port"
        )
    first, *others = parse_broker_urls(spec)
    return BrokerHandle(first, "external", others=tuple(others))


def _amqtt_config(port: int) -> dict[str, object]:
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{port}"}},
        "plugins": {
            "amqtt.plugins.authentication.AnonymousAuthPlugin": {
                "allow_anonymous": True
            },
        },
    }


def _serve_amqtt(port: int) -> int:
    """Child-process entry: run amqtt on 127.0.0.1:port until SIGTERM/SIGINT."""
    import asyncio
    import signal

    from amqtt.broker import Broker

    logging.basicConfig(level=logging.WARNING)

    async def main() -> None:
        broker = Broker(_amqtt_config(port))
        await broker.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await broker.shutdown()

    asyncio.run(main())
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(description="run the embedded amqtt broker")
    _parser.add_argument("--amqtt-port", type=int, required=True)
    sys.exit(_serve_amqtt(_parser.parse_args().amqtt_port))
