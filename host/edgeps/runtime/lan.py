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

The broker never runs as root: serve started as root has mosquitto drop to
its ``mosquitto`` system user (the job directory is then traversable by that
user's group, its secrets still 0600), and refuses when there is none.
``--lan-tls`` puts the listener on TLS (default port 8883) with the job's own
CA (``edgeps.security.tls_files``); ``--lan-cert/--lan-key`` give a
certificate made elsewhere. Serve's own hop to it, on 127.0.0.1, is TLS too
(trusting the job's CA; with a given certificate, which need not name
127.0.0.1, without the certificate check on that loopback hop).
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import socket
from dataclasses import dataclass
from pathlib import Path

from edgeps.runtime.config import ServeConfig
from edgeps.security.broker_files import (
    DEFAULT_HOST_USER,
    default_run_as,
    install_server_tls,
    write_broker_config,
)
from edgeps.security.keys import (
    derive_worker_key,
    load_key_file,
    new_master_key,
    worker_list,
    write_key_file,
)
from edgeps.security.mosquitto import Listen, parse_listen
from edgeps.security.tls_files import ServerTls, given_certificates, own_certificates
from edgeps.transport.broker import BrokerAddress, BrokerHandle, launch_mosquitto
from edgeps.transport.broker_tuning import DEFAULT_SENSORS

DEFAULT_LISTEN = "0.0.0.0:1883"
DEFAULT_TLS_LISTEN = "0.0.0.0:8883"
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
    tls: ServerTls | None = None

    @property
    def address(self) -> BrokerAddress:
        """Where serve itself reaches the broker."""
        host = "127.0.0.1" if self.listen.host in _WILDCARDS else self.listen.host
        return BrokerAddress(host, self.listen.port, self.tls is not None)

    @property
    def board_url(self) -> str:
        """What the boards connect to (this machine's name for a wildcard listener)."""
        host = self.listen.host
        if host in _WILDCARDS:
            host = socket.gethostname()
        scheme = "mqtts" if self.tls is not None else "mqtt"
        return f"{scheme}://{host}:{self.listen.port}"

    def key_of(self, worker_id: str) -> Path:
        return self.job_dir / "keys" / f"{worker_id}.key"

    def password_of(self, worker_id: str) -> Path:
        return self.job_dir / "broker" / "credentials" / f"{worker_id}.password"

    def start(self) -> BrokerHandle:
        if os.geteuid() == 0:
            _check_reachable(self.job_dir, _conf_user(self.conf))
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
        ca = self.tls.ca if self.tls is not None else None
        trust = "the CA of the --lan-cert certificate" if ca is None else str(ca)
        lines += [
            'ESP32 cfg.json: "username": ID, "password": the .password line, '
            '"hmac_key": the .key file\'s hex line'
            + (f', "tls_ca": {trust}' if self.tls is not None else ""),
            f"Raspberry Pi: edgeps worker --broker {url} --job {self.job} --id ID "
            "--username ID --password-file ID.password --hmac-key-file ID.key "
            + (f"--tls-ca {ca if ca is not None else 'CA.pem'} " if self.tls else "")
            + "...",
        ]
        if self.tls is None:
            lines.append(
                "the LAN link is plain TCP: passwords and messages cross it in "
                "clear; --lan-tls puts it on TLS"
            )
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
    wants_tls = cfg.lan_tls or cfg.lan_cert is not None or cfg.lan_key is not None
    listen = parse_listen(
        cfg.listen or (DEFAULT_TLS_LISTEN if wants_tls else DEFAULT_LISTEN)
    )
    run_as = _broker_user(listen)
    job_dir = Path(cfg.job_dir or f"edgeps-{cfg.job}").resolve()
    job_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    _let_broker_in(job_dir, run_as)
    tls = None
    if cfg.lan_cert is not None or cfg.lan_key is not None:
        tls = given_certificates(cfg.lan_cert, cfg.lan_key)
    elif cfg.lan_tls:
        tls = own_certificates(job_dir / "tls", listen.host)
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
    reused = _fits(broker_dir, listen, workers, tls is not None, run_as)
    if not reused:
        write_broker_config(
            broker_dir,
            job=cfg.job,
            workers=list(workers),
            listen=listen,
            run_as=run_as,  # serve starts it: as serve does, or root's mosquitto
            force=True,
            sensors=max(len(workers), DEFAULT_SENSORS),
            tls=None if tls is None else (tls.cert, tls.key),
        )
    elif tls is not None:  # a renewed certificate is taken on every start
        install_server_tls(broker_dir, (tls.cert, tls.key), run_as)
    lan = LanBroker(
        job=cfg.job,
        job_dir=job_dir,
        listen=listen,
        workers=workers,
        conf=conf,
        master_key=master_path,
        host_password=broker_dir / "credentials" / f"{DEFAULT_HOST_USER}.password",
        reused=reused,
        tls=tls,
    )
    served = dataclasses.replace(
        cfg,
        username=DEFAULT_HOST_USER,
        password_file=str(lan.host_password),
        hmac_key_file=str(master_path),
    )
    if tls is not None:
        # serve's own hop, to 127.0.0.1: a given certificate need not name it
        served = dataclasses.replace(
            served,
            broker=lan.address.url,
            tls_ca=None if tls.ca is None else str(tls.ca),
            tls_insecure=tls.ca is None,
        )
    return served, lan


def _broker_user(listen: Listen) -> str:
    """The user mosquitto runs as; ValueError rather than root off loopback."""
    run_as = default_run_as()
    if run_as == "root" and listen.host not in ("127.0.0.1", "::1", "localhost"):
        raise ValueError(
            "serve --lan runs as root and there is no `mosquitto` system user for "
            "the broker to drop to: create one (`useradd --system mosquitto`) or "
            "run serve as an ordinary user"
        )
    return run_as


def _let_broker_in(job_dir: Path, run_as: str) -> None:
    """As root, mosquitto reads its files after dropping to ``run_as``: let that
    user's group through the job directory (0710), never list or read it."""
    if os.geteuid() != 0:
        return
    entry = pwd.getpwnam(run_as)
    os.chown(job_dir, 0, entry.pw_gid)
    job_dir.chmod(0o710)


def _fits(
    broker_dir: Path,
    listen: Listen,
    workers: tuple[str, ...],
    tls: bool = False,
    run_as: str | None = None,
) -> bool:
    """True when an earlier setup has this listener (TLS or not, the same user)
    and a password for every board."""
    conf = broker_dir / "mosquitto.conf"
    if not conf.is_file():
        return False
    line = f"listener {listen.port} {listen.host}".rstrip()
    lines = conf.read_text().splitlines()
    if line not in lines or tls != any(ln.startswith("certfile ") for ln in lines):
        return False
    if run_as is not None and f"user {run_as}" not in lines:
        return False
    creds = broker_dir / "credentials"
    users = (DEFAULT_HOST_USER, *workers)
    return all((creds / f"{u}.password").is_file() for u in users)


def _conf_user(conf: Path) -> str:
    users = [ln[5:] for ln in conf.read_text().splitlines() if ln.startswith("user ")]
    return users[-1] if users else "root"


def _check_reachable(job_dir: Path, run_as: str) -> None:
    """ValueError when the broker's user cannot reach its files (a 0700 parent,
    such as /root): mosquitto would fail to start with no word of why."""
    if run_as == "root":
        return
    entry = pwd.getpwnam(run_as)
    for parent in job_dir.parents:
        st = parent.stat()
        if not (
            st.st_mode & 0o001
            or st.st_uid == entry.pw_uid
            and st.st_mode & 0o100
            or st.st_gid == entry.pw_gid
            and st.st_mode & 0o010
        ):
            raise ValueError(
                f"the broker runs as {run_as}, who cannot enter {parent} (mode "
                f"{st.st_mode & 0o777:o}) to read its files in {job_dir}: give "
                "--job-dir a place it can reach, e.g. /var/lib/edgeps/JOB"
            )
