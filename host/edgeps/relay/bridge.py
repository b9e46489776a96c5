"""A site mosquitto bridged to the central broker, for a relay's upstream topics only.

The relay connects to its site broker alone: the site job's topics stay on
the site, and a mosquitto bridge carries just the relay's three topics of
the central job across (the central host's traffic per site is then the
relay's, whatever the number of boards):

- ``edgeps/<job>/up/<relay>`` out (UPDATE, HELLO, HEARTBEAT, BYE and the
  relay's last will, which the site broker publishes when the relay's link
  drops: it crosses the bridge like any other message);
- ``edgeps/<job>/down/<relay>`` in (WELCOME, releases, STOP);
- ``edgeps/<job>/model`` in (the retained MODEL; with ``try_private`` on a
  mosquitto peer, the bridge keeps its retain flag).

``topic ... both`` on ``edgeps/<job>/#`` would also work but carries every
other site's traffic to every site. `bridge_config` writes the text;
`start_bridged_mosquitto` runs a private mosquitto with it on 127.0.0.1.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
from pathlib import Path

from edgeps_worker import wire

from edgeps.transport.broker import (
    BrokerAddress,
    BrokerHandle,
    free_port,
    mosquitto_path,
    wait_listening,
)

log = logging.getLogger(__name__)


def bridge_config(
    name: str,
    central: BrokerAddress,
    job: str,
    relay_id: str,
    *,
    qos: int = 1,
    restart_timeout: int = 1,
) -> str:
    """The ``connection`` block of a site mosquitto.conf bridging one relay."""
    for what, value in (("bridge name", name), ("job", job), ("relay id", relay_id)):
        if not wire.valid_id(value):
            raise ValueError(f"{what} must match [A-Za-z0-9_-]{{1,32}}: {value!r}")
    if qos not in (0, 1, 2):
        raise ValueError("qos must be 0, 1 or 2")
    up = wire.topic_up(job, relay_id)
    down = wire.topic_down(job, relay_id)
    return (
        f"connection {name}\n"
        f"address {central.host}:{central.port}\n"
        f"remote_clientid edgeps-bridge-{name}\n"
        "cleansession true\n"
        "try_private true\n"
        "notifications false\n"
        "start_type automatic\n"
        f"restart_timeout {int(restart_timeout)}\n"
        f"topic {up} out {qos}\n"
        f"topic {down} in {qos}\n"
        f"topic {wire.topic_model(job)} in {qos}\n"
    )


def start_bridged_mosquitto(
    name: str,
    central: BrokerAddress,
    job: str,
    relay_id: str,
    *,
    exe: str | None = None,
    timeout: float = 10.0,
) -> BrokerHandle:
    """A private site mosquitto on a free 127.0.0.1 port, bridged to ``central``."""
    exe = exe or mosquitto_path()
    if exe is None:
        raise FileNotFoundError(
            "mosquitto is not installed (apt-get install mosquitto)"
        )
    bridge = bridge_config(name, central, job, relay_id)
    workdir = Path(tempfile.mkdtemp(prefix=f"edgeps-site-{name}-"))
    for _attempt in range(3):
        port = free_port()
        conf = workdir / "mosquitto.conf"
        conf.write_text(
            f"listener {port} 127.0.0.1\nallow_anonymous true\n"
            "persistence false\nmax_inflight_messages 100\n"
            "set_tcp_nodelay true\nmax_queued_messages 10000\n"
            "message_size_limit 16777216\n" + bridge
        )
        proc = subprocess.Popen(
            [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if wait_listening("127.0.0.1", port, timeout) and proc.poll() is None:
            log.info(
                "site broker %s: mosquitto pid %d on port %d", name, proc.pid, port
            )
            return BrokerHandle(
                BrokerAddress("127.0.0.1", port), "mosquitto", proc, workdir
            )
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    shutil.rmtree(workdir, ignore_errors=True)
    raise RuntimeError(f"site broker {name} did not start listening on 127.0.0.1")
