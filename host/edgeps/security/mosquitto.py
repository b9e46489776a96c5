"""A mosquitto 2.x setup for one job: listener, password file, per-worker ACLs.

Each worker connects as the MQTT user named by its worker id; the ACL lets it
publish only on its own up topic ``edgeps/J/up/W`` (where its last will goes
too) and read only its own down topic ``edgeps/J/down/W``, the model topic
``edgeps/J/model`` and ``edgeps/J/params/#`` (where the host publishes a release
round's shared PARAMS, ``edgeps/J/params/shared``; only the host may write it).
The host's user owns ``edgeps/J/#`` and may read ``$SYS/#``. The queue limits
are the ones the host's own test broker runs with (`edgeps.transport.broker`).

Passwords are hashed with ``mosquitto_passwd -U`` when it is installed, else
here in its format: ``user:$7$<iterations>$<base64 salt>$<base64 hash>``,
PBKDF2-HMAC-SHA512 with a 12-byte salt, 101 iterations and a 64-byte hash,
as mosquitto 2.x writes it.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from edgeps_worker import wire

PBKDF2_ITERATIONS = 101
SALT_BYTES = 12
HASH_BYTES = 64
_USER_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_HOST_RE = re.compile(r"^[A-Za-z0-9_.:-]*$")
_PASSWD_TIMEOUT = 30.0

# the host's queue limits, as edgeps.transport.broker's test broker has them
QUEUE_SETTINGS = (
    "max_inflight_messages 100",
    "max_queued_messages 10000",
    "message_size_limit 16777216",
    "set_tcp_nodelay true",
)


@dataclass(frozen=True)
class Listen:
    """Where the broker listens: ``host`` empty means every interface."""

    host: str
    port: int


def parse_listen(text: str) -> Listen:
    """``"127.0.0.1:1883"``, ``"[::1]:1883"`` or ``":1883"`` -> Listen."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"--listen wants HOST:PORT (port 1..65535), got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not _HOST_RE.match(host):
        raise ValueError(f"--listen has a bad host {host!r}")
    return Listen(host, int(port_text))


def _loopback(host: str) -> bool:
    """A listener only this machine reaches (an empty host is every interface)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_user(name: str) -> str:
    """An MQTT user name for the host: 1..64 of [A-Za-z0-9_.-]."""
    if not _USER_RE.match(name):
        raise ValueError(f"a user name is 1..64 of [A-Za-z0-9_.-], got {name!r}")
    return name


def worker_topics(job: str, worker_id: str) -> list[str]:
    """ACL lines of one worker's user (its user name is its worker id)."""
    return [
        f"topic write {wire.topic_up(job, worker_id)}",
        f"topic read {wire.topic_down(job, worker_id)}",
        f"topic read {wire.topic_model(job)}",
        f"topic read edgeps/{job}/params/#",
    ]


def acl_text(job: str, workers: Sequence[str], host_user: str) -> str:
    """A mosquitto ``acl_file`` for the job: the host first, then each worker."""
    wire.topic_model(job)  # ValueError unless job is a valid id
    check_user(host_user)
    if host_user in workers:
        raise ValueError(f"the host user {host_user!r} is also a worker id")
    lines = [
        f"# edgeps job {job}: each worker publishes only on its own up topic and",
        "# reads its own down topic, the model and the shared parameter topics.",
        "",
        f"user {host_user}",
        f"topic readwrite edgeps/{job}/#",
        "topic read $SYS/#",
    ]
    for wid in workers:
        lines += ["", f"user {wid}", *worker_topics(job, wid)]
    return "\n".join(lines) + "\n"


def mosquitto_conf(
    listen: Listen,
    out_dir: Path,
    *,
    run_as: str | None,
    job: str,
    queue_settings: Sequence[str] = QUEUE_SETTINGS,
    tls: tuple[Path, Path] | None = None,
) -> str:
    """The ``mosquitto.conf`` text; file paths are absolute under ``out_dir``.

    ``queue_settings``: the host's queue limits (`broker-config --sensors`
    passes ones sized by `edgeps.transport.broker_tuning`). ``tls``: the
    listener's (certificate, key) PEM files; None: plain TCP.
    """
    if run_as == "root" and not _loopback(listen.host):
        raise ValueError(
            f"mosquitto would run as root on {listen.host or '*'}:{listen.port}, "
            "which other machines reach: create its system user (`useradd "
            "--system mosquitto`; it drops to it) or name another with --run-as"
        )
    d = out_dir.resolve()
    lines = [
        f"# edgeps broker for job {job} (mosquitto 2.x), written by "
        "edgeps broker-config",
        "per_listener_settings false",
        f"listener {listen.port} {listen.host}".rstrip(),
        *(
            [f"certfile {tls[0].resolve()}", f"keyfile {tls[1].resolve()}"]
            if tls is not None
            else []
        ),
        "allow_anonymous false",
        f"password_file {d}/passwd",
        f"acl_file {d}/acl",
        "persistence true",
        f"persistence_location {d}/",
        *queue_settings,
    ]
    if run_as is not None:
        # started as root, mosquitto drops to this user before it reads the
        # password, ACL and persistence files
        lines.append(f"user {run_as}")
    return "\n".join(lines) + "\n"


def hash_password(
    password: str, *, salt: bytes | None = None, iterations: int = PBKDF2_ITERATIONS
) -> str:
    """Mosquitto's ``$7$`` hash: PBKDF2-HMAC-SHA512, base64 salt and digest."""
    if not password or "\n" in password:
        raise ValueError("a password must be non-empty and on one line")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac(
        "sha512", password.encode(), salt, iterations, HASH_BYTES
    )
    b64 = base64.b64encode
    return f"$7${iterations}${b64(salt).decode()}${b64(digest).decode()}"


def mosquitto_passwd_path() -> str | None:
    """The ``mosquitto_passwd`` tool, if installed (Debian: package mosquitto)."""
    found = shutil.which("mosquitto_passwd")
    if found:
        return found
    return (
        "/usr/bin/mosquitto_passwd"
        if os.path.exists("/usr/bin/mosquitto_passwd")
        else None
    )


def write_password_file(
    path: Path, credentials: Mapping[str, str], *, tool: str | None
) -> str:
    """Write a mosquitto password file (mode 0600); returns how it was hashed.

    With ``tool`` (a ``mosquitto_passwd`` path) the plain ``user:password``
    lines are written and hashed in place by ``mosquitto_passwd -U``, so the
    passwords never appear on a command line; without it they are hashed here.
    """
    for user, password in credentials.items():
        check_user(user)
        if not password or "\n" in password:
            raise ValueError(f"unusable password for {user!r}")
    tmp = path.with_name(f".{path.name}.new")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for user, password in credentials.items():
            f.write(f"{user}:{password if tool else hash_password(password)}\n")
    try:
        if tool:
            done = subprocess.run(
                [tool, "-U", str(tmp)],
                capture_output=True,
                text=True,
                timeout=_PASSWD_TIMEOUT,
            )
            if done.returncode != 0:
                raise RuntimeError(
                    f"{tool} -U failed ({done.returncode}): {done.stderr.strip()}"
                )
            hashed = tmp.read_text().splitlines()
            if len(hashed) != len(credentials) or not all(
                line.split(":", 1)[1].startswith("$") for line in hashed
            ):
                raise RuntimeError(f"{tool} -U did not hash every line of {tmp}")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return "mosquitto_passwd" if tool else "pbkdf2-sha512"
