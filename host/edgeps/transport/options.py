"""How to reach a broker: URL, TLS and credentials, one type for every command.

`edgeps serve`, `worker`, `emulate` and `demo` all build a `ConnectionOptions`
from the same flags (see `edgeps.runtime.connection_flags`) and hand it to the one
paho layer in `edgeps.transport.paho_link`. The error messages name the flags.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from edgeps.transport.broker import BROKER_KINDS, BrokerAddress, parse_broker_urls

PASSWORD_ENV = "EDGEPS_MQTT_PASSWORD"


@dataclass(frozen=True)
class ConnectionOptions:
    """One MQTT connection's settings.

    Parameters
    ----------
    broker: ``mqtt://host[:port]`` or ``mqtts://host[:port]``, or a
        comma-separated list of the nodes of one broker cluster (tried in
        order; a lost link fails over to the next); `serve` and `demo` also
        take ``auto``, ``mosquitto`` or ``amqtt`` (a broker they start),
        replaced by its URL with `at` once it runs.
    username, password: MQTT credentials (the password never from a flag).
    tls_ca, tls_cert, tls_key: PEM files; TLS needs an ``mqtts://`` URL.
    tls_insecure: skip the broker certificate's checks (tests, lab setups).
    keepalive: seconds between pings; the broker fires a last will after
        1.5x this without traffic.
    """

    broker: str = "auto"
    username: str | None = None
    password: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_insecure: bool = False
    keepalive: int = 20

    @property
    def starts_broker(self) -> bool:
        """True when `broker` names a broker to launch rather than a URL."""
        return self.broker in BROKER_KINDS

    @property
    def addresses(self) -> tuple[BrokerAddress, ...]:
        """Every node of the broker, in order; ValueError for ``auto`` or a bad URL."""
        return parse_broker_urls(self.broker)

    @property
    def address(self) -> BrokerAddress:
        """The first (or only) node; ValueError for ``auto`` or a bad URL."""
        return self.addresses[0]

    @property
    def wants_tls(self) -> bool:
        return (
            self.tls_ca is not None
            or self.tls_cert is not None
            or self.tls_key is not None
            or self.tls_insecure
        )

    def apply_to(self, client: Any, tls: bool) -> None:
        """Give a paho client this job's credentials, and TLS when ``tls``."""
        if self.username is not None:
            client.username_pw_set(self.username, self.password)
        if tls:
            client.tls_set(
                ca_certs=self.tls_ca,
                certfile=self.tls_cert,
                keyfile=self.tls_key,
                cert_reqs=ssl.CERT_NONE if self.tls_insecure else ssl.CERT_REQUIRED,
            )
            client.tls_insecure_set(self.tls_insecure)

    def at(self, url: str) -> ConnectionOptions:
        """The same options for the broker at ``url`` (one we started)."""
        return replace(self, broker=url)

    def check(self) -> None:
        """Raise ValueError/FileNotFoundError naming the flag that is wrong."""
        tls = False
        if not self.starts_broker:
            tls = self.address.tls  # ValueError for a bad URL
        if self.wants_tls and not tls:
            raise ValueError(
                "TLS options (--tls-ca/--tls-cert/--tls-key/--tls-insecure) need "
                f"an mqtts:// broker URL, got --broker {self.broker}"
            )
        for flag, path in (
            ("--tls-ca", self.tls_ca),
            ("--tls-cert", self.tls_cert),
            ("--tls-key", self.tls_key),
        ):
            if path is not None and not Path(path).is_file():
                raise FileNotFoundError(f"{flag}: no such file: {path}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key must be given together")
        if self.password is not None and self.username is None:
            raise ValueError(
                f"a password (--password-file or ${PASSWORD_ENV}) needs --username"
            )
        if not isinstance(self.keepalive, int) or not 1 <= self.keepalive <= 65535:
            raise ValueError(
                f"--keepalive must be 1..65535 seconds, got {self.keepalive!r}"
            )


def probe_broker(options: ConnectionOptions, timeout: float = 5.0) -> None:
    """ConnectionError unless some node of the broker accepts a TCP connection.

    A quick check before starting many clients that would each retry in
    silence; it does not speak MQTT (credentials and TLS are checked later).
    """
    errors = []
    for node in options.addresses:
        try:
            with socket.create_connection((node.host, node.port), timeout=timeout):
                return
        except OSError as exc:
            errors.append(f"{exc.strerror or exc}")
    urls = ",".join(node.url for node in options.addresses)
    raise ConnectionError(f"cannot reach the broker at {urls}: {'; '.join(errors)}")
