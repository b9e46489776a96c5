"""A mosquitto setup that confines each worker to its topics, written to a directory.

``write_broker_config`` writes ``DIR/mosquitto.conf``, ``DIR/passwd``
(mosquitto's password file), ``DIR/acl`` (its ``acl_file``) and
``DIR/credentials/<user>.password`` (mode 0600, one random password per worker
and one for the host). A worker's MQTT user name is its worker id. `edgeps
broker-config` writes one for a broker someone runs; `edgeps serve --lan`
writes one for the broker it starts. See `edgeps.security.mosquitto` for the
rules.
"""

from __future__ import annotations

import getpass
import os
import pwd
import secrets
from dataclasses import dataclass
from pathlib import Path

from edgeps.security.keys import write_private_file
from edgeps.security.mosquitto import (
    QUEUE_SETTINGS,
    Listen,
    acl_text,
    check_user,
    mosquitto_conf,
    mosquitto_passwd_path,
    write_password_file,
)
from edgeps.transport.broker_tuning import mosquitto_lines

DEFAULT_HOST_USER = "edgeps-host"


@dataclass(frozen=True)
class BrokerFiles:
    """What `write_broker_config` wrote."""

    conf: Path
    passwd: Path
    acl: Path
    credentials: dict[str, Path]
    hashed_by: str


def default_run_as() -> str:
    """Whom a root-started mosquitto should drop to: its own user when it exists.

    "root" when there is none, which `mosquitto_conf` refuses: a broker on
    the network never runs as root.
    """
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("mosquitto")
            return "mosquitto"
        except KeyError:
            return "root"
    return getpass.getuser()


def write_broker_config(
    out: Path,
    *,
    job: str,
    workers: list[str],
    listen: Listen,
    host_user: str = DEFAULT_HOST_USER,
    run_as: str | None = None,
    hasher: str = "auto",
    force: bool = False,
    sensors: int | None = None,
    tls: tuple[Path, Path] | None = None,
) -> BrokerFiles:
    """Write the whole setup under ``out``; FileExistsError unless ``force``.

    ``hasher`` is ``"auto"`` (mosquitto_passwd when installed), ``"tool"`` or
    ``"builtin"``. When run as root, the files mosquitto reads after dropping
    to ``run_as`` (password file, ACL, the persistence directory ``out``) are
    handed to that user; the credentials stay with the caller. ``sensors``
    sizes the host's queue limits for that many sensors
    (`edgeps.transport.broker_tuning`); None keeps the small defaults.
    ``tls``: the listener's (certificate, key), copied in (`install_server_tls`).
    """
    check_user(host_user)
    run_as = default_run_as() if run_as is None else check_user(run_as)
    acl = acl_text(job, workers, host_user)  # validates job, ids and the host user
    tool = None if hasher == "builtin" else mosquitto_passwd_path()
    if hasher == "tool" and tool is None:
        raise FileNotFoundError("mosquitto_passwd is not installed")
    conf_path = out / "mosquitto.conf"
    if conf_path.exists() and not force:
        raise FileExistsError(f"{conf_path} exists; pass --force to overwrite it")
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    cred_dir = out / "credentials"
    cred_dir.mkdir(mode=0o700, exist_ok=True)
    passwords = {user: secrets.token_urlsafe(24) for user in [host_user, *workers]}
    credentials = {
        user: write_private_file(cred_dir / f"{user}.password", pw + "\n", force=True)
        for user, pw in passwords.items()
    }
    passwd_path = out / "passwd"
    hashed_by = write_password_file(passwd_path, passwords, tool=tool)
    acl_path = write_private_file(out / "acl", acl, force=True)
    queue = (
        QUEUE_SETTINGS if sensors is None else mosquitto_lines(sensors, private=False)
    )
    served = None if tls is None else install_server_tls(out, tls, run_as)
    conf = mosquitto_conf(
        listen, out, run_as=run_as, job=job, queue_settings=queue, tls=served
    )
    write_private_file(conf_path, conf, force=True)
    if os.geteuid() == 0 and run_as != "root":
        entry = pwd.getpwnam(run_as)
        for path in (out, passwd_path, acl_path):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    return BrokerFiles(conf_path, passwd_path, acl_path, credentials, hashed_by)


def install_server_tls(
    out: Path, tls: tuple[Path, Path], run_as: str | None
) -> tuple[Path, Path]:
    """Copy the listener's certificate and key into ``out`` (the key 0600), owned
    by ``run_as`` when root: mosquitto reads them after dropping to that user."""
    cert = out / "server.pem"
    key = write_private_file(out / "server.key", Path(tls[1]).read_text(), force=True)
    cert.write_text(Path(tls[0]).read_text())
    cert.chmod(0o644)
    if os.geteuid() == 0 and run_as not in (None, "root"):
        entry = pwd.getpwnam(str(run_as))
        for path in (cert, key):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    return cert, key
