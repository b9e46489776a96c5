"""The MicroPython model file: what a board loads to predict (``model.bin``).

Little-endian, read by ``edgeps_worker.predict`` a field at a time, the
parameters straight into one ``array('f')`` (firmware/README.md, "The model
file"):

    offset 0   4s  magic b"EPSM"
           4   u8  version (2; 1 is the same without the checksum)
           5   u8  flags: bit 0 set = a scaler follows the parameters
           6   u16 length S of the model spec text
           8   u32 n_params
          12   u16 n_features
          14   u16 n_names: class names that follow (0: class ids, linear)
          16   S bytes: the model spec, ASCII ("mlp:64-32-10")
               n_names times: u8 length L, L bytes of UTF-8 (a class name)
               n_params float32: the flat parameters (edgeps.kernels' layout)
               with a scaler: n_features float32 means, n_features float32
               scales (1 / std): a feature is used as (x - mean) * scale
               version 2: u32 CRC-32 (zlib's) of every byte before it

Every fault of a file read back is a ValueError naming the file and the fault:
a damaged one (the checksum), a truncated one, counts that run past its end,
or parameters that are not finite. A version 1 file has no checksum and is
still read, with every other check.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.kernels import ModelSpec
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.scaler import Scaler

MAGIC = b"EPSM"
VERSION = 2
VERSIONS = (1, 2)  # what read() takes (1: no checksum)
HEADER = "<4sBBHIHH"
HEADER_LEN = struct.calcsize(HEADER)
FLAG_SCALER = 1


def to_bytes(model: TrainedModel) -> bytes:
    """The file's bytes for ``model`` (the scaler as float32 mean and 1 / std)."""
    spec = str(model.spec).encode("ascii")
    names = [n.encode("utf-8") for n in model.card.classes or ()]
    if any(len(n) > 255 for n in names):
        raise ValueError("class names must be at most 255 bytes for a board")
    if model.spec.n_features > 0xFFFF:
        raise ValueError(
            f"a board's model file holds at most 65535 features; {model.spec} "
            f"takes {model.spec.n_features}"
        )
    scaler = model.card.scaler
    parts = [
        struct.pack(
            HEADER,
            MAGIC,
            VERSION,
            FLAG_SCALER if scaler is not None else 0,
            len(spec),
            model.spec.n_params,
            model.spec.n_features,
            len(names),
        ),
        spec,
        b"".join(bytes([len(n)]) + n for n in names),
        model.params.astype("<f4").tobytes(),
    ]
    if scaler is not None:
        mean, inv = scaler.offset_scale()
        parts += [mean.astype("<f4").tobytes(), inv.astype("<f4").tobytes()]
    body = b"".join(parts)
    return body + struct.pack("<I", zlib.crc32(body))


def write(model: TrainedModel, path: Path, meta: dict[str, Any]) -> Path:
    """Write ``model.bin`` (``meta`` is not kept: a board has no use for it)."""
    path.write_bytes(to_bytes(model))
    return path


def read(path: str | Path) -> TrainedModel:
    """A model file back as a model; its scaler as mean and std (one row's moments)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the model file: {exc}") from None
    try:
        return _parse(data)
    except (_Bad, ValueError) as exc:  # ModelCard's checks name no file
        raise ValueError(f"{path}: {exc}") from None


class _Bad(Exception):
    """What is wrong with a model file's bytes (read() adds the file's name)."""


def _parse(data: bytes) -> TrainedModel:
    if len(data) < HEADER_LEN:
        raise _Bad(f"{len(data)} bytes: too short for a model file")
    magic, version, flags, n_spec, n_params, nf, n_names = struct.unpack_from(
        HEADER, data
    )
    if magic != MAGIC or version not in VERSIONS:
        raise _Bad(f"not an edgeps model file (EPSM v{VERSIONS[0]}-v{VERSIONS[-1]})")
    if version >= 2:
        if len(data) < HEADER_LEN + 4:
            raise _Bad("too short for a model file")
        data, (crc,) = data[:-4], struct.unpack("<I", data[-4:])
        if zlib.crc32(data) != crc:
            raise _Bad("checksum mismatch: the file is damaged (export it again)")
    if flags & ~FLAG_SCALER:
        raise _Bad(f"unknown flags 0x{flags:02x}")
    off = HEADER_LEN
    if off + n_spec > len(data):
        raise _Bad("the model spec runs past the end of the file")
    try:
        spec = ModelSpec.parse(data[off : off + n_spec].decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Bad(f"bad model spec: {exc}") from None
    off += n_spec
    names = []
    for i in range(n_names):
        if off >= len(data) or off + 1 + data[off] > len(data):
            raise _Bad(f"{n_names} class names run past the end (at name {i + 1})")
        n = data[off]
        try:
            names.append(data[off + 1 : off + 1 + n].decode("utf-8"))
        except UnicodeDecodeError:
            raise _Bad(f"class name {i + 1} is not UTF-8") from None
        off += 1 + n
    want = off + 4 * n_params + (8 * nf if flags & FLAG_SCALER else 0)
    if spec.n_params != n_params or spec.n_features != nf or len(data) != want:
        raise _Bad(
            f"sizes do not match the model {spec} ({len(data)} bytes, {want} expected)"
        )
    params = np.frombuffer(data, "<f4", n_params, off).astype(np.float32)
    if not np.isfinite(params).all():
        raise _Bad("parameters that are not finite (NaN or inf)")
    off += 4 * n_params
    scaler = None
    if flags & FLAG_SCALER:
        mean = np.frombuffer(data, "<f4", nf, off).astype(np.float64)
        inv = np.frombuffer(data, "<f4", nf, off + 4 * nf).astype(np.float64)
        if not (np.isfinite(mean).all() and np.isfinite(inv).all() and (inv > 0).all()):
            raise _Bad("a scaler that is not finite and positive")
        scaler = _scaler(mean, 1.0 / inv)
    card = ModelCard(spec, tuple(names) if names else None, scaler)
    return TrainedModel(card, params)


def _scaler(mean: np.ndarray, std: np.ndarray) -> Scaler:
    """A scaler with this mean and std: the moments of a pair of rows mean +- std."""
    return Scaler.from_moments(2, 2.0 * mean, 2.0 * (np.square(mean) + np.square(std)))
