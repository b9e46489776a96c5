"""A genuine deflate bomb in .npz form: small on disk, gigabytes when inflated.

The zeros are deflated once per 16 MiB block with a full flush, which resets
the compressor, so every block compresses to the same bytes and the file is
written without ever holding (or compressing) the inflated size.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np

BLOCK = 16 << 20


def _deflated_zeros(head: bytes, n_zeros: int) -> tuple[bytes, int]:
    """A raw deflate stream of ``head`` then ``n_zeros`` zero bytes; its CRC-32."""
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [co.compress(head) + co.flush(zlib.Z_FULL_FLUSH)]
    crc = zlib.crc32(head)
    zeros = bytes(BLOCK)
    block = co.compress(zeros) + co.flush(zlib.Z_FULL_FLUSH)
    again = co.compress(zeros) + co.flush(zlib.Z_FULL_FLUSH)
    assert again == block, "a full flush did not reset the compressor"
    full, rest = divmod(n_zeros, BLOCK)
    parts += [block] * full
    for _ in range(full):
        crc = zlib.crc32(zeros, crc)
    tail = bytes(rest)
    parts.append(co.compress(tail) + co.flush())
    return b"".join(parts), zlib.crc32(tail, crc)


def _entry(
    out: io.BufferedIOBase, name: str, data: bytes, crc: int, size: int, method: int
) -> bytes:
    """Write one local entry; return its central directory record."""
    offset = out.tell()
    nb = name.encode()
    out.write(
        struct.pack(
            "<4s5H3L2H",
            b"PK\x03\x04",
            20,
            0,
            method,
            0,
            0x21,
            crc,
            len(data),
            size,
            len(nb),
            0,
        )
        + nb
        + data
    )
    return (
        struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            20,
            20,
            0,
            method,
            0,
            0x21,
            crc,
            len(data),
            size,
            len(nb),
            0,
            0,
            0,
            0,
            0,
            offset,
        )
        + nb
    )


def write_npz_bomb(path: Path, n_floats: int, header: np.ndarray) -> Path:
    """``params.npy``: ``n_floats`` float32 zeros, deflated; ``header.npy`` stored."""
    npy = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        npy, {"descr": "<f4", "fortran_order": False, "shape": (n_floats,)}
    )
    params, crc = _deflated_zeros(npy.getvalue(), 4 * n_floats)
    stored = io.BytesIO()
    np.save(stored, header)
    raw = stored.getvalue()
    with open(path, "wb") as out:
        central = [
            _entry(
                out, "params.npy", params, crc, len(npy.getvalue()) + 4 * n_floats, 8
            ),
            _entry(out, "header.npy", raw, zlib.crc32(raw), len(raw), 0),
        ]
        start = out.tell()
        out.write(b"".join(central))
        out.write(
            struct.pack(
                "<4s4H2LH", b"PK\x05\x06", 0, 0, 2, 2, out.tell() - start, start, 0
            )
        )
    return path
