"""Per-device HMAC keys: a master key, and each worker's key derived from it.

Derivation (the protocol verifies each worker with its own key)::

    worker_key = HMAC-SHA256(master, b"edgeps-worker-key\\x00" + worker_id_ascii)

``master`` is the master key's bytes (32 random bytes from `secrets` for a key
made by ``edgeps keys new``), ``worker_id_ascii`` the worker id
(``[A-Za-z0-9_-]{1,32}``) as ASCII; the result is the 32-byte digest. Only the
host needs the master key; each board holds its own key only, so a board that
is taken apart gives away no other board's key.

Key files are text. One made here is a header line naming it, then the key as
64 lowercase hex digits::

    # edgeps-key worker w00 -- 32 bytes as hex; keep it secret
    5b1c...

A file without that header is read as the existing ``--hmac-key-file``
reads it: its bytes, surrounding whitespace stripped, are the key. The header
keeps the two apart: a hex-looking shared key written by hand stays the bytes
it always was.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

KEY_BYTES = 32
DERIVE_LABEL = b"edgeps-worker-key\x00"
HEADER = "# edgeps-key"
_HEADER_RE = re.compile(
    r"^# edgeps-key (master|worker ([A-Za-z0-9_-]{1,32}))(?:\s.*)?$"
)
_WORKER_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_HEX_RE = re.compile(r"^[0-9a-fA-F]*$")


class KeyFileError(ValueError):
    """A key file that cannot be used, with the reason in words."""


@dataclass(frozen=True)
class KeyFile:
    """A key read from a file: its bytes and what the file says it is.

    ``kind`` is ``"master"``, ``"worker"`` (then ``worker_id`` is set) or
    ``"raw"`` (a file without the header, read as ``--hmac-key-file`` reads it).
    """

    key: bytes
    kind: str
    worker_id: str | None = None


def check_worker_id(worker_id: str) -> str:
    """The worker id if it is one (``[A-Za-z0-9_-]{1,32}``), else ValueError."""
    if not isinstance(worker_id, str) or not _WORKER_ID_RE.match(worker_id):
        raise ValueError(f"a worker id is 1..32 of [A-Za-z0-9_-], got {worker_id!r}")
    return worker_id


def worker_list(text: str) -> list[str]:
    """``"w00,w01"`` -> ``["w00", "w01"]``; ValueError on a bad or repeated id."""
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise ValueError("the worker list is empty")
    for wid in ids:
        check_worker_id(wid)
    if len(set(ids)) != len(ids):
        raise ValueError(f"the worker list repeats an id: {text!r}")
    return ids


def new_master_key() -> bytes:
    """32 random bytes from the operating system's CSPRNG."""
    return secrets.token_bytes(KEY_BYTES)


def derive_worker_key(master: bytes, worker_id: str) -> bytes:
    """HMAC-SHA256(master, b"edgeps-worker-key\\x00" + worker id): 32 bytes."""
    if not isinstance(master, (bytes, bytearray)) or not master:
        raise ValueError("the master key must be non-empty bytes")
    wid = check_worker_id(worker_id).encode("ascii")
    return hmac.new(bytes(master), DERIVE_LABEL + wid, hashlib.sha256).digest()


def format_key_file(key: bytes, *, worker_id: str | None = None) -> str:
    """The text of a key file: the header line, then the key in hex."""
    if len(key) != KEY_BYTES:
        raise ValueError(f"a key is {KEY_BYTES} bytes, got {len(key)}")
    if worker_id is None:
        header = f"{HEADER} master -- 32 bytes as hex; keep it secret, host only"
    else:
        check_worker_id(worker_id)
        header = (
            f"{HEADER} worker {worker_id} -- 32 bytes as hex, "
            f"HMAC-SHA256(master, 'edgeps-worker-key\\0' + '{worker_id}')"
        )
    return f"{header}\n{key.hex()}\n"


def parse_key_text(data: bytes, source: str = "key file") -> KeyFile:
    """Bytes of a key file -> KeyFile; KeyFileError says what is wrong."""
    text = data.strip()
    if not text:
        raise KeyFileError(f"the {source} is empty")
    if not text.startswith(HEADER.encode()):
        return KeyFile(text, "raw")
    try:
        lines = text.decode("ascii").splitlines()
    except UnicodeDecodeError:
        raise KeyFileError(f"the {source} is not ASCII text") from None
    m = _HEADER_RE.match(lines[0].strip())
    if m is None:
        raise KeyFileError(
            f"the {source} has a bad header line {lines[0].strip()!r} "
            f"(want '{HEADER} master' or '{HEADER} worker ID')"
        )
    body = [ln.strip() for ln in lines[1:] if ln.strip() and not ln.startswith("#")]
    if len(body) != 1:
        raise KeyFileError(
            f"the {source} must hold one line of hex after its header, "
            f"found {len(body)}"
        )
    digits = body[0]
    if not _HEX_RE.match(digits) or len(digits) % 2:
        raise KeyFileError(f"the {source} does not hold valid hex")
    key = bytes.fromhex(digits)
    if len(key) != KEY_BYTES:
        raise KeyFileError(
            f"the {source} holds a {len(key)}-byte key, want {KEY_BYTES} bytes"
        )
    kind = "master" if m.group(1) == "master" else "worker"
    return KeyFile(key, kind, m.group(2))


def load_key_file(path: str | os.PathLike[str]) -> KeyFile:
    """Read a key file (header + hex, or raw); warn when others may read it."""
    p = Path(path)
    source = f"key file {p}"
    try:
        data = p.read_bytes()
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise KeyFileError(f"the {source} does not exist") from None
    except OSError as exc:
        raise KeyFileError(f"cannot read the {source}: {exc.strerror}") from None
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "the %s is readable by other users (mode %o): chmod 600 %s",
            source,
            stat.S_IMODE(mode),
            p,
        )
    return parse_key_text(data, source)


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    """The key's bytes from a key file (see the module docstring for formats)."""
    return load_key_file(path).key


def write_private_file(
    path: str | os.PathLike[str], text: str, *, force: bool = False
) -> Path:
    """Write ``text`` to a file of mode 0600; refuse to overwrite unless forced.

    The file is mode 0600 from its creation (never briefly readable by others);
    a forced overwrite goes through a new file renamed over the old one.
    """
    p = Path(path)
    if not force:
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise FileExistsError(f"{p} exists; pass --force to overwrite it") from None
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        return p
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return p


def write_key_file(
    path: str | os.PathLike[str],
    key: bytes,
    *,
    worker_id: str | None = None,
    force: bool = False,
) -> Path:
    """Write a master key (``worker_id`` None) or a worker key, mode 0600."""
    return write_private_file(
        path, format_key_file(key, worker_id=worker_id), force=force
    )
