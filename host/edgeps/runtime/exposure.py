"""Secure by default: a job reachable from other machines needs per-device keys.

Anyone who can reach the broker can say HELLO, push, or stop a worker that
trusts unsigned messages. On a loopback broker that is only this machine's
users; off loopback it is the network. So `edgeps serve` refuses to start on
a broker reachable from other machines without ``--hmac-key-file`` (each
worker's traffic signed with its own key), unless told ``--allow-unsigned``. The
decision reads the configuration only: nothing is resolved or bound.
A client that takes a model from the job (``worker --infer --fetch``) trusts
what it is sent just as much, so it refuses the same way.
"""

from __future__ import annotations

import ipaddress

from edgeps.runtime.config import ServeConfig
from edgeps.security.mosquitto import parse_listen
from edgeps.transport.broker import BROKER_KINDS, parse_broker_urls

_LOOPBACK_NAMES = ("localhost", "ip6-localhost", "ip6-loopback")


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost; any other name may be remote.

    An empty host (a listener on every interface) is not loopback.
    """
    name = host.strip().strip("[]").lower().rstrip(".")
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def exposed_broker(cfg: ServeConfig) -> str | None:
    """Where the job's broker is reachable from other machines; None: loopback only."""
    if cfg.listen is not None:
        listen = parse_listen(cfg.listen)
        if not is_loopback(listen.host):
            return f"{listen.host or '*'}:{listen.port} (--listen)"
    if cfg.broker in BROKER_KINDS:
        return None  # started here, on 127.0.0.1
    for address in parse_broker_urls(cfg.broker):
        if not is_loopback(address.host):
            return address.url
    return None


def check_keys(cfg: ServeConfig) -> None:
    """ValueError (exit 2) when the broker is off loopback and the job has no keys."""
    where = exposed_broker(cfg)
    if where is None or cfg.hmac_key_file is not None or cfg.allow_unsigned:
        return
    raise ValueError(
        f"the broker {where} is reachable from other machines and the job has no "
        "per-device keys: pass --hmac-key-file master.key (make it with `edgeps "
        "keys new --out master.key`), or --allow-unsigned to run without them"
    )


def check_fetch_keys(broker: str, key_file: str | None, allow_unsigned: bool) -> None:
    """ValueError (exit 2) when a model would be fetched unsigned from off loopback.

    Without a key anyone who can publish to the broker can answer the HELLO
    with a WELCOME and PARAMS of their own, and that model would be written.
    """
    if key_file is not None or allow_unsigned:
        return
    for address in parse_broker_urls(broker):
        if not is_loopback(address.host):
            raise ValueError(
                f"the broker {address.url} is reachable from other machines and "
                "--fetch has no key: anyone there could send a forged model. Pass "
                "--hmac-key-file (this worker's key, `edgeps keys derive`), or "
                "--allow-unsigned to fetch without it"
            )
