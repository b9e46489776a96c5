"""Windows and images through every place a model is completed from data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from edgeps.boards.shard import ShardSpec, write_shard
from edgeps.cli import main
from edgeps.core.types import Join
from edgeps.kernels import ModelSpec
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.table import read_table
from edgeps.model.windows import Cut, fit_scaler
from edgeps.pyworker.localdata import load_file, parse_part
from edgeps.pyworker.scaling import check_classes, load_local
from edgeps.runtime.checkpoint import Checkpoint, save_checkpoint
from edgeps.runtime.scaler_gate import ScalerGate
from edgeps.runtime.test_data import builtin_test_data, job_spec, load_test_data
from edgeps.workloads.scenarios import WorkerProfile, compute_scale, make_scenario


def write_raw(
    path: Path, subjects: tuple[str, ...] = ("s1", "s2"), n: int = 40
) -> None:
    """Two channels, two activities per subject, n samples each: a raw-sample CSV."""
    rng = np.random.default_rng(0)
    lines = ["gx,gy,act,who"]
    for who in subjects:
        for act, f in (("slow", 0.05), ("fast", 0.3)):
            t = np.arange(n)
            x = np.stack([np.sin(f * t), 5 + 3 * np.cos(f * t)], axis=1)
            x += rng.normal(0, 0.1, size=x.shape)
            lines += [f"{a:.4f},{b:.4f},{act},{who}" for a, b in x]
    path.write_text("\n".join(lines) + "\n")


def test_a_raw_csv_test_file_fixes_the_shape_and_a_per_channel_scaler(
    tmp_path: Path,
) -> None:
    path = tmp_path / "raw.csv"
    write_raw(path)

    data = load_test_data(str(path), "act", None, True, Cut(10, 5, "who"))

    assert data.shape == (2, 10) and data.n_features == 20
    assert data.classes == ("fast", "slow")
    assert data.scaler is not None
    assert np.allclose(data.scaler.mean[:10], data.scaler.mean[0])
    assert abs(data.scaler.mean[10] - 5.0) < 1.0  # the second channel
    spec = job_spec("conv1d", data, "raw.csv")
    assert spec.is_conv and spec.in_shape == (2, 10) and spec.n_classes == 2
    assert str(job_spec("conv1d:c4k3-m2", data, "raw.csv")) == "conv1d:2x10-c4k3-m2-2"
    assert job_spec("mlp", data, "raw.csv").n_features == 20  # rows of windows too


def test_a_model_that_does_not_fit_the_windows_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    write_raw(path)
    data = load_test_data(str(path), "act", None, True, Cut(10, 5, "who"))

    with pytest.raises(ValueError, match="takes 64 features"):
        job_spec("conv1d:1x64-c4k3-2", data, "raw.csv")
    with pytest.raises(ValueError, match=r"shape \(4, 5\), raw.csv has \(2, 10\)"):
        job_spec("conv1d:4x5-c4k3-2", data, "raw.csv")
    with pytest.raises(ValueError, match="needs images"):
        job_spec("lenet5", data, "raw.csv")


def test_conv_on_tabular_rows_says_what_it_needs(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("a,b,y\n1,2,0\n3,4,1\n5,6,0\n")
    data = load_test_data(str(path), None, None)
    with pytest.raises(ValueError, match="needs windows"):
        job_spec("conv1d", data, "rows.csv")


def test_images_in_an_npz_complete_lenet5(tmp_path: Path) -> None:
    path = tmp_path / "img.npz"
    rng = np.random.default_rng(0)
    np.savez(path, X=rng.random((12, 1, 28, 28)), y=np.arange(12) % 3)

    data = load_test_data(str(path), None, None)

    assert data.shape == (1, 28, 28)
    assert str(job_spec("lenet5", data, "img.npz")).startswith("conv2d:1x28x28-c6k5p2")


def test_a_built_in_dataset_brings_its_shape_and_classes() -> None:
    data = builtin_test_data("basicmotions", 0)
    assert data.shape == (6, 100) and data.classes is not None
    assert job_spec(None, data, "basicmotions").is_conv
    assert str(job_spec("conv1d:c8k5p2-m2", data, "b")) == "conv1d:6x100-c8k5p2-m2-4"


def _args(path: Path, **kw: object) -> argparse.Namespace:
    base = {
        "data": str(path), "label": "act", "classes": None, "scaler_from": None,
        "scale": False, "window": 10, "stride": 5, "group": "who", "part": None,
    }  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def test_a_worker_cuts_its_file_and_scales_it_per_channel(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    write_raw(path)

    data = load_local(_args(path, scale=True))

    assert data.shape == (2, 10) and data.X.shape == (2 * 2 * 7, 20)
    assert data.raw_X is not None
    chan = data.X.reshape(-1, 2, 10)
    assert np.allclose(chan.mean(axis=(0, 2)), 0.0, atol=1e-5)
    with pytest.raises(ValueError, match=r"shape \(3, 10\)"):
        check_classes(ModelSpec.parse("conv1d:3x10-c4k3-m2-2"), data, given=False)


def test_a_worker_part_holds_whole_groups(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    write_raw(path, subjects=("s1", "s2", "s3"))

    parts = [
        load_file(path, label="act", cut=Cut(10, 5, "who"), part=(i, 3))
        for i in range(3)
    ]

    assert [p.n_samples for p in parts] == [14, 14, 14]
    assert "groups s2" in parts[1].source
    with pytest.raises(ValueError, match="I/N"):
        parse_part("3/3")
    with pytest.raises(ValueError, match="give --window and --group"):
        load_file(path, label="act", cut=Cut(10, 5), part=(0, 2))


def test_the_scaler_gate_pools_workers_moments_per_channel() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(30, 2, 5)) + np.array([0.0, 10.0])[None, :, None]
    b = rng.normal(size=(20, 2, 5)) * 2 + np.array([1.0, 12.0])[None, :, None]
    gate = ScalerGate(10, workers=2, grace=0.0, shape=(2, 5))
    for wid, part in (("a", a), ("b", b)):
        X = part.reshape(len(part), 10)
        join = Join(worker_id=wid, nonce=1)
        gate.hold(join, (len(X), X.mean(axis=0).tolist(), X.var(axis=0).tolist()), 0.0)

    assert gate.admit(0.0) is not None
    whole = np.concatenate([a, b]).reshape(50, 10)
    assert gate.fixed is not None
    assert np.allclose(gate.fixed.mean, fit_scaler(whole, (2, 5)).mean)
    assert np.allclose(gate.fixed.std, fit_scaler(whole, (2, 5)).std)


def test_compute_time_scales_with_a_conv_models_flops() -> None:
    dense = ModelSpec.parse("mlp:30-32-6")
    conv = ModelSpec.parse("conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10")
    profile = WorkerProfile()

    assert compute_scale(dense.macs, dense.n_params) == 1.0
    assert profile.for_model(dense.macs, dense.n_params) is profile
    scale = compute_scale(conv.macs, conv.n_params)
    assert scale == pytest.approx(conv.macs / conv.n_params) and scale > 5
    slow = profile.for_model(conv.macs, conv.n_params)
    assert slow.compute_time == pytest.approx(profile.compute_time * scale)


def test_a_board_shard_of_windows_completes_the_conv_model(tmp_path: Path) -> None:
    assert ShardSpec.parse("mnist1d:1/4").dataset == "mnist1d"
    assert ShardSpec.parse("fashion-mnist").dataset == "fashion-mnist"
    rows = write_shard(ShardSpec.parse("mnist1d:1/4"), "conv1d", tmp_path / "d.bin")
    assert rows == 1000
    with pytest.raises(ValueError, match=r"shape \(2, 40\), mnist1d has \(1, 40\)"):
        write_shard(ShardSpec("mnist1d"), "conv1d:2x40-c4k3-10", tmp_path / "e.bin")


def _conv_checkpoint(tmp_path: Path, raw: Path) -> Path:
    table = read_table(raw, label="act", window=10, stride=5, group="who")
    spec = ModelSpec.parse("conv1d:2x10-c4k3-m2-2")
    scaler = fit_scaler(table.X, table.shape)
    model = TrainedModel(ModelCard(spec, table.classes, scaler), spec.init_params(0))
    ckpt = tmp_path / "job.npz"
    meta = {**model.card.to_dict(), "job": "t", "accuracy": 0.5}
    save_checkpoint(ckpt, Checkpoint(params=model.params, version=1, meta=meta))
    return ckpt


def test_predict_takes_raw_samples_with_a_window_and_npz_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "raw.csv"
    write_raw(raw)
    ckpt = _conv_checkpoint(tmp_path, raw)
    cut = ["--window", "10", "--stride", "5", "--group", "who"]
    capsys.readouterr()

    assert (
        main(
            ["predict", str(ckpt), "--data", str(raw), "--label", "act", *cut, "--json"]
        )
        == 0
    )
    from_csv = json.loads(capsys.readouterr().out)
    table = read_table(raw, label="act", window=10, stride=5, group="who")
    npz = tmp_path / "w.npz"
    np.savez(npz, X=table.X.reshape(-1, 2, 10), y=table.y)
    assert main(["predict", str(ckpt), "--data", str(npz), "--json"]) == 0
    from_npz = json.loads(capsys.readouterr().out)

    assert from_csv["rows"] == 28 and "accuracy" in from_csv
    assert from_npz["predictions"] == from_csv["predictions"]
    no_group = tmp_path / "nogroup.csv"
    no_group.write_text(
        "".join(line.rsplit(",", 1)[0] + "\n" for line in raw.read_text().split())
    )
    assert main(["predict", str(ckpt), "--data", str(no_group), "--label", "act"]) == 2
    assert "give --window" in capsys.readouterr().err
    bad = tmp_path / "bad.npz"
    np.savez(bad, X=np.zeros((3, 4, 5)), y=np.zeros(3))
    assert main(["predict", str(ckpt), "--data", str(bad)]) == 2
    assert "shape (2, 10)" in capsys.readouterr().err


def test_simulate_and_emulate_complete_conv_models_from_the_dataset() -> None:
    from edgeps.emulate.runner import _complete
    from edgeps.sim.simulator import Simulator
    from edgeps.sim.types import SimConfig

    sim = Simulator(SimConfig(dataset="mnist1d", model="conv1d:c4k5p2-m2", n_workers=2))
    assert str(sim.spec) == "conv1d:1x40-c4k5p2-m2-10"
    scale = compute_scale(sim.spec.macs, sim.spec.n_params)
    base = make_scenario("mixed", 2, 0).profiles
    assert scale > 1.0
    for wid, w in sim.workers.items():
        assert w.profile.compute_time == pytest.approx(base[wid].compute_time * scale)
    assert _complete("conv1d", "basicmotions", 0).startswith("conv1d:6x100-")
    with pytest.raises(ValueError, match="needs images"):
        _complete("lenet5", "mnist1d", 0)


def test_serves_banner_tells_workers_how_to_cut_their_files() -> None:
    from edgeps.runtime.test_data import worker_hint

    hint = worker_hint("act", Cut(50, 25, "who"))
    assert hint == "--data FILE --label act --window 50 --stride 25 --group who "
    assert worker_hint(None, Cut()) == "--data FILE "


def test_an_emulated_sensor_steps_as_long_as_its_conv_models_flops(
    tmp_path: Path,
) -> None:
    from edgeps.pyworker.trainer import EmulatedTrainer, NativeTrainer

    path = tmp_path / "raw.csv"
    write_raw(path)
    data = load_file(path, label="act", cut=Cut(10, 5, "who"))
    conv = ModelSpec.parse("conv1d:2x10-c8k3p1-m2-2")
    dense = ModelSpec.parse("mlp:20-8-2")
    profile = WorkerProfile(compute_jitter=0.0)
    rng = np.random.default_rng(0)
    slept: list[float] = []

    for spec in (conv, dense):
        emulated = EmulatedTrainer(
            NativeTrainer(spec, data), profile, rng, slept.append
        )
        scale = compute_scale(spec.macs, spec.n_params)
        assert emulated.profile.compute_time == pytest.approx(0.1 * scale)

    assert compute_scale(conv.macs, conv.n_params) > 2.0
    assert compute_scale(dense.macs, dense.n_params) == 1.0
