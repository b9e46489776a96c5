"""Bad checkpoint files: each is one clear error naming the file, read with bounded
memory (sizes are checked from the zip's directory before anything is inflated)."""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.resume import MAX_VERSION, checked_checkpoint
from edgeps.core.types import WorkerStats
from edgeps.policy.asp import ASP
from edgeps.runtime.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
)

from tests.helpers.zip_bomb import write_npz_bomb

N = 64  # the model's parameter count in these tests


def good_file(path: Path) -> Path:
    """A checkpoint as serve writes it: params, adam state, one worker's counters."""
    rng = np.random.default_rng(1)
    state = {
        "name": "adam",
        "n_params": N,
        "t": 3,
        "hyper": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
        "buffers": {
            "m": rng.standard_normal(N).astype(np.float32),
            "v": np.abs(rng.standard_normal(N)).astype(np.float32),
        },
    }
    stats = {"w00": {"accepted": 5, "rejected": {"stale": 1}, "max_staleness": 2}}
    ckpt = Checkpoint(rng.standard_normal(N).astype(np.float32), 7, state, stats)
    return save_checkpoint(path, ckpt)


def members(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def header_of(path: Path) -> dict[str, Any]:
    return json.loads(bytes(members(path)["header"]).decode())


def rewrite(path: Path, header: Any = None, **arrays: Any) -> Path:
    """The good file with a replaced header and/or replaced arrays."""
    out = members(path)
    if header is not None:
        out["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    out.update(arrays)
    out = {k: v for k, v in out.items() if v is not None}
    target = path.with_name("crafted.npz")
    np.savez(target, **out)
    return target


def refused(path: Path, n_params: int | None = N) -> str:
    """The error of loading ``path``: one line, naming the file."""
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, n_params=n_params)
    message = str(info.value)
    assert str(path) in message and "\n" not in message, message
    return message


def test_a_good_file_loads_with_the_model_size(tmp_path: Path) -> None:
    ckpt = load_checkpoint(good_file(tmp_path / "c.npz"), n_params=N)

    assert ckpt.version == 7 and ckpt.params.shape == (N,)
    assert ckpt.optimizer_state["buffers"]["m"].shape == (N,)
    assert ckpt.worker_stats["w00"]["accepted"] == 5


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda b: b[: len(b) // 2], id="truncated-half"),
        pytest.param(lambda b: b[:10], id="truncated-10-bytes"),
        pytest.param(lambda b: b[:-1], id="truncated-one-byte"),
        pytest.param(lambda b: b"", id="empty"),
        pytest.param(lambda b: b"\0" * len(b), id="zeroed"),
    ],
)
def test_truncated_or_empty_files(
    tmp_path: Path, cut: Callable[[bytes], bytes]
) -> None:
    good = good_file(tmp_path / "c.npz").read_bytes()
    bad = tmp_path / "bad.npz"
    bad.write_bytes(cut(good))

    message = refused(bad)

    assert "empty" in message or "truncated" in message


def test_flipped_bytes_fail_the_crc(tmp_path: Path) -> None:
    good = good_file(tmp_path / "c.npz")
    data = bytearray(good.read_bytes())
    start = data.find(b"params.npy") + 200  # inside the stored params
    for i in range(start, start + 64):
        data[i] ^= 0xFF
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(data))

    assert "corrupted" in refused(bad)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda h: h.pop("optimizer_state"), "no optimizer_state"),
        (lambda h: h.update(optimizer_state={"__array__": "gone"}), "missing array"),
        (lambda h: h.update(optimizer_state=["x"]), "optimizer_state"),
        (lambda h: h["optimizer_state"].update(name="lion"), "no known optimizer"),
        (lambda h: h["optimizer_state"].update(n_params=3), "is for 3 params"),
        (lambda h: h["optimizer_state"].update(t=-1), "step count"),
        (lambda h: h["optimizer_state"].update(hyper={"eps": "x"}), "hyper"),
        (lambda h: h.update(worker_stats={"w00": {"accepted": "x"}}), "accepted"),
        (lambda h: h.update(worker_stats={"w00": {"accepted": -1}}), "count"),
        (lambda h: h.update(worker_stats={"w00": {"bogus": 1}}), "unknown key"),
        (lambda h: h.update(worker_stats={"<b>": {}}), "bad worker id"),
        (lambda h: h.update(worker_stats=["a"]), "worker_stats"),
        (lambda h: h.update(meta=3), "meta"),
        (lambda h: h.update(format="other"), "format"),
        (lambda h: h.update(arrays=["opt/buffers/m"]), "optimizer arrays"),
        (lambda h: h.update(arrays="xy"), "arrays"),
    ],
)
def test_every_header_field_is_checked(
    tmp_path: Path, change: Callable[[dict[str, Any]], Any], says: str
) -> None:
    good = good_file(tmp_path / "c.npz")
    header = header_of(good)
    change(header)

    assert says in refused(rewrite(good, header))


@pytest.mark.parametrize("version", [2**32, -1, "abc", 1.5, None, True])
def test_bad_versions(tmp_path: Path, version: object) -> None:
    good = good_file(tmp_path / "c.npz")
    header = header_of(good)
    header["version"] = version

    assert "version" in refused(rewrite(good, header))


def test_a_header_that_is_not_an_object_or_not_json(tmp_path: Path) -> None:
    good = good_file(tmp_path / "c.npz")

    assert "JSON object" in refused(rewrite(good, ["x"]))
    path = tmp_path / "nan.npz"
    nan = np.frombuffer(b'{"version": NaN}', dtype=np.uint8)
    np.savez(path, **{**members(good), "header": nan})
    assert "not valid JSON" in refused(path)


def test_params_dtype_shape_and_values(tmp_path: Path) -> None:
    good = good_file(tmp_path / "c.npz")
    params = members(good)["params"]

    assert "NaN or inf" in refused(rewrite(good, params=np.full_like(params, np.nan)))
    assert "the model has 64" in refused(rewrite(good, params=params[:10]))
    assert "params hold 256 values" in refused(
        rewrite(good, params=np.zeros(256, "f4"))
    )
    big = np.zeros(N * 100, "f4")
    assert "another model" in refused(rewrite(good, params=big))
    assert "flat float32" in refused(rewrite(good, params=params.astype(np.float64)))
    assert "flat float32" in refused(rewrite(good, params=params.reshape(8, 8)))
    inf_m = np.full(N, np.inf, np.float32)
    assert "finite" in refused(rewrite(good, a0=inf_m))


def test_object_arrays_are_refused_without_unpickling(tmp_path: Path) -> None:
    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {tmp_path}/PWNED",))

    good = good_file(tmp_path / "c.npz")
    path = tmp_path / "objects.npz"
    np.savez(
        path,
        params=np.array([Evil()], dtype=object),
        header=members(good)["header"],
    )

    assert "Python objects (refused: pickle)" in refused(path)
    assert not (tmp_path / "PWNED").exists()


def test_unexpected_members_and_methods(tmp_path: Path) -> None:
    good = good_file(tmp_path / "c.npz")
    extra = tmp_path / "extra.npz"
    np.savez(extra, **members(good), evil=np.zeros(1))
    bz = tmp_path / "bz2.npz"
    with zipfile.ZipFile(bz, "w", compression=zipfile.ZIP_BZIP2) as z:
        for name, arr in members(good).items():
            buf = io.BytesIO()
            np.save(buf, arr)
            z.writestr(name + ".npy", buf.getvalue())

    assert "unexpected member" in refused(extra)
    assert "compression method" in refused(bz)


def test_a_bomb_is_refused_from_its_directory_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prepare: a genuine deflate bomb, 1.6 GB of float32 zeros in about 1.5 MB
    good = good_file(tmp_path / "c.npz")
    bomb = write_npz_bomb(tmp_path / "bomb.npz", 400_000_000, members(good)["header"])
    opened: list[str] = []
    real_open = zipfile.ZipFile.open

    def spy(self: zipfile.ZipFile, name: Any, *args: Any, **kw: Any) -> Any:
        opened.append(getattr(name, "filename", name))
        return real_open(self, name, *args, **kw)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)

    # Execute
    with_model = refused(bomb)
    without_model = refused(bomb, n_params=None)

    # Assert: refused on the declared size, before any member was opened
    assert bomb.stat().st_size < 2_000_000
    assert "declares 1600000128 bytes uncompressed" in with_model
    assert "another model" in with_model
    assert "more than the file's" in without_model
    assert opened == []


def test_a_npy_header_larger_than_its_member_is_refused_before_reading(
    tmp_path: Path,
) -> None:
    # Prepare: the directory declares a small member whose .npy header claims 1.6 GB
    good = good_file(tmp_path / "c.npz")
    plain = header_of(good) | {"optimizer_state": {}, "arrays": []}
    good = rewrite(good, plain, a0=None, a1=None)
    path = tmp_path / "liar.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            buf, {"descr": "<f4", "fortran_order": False, "shape": (400_000_000,)}
        )
        z.writestr("params.npy", buf.getvalue() + bytes(4 * N))
        header = io.BytesIO()
        np.save(header, members(good)["header"])
        z.writestr("header.npy", header.getvalue())

    assert "its .npy header declares 1600000000 bytes" in refused(path)


def test_a_file_larger_than_any_checkpoint_of_the_model(tmp_path: Path) -> None:
    path = tmp_path / "big.npz"
    with open(path, "wb") as f:
        f.truncate(64 << 20)

    assert "more than a checkpoint of 64 params" in refused(path)


def test_the_core_checks_what_it_restores() -> None:
    current = np.zeros(4, np.float32)

    with pytest.raises(ValueError, match="at most"):
        checked_checkpoint(MAX_VERSION + 1, None, None, current, False)
    with pytest.raises(ValueError, match=">= 0"):
        stats = {"w1": WorkerStats(accepted=-1)}
        checked_checkpoint(1, None, stats, current, False)
    with pytest.raises(TypeError, match="int"):
        stats = {"w1": WorkerStats(rejected={"stale": 1.5})}  # type: ignore[dict-item]
        checked_checkpoint(1, None, stats, current, False)
    nan = {"buffers": {"m": np.full(4, np.nan, np.float32)}}
    with pytest.raises(ValueError, match="NaN"):
        checked_checkpoint(1, None, None, current, False, nan)
    short = {"buffers": {"m": np.zeros(3, np.float32)}}
    with pytest.raises(ValueError, match="shape"):
        ParameterServer(current, policy=ASP(), optimizer="adam").restore(
            version=1, optimizer_state=short
        )
