"""Conv models in every export: ONNX under onnxruntime, JSON and model.bin read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend
from edgeps.model import architecture, json_export, mpy_export
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.files import load_export
from edgeps.model.scaler import Scaler
from edgeps.model.writers import export

LENET5 = "conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10"
CONV1D = "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10"
SPECS = [
    "conv1d:2x16-c4k3-m2-d8-3",
    "conv1d:3x20-c5k5s2p2-a2-c4k3p1-m3s2-4",
    CONV1D,
    "conv2d:1x12x12-c4k3p1-m2-c6k3s2-a2-5",
    "conv2d:2x9x9-c3k3s2p1-m2s1-d6-3",
    LENET5,
]


def conv_model(text: str, *, scaled: bool = True, seed: int = 0) -> TrainedModel:
    """Random weights (He-scaled, so activations stay in range) and a fitted scaler."""
    spec = ModelSpec.parse(text)
    params = spec.init_params(seed)
    rng = np.random.default_rng(seed + 7)
    params += (rng.normal(size=spec.n_params) * 0.05).astype(np.float32)  # biases too
    classes = tuple(f"k{i}" for i in range(spec.n_classes))
    scaler = Scaler.fit(raw_rows(spec, 200, seed + 1)) if scaled else None
    return TrainedModel(ModelCard(spec, classes, scaler), params)


def raw_rows(spec: ModelSpec, n: int, seed: int, wide: bool = True) -> np.ndarray:
    """Windows/images as rows, each feature with its own offset and scale (wide)."""
    rng = np.random.default_rng(seed)
    if not wide:  # what an unscaled model takes: values near 0
        return rng.normal(size=(n, spec.n_features)).astype(np.float32)
    loc = np.linspace(-20.0, 40.0, spec.n_features)
    scale = np.linspace(0.5, 8.0, spec.n_features)
    return rng.normal(loc, scale, size=(n, spec.n_features)).astype(np.float32)


def _reference(model: TrainedModel, X: np.ndarray) -> np.ndarray:
    """Class probabilities from the numpy kernels on the scaled rows."""
    return np.asarray(
        get_backend("numpy").forward(model.spec, model.params, model.prepare(X))
    )


@pytest.mark.parametrize("text", SPECS)
@pytest.mark.parametrize("scaled", [True, False])
def test_onnx_export_of_a_conv_model_matches_numpy(
    tmp_path: Path, text: str, scaled: bool
) -> None:
    # Prepare
    ort = pytest.importorskip("onnxruntime")
    model = conv_model(text, scaled=scaled)
    X = raw_rows(model.spec, 48, 9, wide=scaled)
    path = tmp_path / "m.onnx"
    # Execute
    export(model, "onnx", path, {"job": "t"})
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": X})
    # Assert
    want = _reference(model, X)
    assert [o.name for o in session.get_outputs()] == ["scores", "label"]
    assert got[0].shape == (48, model.spec.n_classes)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)
    # labels agree wherever the top two classes are not a float tie
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-5
    np.testing.assert_array_equal(got[1][clear], model.predict(X)[clear])
    assert np.ptp(want, axis=0).max() > 0.05  # the scores do depend on the rows


def test_onnx_graph_has_the_layers_named_in_the_spec(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    model = conv_model("conv1d:3x20-c5k5s2p2-a2-c4k3p1-m3s2-4")
    export(model, "onnx", tmp_path / "m.onnx", {})
    graph = onnx.load(str(tmp_path / "m.onnx")).graph
    ops = [n.op_type for n in graph.node]
    assert ops[:3] == ["Sub", "Mul", "Reshape"]
    conv = [n for n in graph.node if n.op_type == "Conv"][0]
    attrs = {a.name: list(a.ints) for a in conv.attribute}
    assert attrs == {"kernel_shape": [5], "strides": [2], "pads": [2, 2]}
    assert ops.count("AveragePool") == 1 and ops.count("MaxPool") == 1
    assert ops[-4:] == ["MatMul", "Add", "Softmax", "ArgMax"]


@pytest.mark.parametrize("text", [CONV1D, LENET5])
def test_onnx_export_loads_back_and_predicts_as_the_model(
    tmp_path: Path, text: str
) -> None:
    pytest.importorskip("onnxruntime")
    model = conv_model(text)
    export(model, "onnx", tmp_path / "m.onnx", {"accuracy": 0.5})
    back, meta = load_export(tmp_path / "m.onnx")
    X = raw_rows(model.spec, 20, 3)
    assert str(back.spec) == text and meta == {"accuracy": 0.5}
    np.testing.assert_allclose(back.scores(X), model.scores(X), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("text", SPECS)
def test_json_export_of_a_conv_model_round_trips_and_predicts_identically(
    tmp_path: Path, text: str
) -> None:
    # Prepare
    model = conv_model(text)
    X = raw_rows(model.spec, 16, 4)
    # Execute
    export(model, "json", tmp_path / "m.json", {"version": 2})
    back, meta = load_export(tmp_path / "m.json")
    # Assert
    assert isinstance(back, TrainedModel) and meta == {"version": 2}
    np.testing.assert_array_equal(back.params, model.params)
    assert back.card.to_dict() == model.card.to_dict()
    np.testing.assert_array_equal(back.scores(X), model.scores(X))


def test_json_export_lists_the_layers_with_shapes_and_sizes(tmp_path: Path) -> None:
    import json

    export(conv_model(LENET5), "json", tmp_path / "m.json", {})
    data = json.loads((tmp_path / "m.json").read_text())
    layers = data["layers"]
    assert data["in_shape"] == [1, 28, 28] and "layer_sizes" not in data
    assert [ly["op"] for ly in layers] == [
        "conv", "maxpool", "conv", "maxpool", "dense", "dense", "dense",
    ]  # fmt: skip
    first = layers[0]
    assert (first["n_out"], first["kernel"], first["stride"], first["padding"]) == (
        6, 5, 1, 2,
    )  # fmt: skip
    assert first["out_shape"] == [6, 28, 28] and first["w_shape"] == [6, 1, 5, 5]
    assert layers[3]["out_shape"] == [16, 5, 5] and layers[4]["w_shape"] == [400, 120]
    assert [ly["relu"] for ly in layers[-3:]] == [True, True, False]
    assert sum(ly["params"] for ly in layers) == data["n_params"] == 61706
    assert len(data["params"]) == 61706


def test_json_export_of_a_dense_model_keeps_its_fields(tmp_path: Path) -> None:
    model = TrainedModel(
        ModelCard(ModelSpec.parse("mlp:4-6-3")), np.arange(51, dtype=np.float32)
    )
    data = json_export.to_dict(model, {})
    assert data["layer_sizes"] == [4, 6, 3] and data["activation"] == "relu"
    assert data["architecture"] == "dense 6 -> dense 3" and data["n_params"] == 51


@pytest.mark.parametrize("text", SPECS)
@pytest.mark.parametrize("scaled", [True, False])
def test_model_bin_of_a_conv_model_round_trips(
    tmp_path: Path, text: str, scaled: bool
) -> None:
    # Prepare
    model = conv_model(text, scaled=scaled)
    X = raw_rows(model.spec, 16, 5)
    # Execute
    path = export(model, "micropython", tmp_path / "model.bin", {"job": "t"})
    back = mpy_export.read(path)
    again = mpy_export.to_bytes(back)
    # Assert
    assert str(back.spec) == text and back.card.classes == model.card.classes
    np.testing.assert_array_equal(back.params, model.params)
    assert again == path.read_bytes()  # what a board reads is what was written
    np.testing.assert_allclose(back.scores(X), model.scores(X), rtol=1e-4, atol=1e-5)


def test_model_bin_refuses_an_input_wider_than_its_header_field(
    tmp_path: Path,
) -> None:
    spec = ModelSpec.parse("conv1d:3x30000-c2k3-m100-4")
    model = TrainedModel(ModelCard(spec), np.zeros(spec.n_params, np.float32))
    with pytest.raises(ValueError, match="65535"):
        export(model, "micropython", tmp_path / "model.bin")


def test_architecture_line_parameters_and_macs() -> None:
    lenet = architecture.describe(LENET5)
    assert lenet["architecture"] == (
        "conv 6x28x28 -> maxpool 6x14x14 -> conv 16x10x10 -> maxpool 16x5x5 "
        "-> dense 120 -> dense 84 -> dense 10"
    )
    # conv 6*28*28*25, pool 6*14*14*4, conv 16*10*10*150, pool 16*5*5*4, dense
    assert lenet["macs"] == 117600 + 4704 + 240000 + 1600 + 48000 + 10080 + 840
    assert lenet["params"] == 61706 and lenet["in_shape"] == [1, 28, 28]
    one = architecture.describe(ModelSpec.parse(CONV1D))
    assert one["architecture"].startswith("conv 16x40 -> maxpool 16x20 -> conv")
    assert one["params"] == 3498
    assert architecture.size_text(one).startswith("3,498 params, ")
    assert architecture.describe("softmax:5x3")["architecture"] == "dense 3"
