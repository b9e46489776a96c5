"""`edgeps serve --lan`: a mosquitto for boards on a LAN, locked down from the start.

Serve writes a job directory (``--job-dir``, ``edgeps-JOB`` by default) and
starts mosquitto from it:

- ``master.key``: the master key (kept when it exists; ``--hmac-key-file``
  names another), from which ``keys/<id>.key`` is derived for each board;
- ``broker/``: what `edgeps broker-config` writes (``mosquitto.conf``,
  ``passwd``, ``acl``, ``credentials/<user>.password``): no anonymous
  clients, each board's MQTT user is its id and may publish only on its own
  up topic and read only its own down topic, the model and shared
  parameters. Kept across runs while it still fits (same listener, a
  password for every board), so boards keep their credentials.

Serve connects as ``edgeps-host`` with its own password and signs and
verifies with the per-device keys; it prints what each board needs.
``--listen HOST:PORT`` (default 0.0.0.0:1883) implies ``--lan``.
"""

from __future__ import annotations

import dataclasses
import getpass
import socket
from dataclasses import dataclass
from pathlib import Path

from edgeps.runtime.config import ServeConfig
from edgeps.security.broker_files import DEFAULT_HOST_USER, write_broker_config
from edgeps.security.keys import (
    derive_worker_key,
    load_key_file,
    new_master_key,
    worker_list,
    write_key_file,
)
from edgeps.security.mosquitto import Listen, parse_listen
from edgeps.transport.broker import BrokerAddress, BrokerHandle, launch_mosquitto
from edgeps.transport.broker_tuning import DEFAULT_SENSORS

DEFAULT_LISTEN = "0.0.0.0:1883"
_WILDCARDS = ("", "0.0.0.0", "::")
_LISTED = 16  # boards named one by one in the banner


@dataclass(frozen=True)
class LanBroker:
    """The files of one job's LAN broker and how to start it."""

    job: str
    job_dir: Path
    listen: Listen
    workers: tuple[str, ...]
    conf: Path
    master_key: Path
    host_password: Path
    reused: bool

    @property
    def address(self) -> BrokerAddress:
        """Where serve itself reaches the broker."""
        host = "127.0.0.1" if self.listen.host in _WILDCARDS else self.listen.host
        return BrokerAddress(host, self.listen.port)

    @property
    def board_url(self) -> str:
        """What the boards connect to (this machine's name for a wildcard listener)."""
        host = self.listen.host
        if host in _WILDCARDS:
            host = socket.gethostname()
        return f"mqtt://{host}:{self.listen.port}"

    def key_of(self, worker_id: str) -> Path:
        return self.job_dir / "keys" / f"{worker_id}.key"

    def password_of(self, worker_id: str) -> Path:
        return self.job_dir / "broker" / "credentials" / f"{worker_id}.password"

    def start(self) -> BrokerHandle:
        return launch_mosquitto(
            self.conf, self.address, sensors=max(len(self.workers), DEFAULT_SENSORS)
        )

    def instructions(self) -> list[str]:
        """What to copy to each board, for the banner."""
        d, url = self.job_dir, self.board_url
        lines = [
            f"LAN broker: no anonymous clients, one user and ACL per board; files in "
            f"{d}{' (reused)' if self.reused else ''}; {self.master_key.name} stays "
            "on this host",
            f"each board connects to {url} as its id and gets only its own two files:",
        ]
        for wid in self.workers[:_LISTED]:
            lines.append(f"  {wid}: {self.password_of(wid)}  {self.key_of(wid)}")
        if len(self.workers) > _LISTED:
            lines.append(
                f"  ... {len(self.workers) - _LISTED} more, named the same way"
            )
        lines += [
            'ESP32 cfg.json: "username": ID, "password": the .password line, '
            '"hmac_key": the .key file\'s hex line',
            f"Raspberry Pi: edgeps worker --broker {url} --job {self.job} --id ID "
            "--username ID --password-file ID.password --hmac-key-file ID.key ...",
        ]
        return lines


def lan_wanted(cfg: ServeConfig) -> bool:
    return cfg.lan or cfg.listen is not None


def prepare_lan(cfg: ServeConfig) -> tuple[ServeConfig, LanBroker | None]:
    """Write the job directory when serve starts a LAN broker; the config serve uses.

    The returned config connects as the host user with its password and
    signs with the master key. Nothing is started here.
    """
    if not lan_wanted(cfg):
        return cfg, None
    if cfg.broker not in ("auto", "mosquitto"):
        raise ValueError(
            "--lan/--listen start mosquitto here: use them with --broker auto or "
            f"mosquitto, not {cfg.broker!r}"
        )
    if cfg.username is not None or cfg.password_file is not None:
        raise ValueError("--lan makes serve's own MQTT user: drop --username")
    if not cfg.boards:
        raise ValueError("--lan needs --boards ID,ID,... (the boards to let in)")
    workers = tuple(worker_list(cfg.boards))
    listen = parse_listen(cfg.listen or DEFAULT_LISTEN)
    job_dir = Path(cfg.job_dir or f"edgeps-{cfg.job}").resolve()
    job_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    master_path = Path(cfg.hmac_key_file or job_dir / "master.key")
    if not master_path.exists():
        write_key_file(master_path, new_master_key())
    master = load_key_file(master_path).key
    (job_dir / "keys").mkdir(mode=0o700, exist_ok=True)
    for wid in workers:  # derived, so rewriting them changes nothing
        write_key_file(
            job_dir / "keys" / f"{wid}.key",
            derive_worker_key(master, wid),
            worker_id=wid,
            force=True,
        )
    broker_dir = job_dir / "broker"
    conf = broker_dir / "mosquitto.conf"
    reused = _fits(broker_dir, listen, workers)
    if not reused:
        write_broker_config(
            broker_dir,
            job=cfg.job,
            workers=list(workers),
            listen=listen,
            run_as=getpass.getuser(),  # serve starts it: it runs as serve does
            force=True,
            sensors=max(len(workers), DEFAULT_SENSORS),
        )
    lan = LanBroker(
        job=cfg.job,
        job_dir=job_dir,
        listen=listen,
        workers=workers,
        conf=conf,
        master_key=master_path,
        host_password=broker_dir / "credentials" / f"{DEFAULT_HOST_USER}.password",
        reused=reused,
    )
    served = dataclasses.replace(
        cfg,
        username=DEFAULT_HOST_USER,
        password_file=str(lan.host_password),
        hmac_key_file=str(master_path),
    )
    return served, lan


def _fits(broker_dir: Path, listen: Listen, workers: tuple[str, ...]) -> bool:
    """True when an earlier setup has this listener and a password for every board."""
    conf = broker_dir / "mosquitto.conf"
    if not conf.is_file():
        return False
    line = f"listener {listen.port} {listen.host}".rstrip()
    if line not in conf.read_text().splitlines():
        return False
    creds = broker_dir / "credentials"
    users = (DEFAULT_HOST_USER, *workers)
    return all((creds / f"{u}.password").is_file() for u in users)
