"""Another serve of the same job: refused at start, reported while this one runs.

Two serves of one job both apply updates and both answer its workers, who
re-join whichever MODEL came last. Each serve keeps a retained presence
message on ``edgeps/<job>/host`` (a copy of its MODEL ``running``) whose
MQTT last will clears it, so a presence of another run names a serve that
is alive (or died less than 1.5 keepalives ago). Workers never read it; the
retained MODEL alone cannot tell a live serve from one that crashed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from edgeps_worker import wire_host as wire

from edgeps.transport.options import ConnectionOptions

log = logging.getLogger("edgeps.runtime.other_serves")

WAIT = 0.5  # seconds after the SUBACKs for the broker's retained messages


def topic_host(job: str) -> str:
    """Retained presence of the serve running ``job`` (hosts only)."""
    return wire.topic_model(job).removesuffix("model") + "host"


@dataclass(frozen=True)
class Found:
    """What the broker keeps for the job: a live serve's run, the MODEL's run."""

    live_run: int | None = None  # a serve whose presence is up
    model_run: int | None = None  # the run of the retained MODEL 'running'


def _running_run(payload: bytes) -> int | None:
    try:
        msg = wire.decode(payload)
    except wire.WireError:
        return None
    if msg.type != wire.MODEL or msg.state != "running":
        return None
    return int(msg.run)


def look(options: ConnectionOptions, job: str, wait: float = WAIT) -> Found:
    """Read the job's retained presence and MODEL; nothing found if unreachable."""
    from edgeps.transport.paho_link import MqttLink  # the coordinator needs no paho

    link = MqttLink(options, "edgeps-host-check")
    found: dict[str, int | None] = {}
    try:
        link.connect(None, b"")
        topics = {topic_host(job): "live_run", wire.topic_model(job): "model_run"}
        for topic in topics:
            link.subscribe(topic, 1)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and len(found) < len(topics):
            msg = link.poll(50)
            if msg is not None and msg[0] in topics and msg[1]:
                found[topics[msg[0]]] = _running_run(msg[1])
    except OSError as exc:  # the job's own connection reports it
        log.debug("could not look for another serve: %s", exc)
    finally:
        link.close()
    return Found(**found)


def refusal(job: str, run: int, broker: str) -> str:
    return (
        f"job {job} is already served by another edgeps serve on {broker} "
        f"(run {run:016x}): two serves of one job both train it and its workers "
        "follow whichever spoke last; stop the other one, pick another --job, "
        "or pass --takeover"
    )


@dataclass
class Presence:
    """This serve's retained presence: announced at start and on each reconnect."""

    job: str
    run: int
    model: str
    n_params: int

    @property
    def topic(self) -> str:
        return topic_host(self.job)

    def payload(self) -> bytes:
        return bytes(
            wire.encode_model(
                self.job, self.run, "running", self.model, 0, self.n_params
            )
        )


@dataclass
class OtherServes:
    """Counts MODEL messages of other runs of this job, and says so loudly."""

    job: str
    run: int
    ignore: set[int] = field(default_factory=set)  # a crashed run's retained MODEL
    seen: int = 0
    runs: set[int] = field(default_factory=set)

    @property
    def topic(self) -> str:
        return str(wire.topic_model(self.job))

    def feed(self, payload: bytes) -> None:
        other = _running_run(payload)
        if other is None or other == self.run or other in self.ignore:
            return
        self.seen += 1
        self.runs.add(other)
        log.warning(
            "another edgeps serve (run %016x) publishes the MODEL of job %s: two "
            "hosts train this job and its workers follow whichever spoke last; "
            "stop one of them (seen %d times)",
            other,
            self.job,
            self.seen,
        )
