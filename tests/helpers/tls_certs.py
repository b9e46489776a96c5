"""A throwaway CA and a server certificate for TLS brokers in tests (openssl)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)


def make_certs(
    directory: Path, names: str = "IP:127.0.0.1", cn: str = "127.0.0.1"
) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key), PEM files in directory.

    ``names`` is the server certificate's subjectAltName list.
    """
    ca_key, ca = directory / "ca.key", directory / "ca.pem"
    key, csr, cert = directory / "srv.key", directory / "srv.csr", directory / "srv.pem"
    _run(
        "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", str(ca_key), "-out", str(ca), "-subj", "/CN=edgeps test CA",
    )  # fmt: skip
    _run(
        "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
        "-out", str(csr), "-subj", f"/CN={cn}",
    )  # fmt: skip
    ext = directory / "ext.cnf"
    ext.write_text(f"subjectAltName={names}\n")
    _run(
        "openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey",
        str(ca_key), "-CAcreateserial", "-out", str(cert), "-days", "2",
        "-extfile", str(ext),
    )  # fmt: skip
    return ca, cert, key
