"""TLS for a LAN broker: a job's own CA and server certificate, made once with openssl.

Without TLS anyone on the LAN reads every board's password as it connects
and every message in flight. ``serve --lan-tls`` makes ``JOB-DIR/tls/`` the
first time (a CA, kept there, and a certificate for this machine's names and
addresses signed by it); boards trust ``ca.pem``. ``--lan-cert/--lan-key``
give a certificate made elsewhere instead. The private keys are mode 0600.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = 825  # the longest validity clients accept for a server certificate


@dataclass(frozen=True)
class ServerTls:
    """What the broker's listener serves, and the CA its clients trust (None: given)."""

    cert: Path
    key: Path
    ca: Path | None


def subject_names(listen_host: str) -> list[str]:
    """The server certificate's subjectAltName entries for this machine."""
    names = ["DNS:localhost", "IP:127.0.0.1"]
    host = socket.gethostname()
    if host and host != "localhost":
        names.append(f"DNS:{host}")
    for extra in (listen_host, _address_of(host)):
        if extra and extra not in ("0.0.0.0", "::", "127.0.0.1"):
            try:
                names.append(f"IP:{ipaddress.ip_address(extra)}")
            except ValueError:
                names.append(f"DNS:{extra}")
    return list(dict.fromkeys(names))


def _address_of(host: str) -> str:
    try:
        return socket.gethostbyname(host)
    except OSError:
        return ""


def own_certificates(directory: Path, listen_host: str) -> ServerTls:
    """The job's CA and server certificate in ``directory``, made when missing."""
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    files = ServerTls(directory / "server.pem", directory / "server.key", ca)
    if all(p.is_file() for p in (files.cert, files.key, ca, ca_key)):
        return files
    openssl = shutil.which("openssl")
    if openssl is None:
        raise FileNotFoundError(
            "--lan-tls makes its certificates with openssl, which is not installed "
            "(apt-get install openssl), or give --lan-cert and --lan-key"
        )
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    csr, ext = directory / "server.csr", directory / "server.ext"
    old = os.umask(0o077)  # the keys are born private
    try:
        _run(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
             str(DAYS), "-keyout", str(ca_key), "-out", str(ca), "-subj",
             "/CN=edgeps job CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
        _run(openssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout",
             str(files.key), "-out", str(csr), "-subj",
             f"/CN={socket.gethostname() or 'localhost'}")  # fmt: skip
        ext.write_text(f"subjectAltName={','.join(subject_names(listen_host))}\n")
        _run(openssl, "x509", "-req", "-in", str(csr), "-CA", str(ca),
             "-CAkey", str(ca_key), "-CAcreateserial", "-out", str(files.cert),
             "-days", str(DAYS), "-extfile", str(ext))  # fmt: skip
    finally:
        os.umask(old)
        for temp in (csr, ext, directory / "ca.srl"):
            temp.unlink(missing_ok=True)
    ca.chmod(0o644)
    files.cert.chmod(0o644)
    return files


def given_certificates(cert: str | None, key: str | None) -> ServerTls:
    """``--lan-cert`` and ``--lan-key``, checked to exist and come together."""
    if (cert is None) != (key is None):
        raise ValueError("--lan-cert and --lan-key must be given together")
    assert cert is not None and key is not None
    for flag, path in (("--lan-cert", cert), ("--lan-key", key)):
        if not Path(path).is_file():
            raise FileNotFoundError(f"{flag}: no such file: {path}")
    return ServerTls(Path(cert).resolve(), Path(key).resolve(), None)


def _run(*cmd: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise RuntimeError(f"openssl {cmd[1]}: {last}")
