"""Reading a checkpoint back with bounded memory, every field checked.

The zip's directory is checked first (member names, compression methods,
declared sizes against what the model needs), then each member's .npy header
(dtype, shape) before its bytes are read, and never more bytes than were
declared; then every header field. Each problem is one `CheckpointError`
naming the file and what is wrong.
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
import zlib
from pathlib import Path
from typing import IO, Any, TypeGuard

import numpy as np
from edgeps_worker import wire_host as wire

from edgeps.core.resume import MAX_VERSION
from edgeps.kernels.optim import OPTIMIZERS
from edgeps.runtime.checkpoint import FORMAT, Checkpoint, CheckpointError

MAX_ARRAYS = 8  # optimizer state arrays (adam has 2)
MAX_HEADER = 16 << 20  # bytes of JSON header (worker stats grow with workers)
NPY_HEADER_MAX = 4096  # bytes of one member's .npy header
_ZIP_ENTRY = 1024  # zip bytes around one member (local + central header, zip64)
_INT_MAX = 2**63 - 1
_COUNTERS = ("accepted", "max_staleness")


class Reader:
    """One pass over one file: the zip directory, the members, the header."""

    def __init__(self, path: Path, n_params: int | None) -> None:
        self.path = path
        self.n_params = n_params

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {self.path}: {what}")

    def read(self) -> Checkpoint:
        size = self.path.stat().st_size
        if size == 0:
            raise self.fail("the file is empty (not an edgeps checkpoint)")
        if self.n_params is not None and size > self._budget():
            raise self.fail(
                f"{size} bytes is more than a checkpoint of {self.n_params} "
                f"params can take ({self._budget()})"
            )
        try:
            with zipfile.ZipFile(self.path) as zf:
                members = self._directory(zf, size)
                raw = self._member(zf, members["header"], np.dtype(np.uint8))
                header = self._header(raw.tobytes())
                params = self._member(zf, members["params"], np.dtype("<f4"))
                names = header["arrays"]
                stored = set(members) - {"header", "params"}
                if stored != {f"a{i}" for i in range(len(names))}:
                    raise self.fail(
                        f"the header names {len(names)} optimizer arrays, the file "
                        f"holds {sorted(stored)}"
                    )
                arrays = {
                    name: self._member(zf, members[f"a{i}"], np.dtype("<f4"))
                    for i, name in enumerate(names)
                }
        except CheckpointError:
            raise
        except (
            zipfile.BadZipFile,
            zlib.error,
            struct.error,
            EOFError,
            OSError,
            ValueError,
            OverflowError,
            NotImplementedError,
        ) as exc:
            raise self.fail(
                f"truncated, corrupted or not an edgeps checkpoint ({exc})"
            ) from None
        return self._assemble(header, params, arrays)

    # ---- the zip's directory and members -----------------------------------

    def _budget(self) -> int:
        """The largest file a checkpoint of ``n_params`` can be, stored or not."""
        assert self.n_params is not None
        entry = NPY_HEADER_MAX + _ZIP_ENTRY
        return (
            MAX_HEADER + (MAX_ARRAYS + 1) * 4 * self.n_params + (MAX_ARRAYS + 2) * entry
        )

    def _limit(self, name: str, file_size: int) -> int:
        """The most bytes member ``name`` may declare, uncompressed."""
        if self.n_params is None:
            return file_size
        if name == "header":
            return NPY_HEADER_MAX + MAX_HEADER
        return NPY_HEADER_MAX + 4 * self.n_params

    def _directory(self, zf: zipfile.ZipFile, file_size: int) -> dict[str, Any]:
        """Members by name, after checking names, methods and declared sizes."""
        allowed = {"header", "params"} | {f"a{i}" for i in range(MAX_ARRAYS)}
        members: dict[str, zipfile.ZipInfo] = {}
        for info in zf.infolist():
            name = info.filename.removesuffix(".npy")
            if name not in allowed or not info.filename.endswith(".npy"):
                raise self.fail(f"unexpected member {info.filename[:64]!r}")
            if name in members:
                raise self.fail(f"member {info.filename!r} appears twice")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise self.fail(
                    f"member {info.filename!r} uses compression method "
                    f"{info.compress_type} (only stored or deflated)"
                )
            if info.flag_bits & 0x1:
                raise self.fail(f"member {info.filename!r} is encrypted")
            limit = self._limit(name, file_size)
            if info.file_size > limit:
                why = (
                    f"more than the file's {file_size} bytes"
                    if self.n_params is None
                    else f"more than {limit}, what "
                    + (
                        "a header may hold"
                        if name == "header"
                        else f"a model of {self.n_params} params needs "
                        "(a checkpoint of another model?)"
                    )
                )
                raise self.fail(
                    f"member {info.filename!r} declares {info.file_size} bytes "
                    f"uncompressed, {why}"
                )
            members[name] = info
        for name in ("header", "params"):
            if name not in members:
                raise self.fail(f"no {name!r} in the file (not an edgeps checkpoint)")
        return members

    def _member(
        self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, dtype: np.dtype[Any]
    ) -> np.ndarray:
        """A flat array of ``dtype``, read from the member's own declared bytes."""
        name = info.filename
        with zf.open(info) as f:
            count = self._npy_header(f, name, dtype)
            nbytes = count * dtype.itemsize
            if f.tell() + nbytes != info.file_size:
                raise self.fail(
                    f"member {name!r}: its .npy header declares {nbytes} bytes of "
                    f"data but the zip declares {info.file_size - f.tell()}"
                )
            data = f.read(nbytes)
            if len(data) != nbytes or f.read(1):
                raise self.fail(f"member {name!r} is truncated")
        return np.frombuffer(data, dtype=dtype).copy()

    def _npy_header(self, f: IO[bytes], name: str, dtype: np.dtype[Any]) -> int:
        """The element count of a flat ``dtype`` array (anything else refused)."""
        fmt = np.lib.format
        try:
            major_minor = fmt.read_magic(f)
            if major_minor == (1, 0):
                shape, fortran, got = fmt.read_array_header_1_0(
                    f, max_header_size=NPY_HEADER_MAX
                )
            elif major_minor == (2, 0):
                shape, fortran, got = fmt.read_array_header_2_0(
                    f, max_header_size=NPY_HEADER_MAX
                )
            else:
                raise ValueError(f"unsupported .npy version {major_minor}")
        except (ValueError, SyntaxError, TypeError, RecursionError) as exc:
            raise self.fail(f"member {name!r} is not a .npy array ({exc})") from None
        if got.hasobject:
            raise self.fail(f"member {name!r} holds Python objects (refused: pickle)")
        if got != dtype or len(shape) != 1 or shape[0] < 0 or fortran:
            raise self.fail(
                f"member {name!r} must be a flat {dtype} array, got {got} {shape}"
            )
        return int(shape[0])

    # ---- the header's fields -----------------------------------------------

    def _header(self, raw: bytes) -> dict[str, Any]:
        try:
            header = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise self.fail(f"the header is not valid JSON ({exc})") from None
        if not isinstance(header, dict):
            raise self.fail(f"the header must be a JSON object, got {_kind(header)}")
        if header.get("format") != FORMAT:
            raise self.fail(f"unknown checkpoint format {header.get('format')!r}")
        version = header.get("version")
        if not _is_int(version) or not 0 <= version <= MAX_VERSION:
            raise self.fail(
                f"version must be an int in 0..{MAX_VERSION}, got {version!r}"
            )
        names = header.get("arrays", [])
        if (
            not isinstance(names, list)
            or len(names) > MAX_ARRAYS
            or not all(isinstance(n, str) for n in names)
            or len(set(names)) != len(names)
        ):
            raise self.fail(f"'arrays' must be a list of at most {MAX_ARRAYS} names")
        header["arrays"] = names
        if "optimizer_state" not in header:
            raise self.fail("the header has no optimizer_state")
        for key in ("worker_stats", "meta"):
            if not isinstance(header.get(key, {}), dict):
                raise self.fail(
                    f"{key} must be a JSON object, got {_kind(header[key])}"
                )
        return header

    def _assemble(
        self,
        header: dict[str, Any],
        params: np.ndarray,
        arrays: dict[str, np.ndarray],
    ) -> Checkpoint:
        if params.size == 0:
            raise self.fail("params are empty")
        if self.n_params is not None and params.size != self.n_params:
            raise self.fail(
                f"params hold {params.size} values, the model has {self.n_params}"
            )
        if not np.isfinite(params).all():
            raise self.fail("params contain NaN or inf")
        for name, arr in arrays.items():
            if arr.size != params.size or not np.isfinite(arr).all():
                raise self.fail(
                    f"optimizer array {name!r} must hold {params.size} finite values"
                )
        used: set[str] = set()
        state = self._unflatten(header["optimizer_state"], arrays, used)
        self._check_optimizer(state, params.size)
        if set(arrays) - used:
            raise self.fail(
                f"optimizer_state names none of the arrays {sorted(set(arrays) - used)}"
            )
        stats = header.get("worker_stats", {})
        for wid, s in stats.items():
            self._check_stats(wid, s)
        return Checkpoint(
            params=params,
            version=int(header["version"]),
            optimizer_state=state,
            worker_stats=dict(stats),
            meta=dict(header.get("meta", {})),
        )

    def _unflatten(
        self, value: Any, arrays: dict[str, np.ndarray], used: set[str]
    ) -> Any:
        if isinstance(value, dict):
            if set(value) == {"__array__"}:
                name = value["__array__"]
                if not isinstance(name, str) or name not in arrays:
                    raise self.fail(f"optimizer_state names a missing array {name!r}")
                used.add(name)
                return arrays[name]
            return {k: self._unflatten(v, arrays, used) for k, v in value.items()}
        if isinstance(value, list):
            return [self._unflatten(v, arrays, used) for v in value]
        return value

    def _check_optimizer(self, state: Any, n_params: int) -> None:
        """``{}`` (none saved) or what an optimizer's ``state_dict()`` gives."""
        if not isinstance(state, dict):
            raise self.fail(f"optimizer_state must be an object, got {_kind(state)}")
        if not state:
            return
        name = state.get("name")
        if name not in OPTIMIZERS:
            raise self.fail(f"optimizer_state names no known optimizer: {name!r}")
        if state.get("n_params") != n_params:
            raise self.fail(
                f"optimizer_state is for {state.get('n_params')!r} params, "
                f"not {n_params}"
            )
        t = state.get("t")
        if not _is_int(t) or not 0 <= t <= _INT_MAX:
            raise self.fail(f"optimizer_state has a bad step count {t!r}")
        hyper = state.get("hyper", {})
        if not isinstance(hyper, dict) or not all(
            _is_number(v) and math.isfinite(v) for v in hyper.values()
        ):
            raise self.fail("optimizer_state's hyper must map names to finite numbers")
        buffers = state.get("buffers")
        if not isinstance(buffers, dict) or not all(
            isinstance(v, np.ndarray) for v in buffers.values()
        ):
            raise self.fail("optimizer_state's buffers must map names to arrays")

    def _check_stats(self, wid: str, stats: Any) -> None:
        """Counters of one worker: ids as on the wire, non-negative ints."""
        if not wire.valid_id(wid):
            raise self.fail(f"worker_stats has a bad worker id {wid[:40]!r}")
        if not isinstance(stats, dict):
            raise self.fail(f"worker_stats[{wid!r}] must be an object")
        for key, value in stats.items():
            if key in _COUNTERS:
                ok = _is_count(value)
            elif key == "rejected":
                ok = isinstance(value, dict) and all(
                    isinstance(k, str) and _is_count(v) for k, v in value.items()
                )
            else:
                raise self.fail(f"worker_stats[{wid!r}] has an unknown key {key!r}")
            if not ok:
                raise self.fail(
                    f"worker_stats[{wid!r}][{key!r}] must be a count, got "
                    f"{str(value)[:40]!r}"
                )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a checkpoint may hold")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return _is_int(value) and 0 <= value <= _INT_MAX


def _kind(value: Any) -> str:
    names = {"dict": "an object", "list": "a list", "str": "a string"}
    return names.get(type(value).__name__, type(value).__name__)
