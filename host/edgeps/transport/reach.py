"""Can a broker be reached at all: its name resolved and a TCP connect, before MQTT.

A mistyped host or a closed port is the commonest first mistake; said as such
(and before any advice about keys or credentials), it is fixed in seconds.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

from edgeps.transport.backoff import Backoff
from edgeps.transport.broker import BrokerAddress, parse_broker_urls

PROBE_TIMEOUT = 5.0  # seconds for one TCP connect

log = logging.getLogger("edgeps.transport.reach")


def _why(exc: OSError) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer"
    return exc.strerror or str(exc) or type(exc).__name__


def node_error(address: BrokerAddress, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why no TCP connection to ``address`` opens; None when one does."""
    try:
        infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        return f"the host name {address.host!r} does not resolve ({reason})"
    last: OSError | None = None
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(timeout)
                sock.connect(sockaddr)
            return None
        except OSError as exc:
            last = exc
    reason = _why(last) if last is not None else "no address"
    return f"nothing accepts a connection at {address.host}:{address.port} ({reason})"


def unreachable(spec: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """None when some node of the broker ``spec`` (URL, or URL,URL for a
    cluster) accepts a TCP connection; else why, for every node."""
    errors = []
    for address in parse_broker_urls(spec):
        why = node_error(address, timeout)
        if why is None:
            return None
        errors.append(f"{address.url}: {why}" if "," in spec else why)
    return f"cannot reach the broker {spec}: " + "; ".join(errors)


def wait_reachable(
    spec: str,
    within: float,
    *,
    stop: Callable[[], bool] = lambda: False,
    note: Callable[[str, float], None] | None = None,
    timeout: float = PROBE_TIMEOUT,
) -> str | None:
    """Probe with backoff until the broker answers (None) or ``within`` seconds
    pass (why it did not); ``note(why, delay)`` hears each failed probe."""
    deadline = time.monotonic() + within
    backoff = Backoff(initial=0.5, maximum=8.0, jitter=0.2)
    while True:
        why = unreachable(spec, min(timeout, max(0.1, deadline - time.monotonic())))
        left = deadline - time.monotonic()
        if why is None or left <= 0 or stop():
            return why
        delay = min(backoff.next(), left)
        if note is not None:
            note(why, delay)
        end = time.monotonic() + delay
        while time.monotonic() < end and not stop():
            time.sleep(min(0.1, end - time.monotonic()))


def at_start(
    spec: str, within: float, *, persist: bool, stop: Callable[[], bool]
) -> str | None:
    """A worker's first look at its broker: why it is not reachable within
    ``within`` seconds (each failed probe a warning); with ``persist`` (a
    service, which keeps retrying with backoff) one probe and None."""
    if persist:
        why = unreachable(spec)
        if why is not None:
            log.warning("%s; retrying with backoff (--persist)", why)
        return None

    def note(why: str, delay: float) -> None:
        log.warning("%s; retrying in %.1f s", why, delay)

    why = wait_reachable(spec, within, stop=stop, note=note)
    return None if stop() else why
