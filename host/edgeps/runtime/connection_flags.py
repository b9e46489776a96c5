"""The connection flags every MQTT command shares, and what they turn into.

`add_connection_flags` gives `serve`, `worker`, `emulate` and `demo` (and a
future `relay`) the same spellings: ``--broker``, ``--username`` with
``--password-file`` (or ``$EDGEPS_MQTT_PASSWORD``; a password on the command
line would show in ``ps``), ``--tls-ca/--tls-cert/--tls-key/--tls-insecure``,
``--keepalive``, ``--hmac-key-file`` and ``--log-level``.
`connection_options` turns parsed flags (or a `ServeConfig`, whose fields
have the same names) into one `ConnectionOptions`.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from edgeps.transport.options import PASSWORD_ENV, ConnectionOptions

LOG_LEVELS = ("debug", "info", "warning", "error")
BROKER_URL_HELP = "the broker, mqtt://HOST[:PORT] or mqtts://HOST[:PORT] for TLS"


def add_connection_flags(
    parser: argparse.ArgumentParser,
    *,
    broker_help: str = BROKER_URL_HELP,
    defaults: dict[str, Any] | None = None,
    layered: bool = False,
) -> None:
    """Add the shared connection flags.

    Without ``defaults`` (or a "broker" in them) ``--broker`` is required.
    With ``layered`` every flag defaults to "not given" (argparse.SUPPRESS),
    for commands that merge flags over a config file; the help still shows
    the values from ``defaults``.
    """
    d = {"keepalive": 20, "log_level": "warning", **(defaults or {})}
    g = parser.add_argument_group("broker connection")

    def add(name: str, help_text: str, **kw: Any) -> None:
        dest = kw.get("dest") or name[2:].replace("-", "_")
        default = d.get(dest)
        if default is not None and kw.get("action") is None:
            help_text += f" (default: {default})"
        kw["default"] = argparse.SUPPRESS if layered else default
        g.add_argument(name, help=help_text, **kw)

    broker_help += (
        "; a comma-separated list of URLs names the nodes of one broker "
        "cluster, used in order, failing over when a node is lost"
    )
    if "broker" in d or layered:
        add("--broker", broker_help, metavar="URL")
    else:
        g.add_argument("--broker", required=True, metavar="URL", help=broker_help)
    add("--username", "MQTT user name")
    add(
        "--password-file",
        f"file holding the MQTT password (or set ${PASSWORD_ENV})",
        metavar="FILE",
    )
    add("--tls-ca", "CA bundle (PEM) for the broker's certificate", metavar="FILE")
    add("--tls-cert", "client certificate (PEM), with --tls-key", metavar="FILE")
    add("--tls-key", "client private key (PEM), with --tls-cert", metavar="FILE")
    add(
        "--tls-insecure",
        "skip the broker certificate's checks (lab setups only)",
        action=argparse.BooleanOptionalAction,
    )
    add("--keepalive", "seconds between MQTT pings", type=int, metavar="S")
    add(
        "--hmac-key-file",
        "shared key: sign and verify every message (HMAC-SHA256)",
        metavar="FILE",
    )
    add("--log-level", "how much to log", choices=LOG_LEVELS)


def read_secret(path: str, what: str) -> bytes:
    """A secret from a file, surrounding whitespace ignored; ValueError if unusable."""
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as exc:
        raise ValueError(f"cannot read the {what} file {path}: {exc}") from None
    if not secret:
        raise ValueError(f"the {what} file {path} is empty")
    return secret


def read_key(path: str | None) -> bytes | None:
    """The host's master key from ``--hmac-key-file``, or None without one.

    A file made by ``edgeps keys new`` holds it as hex; a file without the
    header is read as raw bytes, as before. A worker's key file is refused:
    the host derives every worker's key from the master.
    """
    from edgeps.security.keys import KeyFileError, load_key_file

    if path is None:
        return None
    try:
        found = load_key_file(path)
    except KeyFileError as exc:
        raise ValueError(str(exc)) from None
    if found.kind == "worker":
        raise ValueError(
            f"--hmac-key-file {path} is worker {found.worker_id}'s key; "
            "give the master key (edgeps keys new)"
        )
    return found.key


def read_worker_key(path: str | None, worker_id: str) -> bytes | None:
    """A worker's own key from ``--hmac-key-file`` (derived when given the master)."""
    from edgeps.security.keys import KeyFileError, derive_worker_key, load_key_file

    if path is None:
        return None
    try:
        found = load_key_file(path)
    except KeyFileError as exc:
        raise ValueError(str(exc)) from None
    if found.kind == "worker" and found.worker_id != worker_id:
        raise ValueError(
            f"--hmac-key-file {path} is the key of {found.worker_id}, not {worker_id}"
        )
    if found.kind == "worker":
        return found.key
    # the master (or a raw one read as the master): derive this worker's key
    return derive_worker_key(found.key, worker_id)


def password_from(password_file: str | None) -> str | None:
    """The MQTT password: ``--password-file``, else ``$EDGEPS_MQTT_PASSWORD``."""
    if password_file is not None:
        return read_secret(password_file, "--password-file").decode()
    return os.environ.get(PASSWORD_ENV) or None


def connection_options(source: Any) -> ConnectionOptions:
    """A checked `ConnectionOptions` from parsed flags or a `ServeConfig`."""

    def get(name: str, default: Any = None) -> Any:
        return getattr(source, name, default)

    opts = ConnectionOptions(
        broker=get("broker", "auto"),
        username=get("username"),
        password=password_from(get("password_file")),
        tls_ca=get("tls_ca"),
        tls_cert=get("tls_cert"),
        tls_key=get("tls_key"),
        tls_insecure=bool(get("tls_insecure", False)),
        keepalive=get("keepalive", 20),
    )
    opts.check()
    return opts


def setup_logging(level: str, *, timestamps: bool = True) -> None:
    """Configure the root logger from ``--log-level``."""
    fmt = "%(levelname)s %(name)s: %(message)s"
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format=("%(asctime)s " + fmt) if timestamps else fmt,
    )
