"""The ONNX export: scaler, layers and output as one graph, built with ``onnx``.

Input ``x`` (float32, rows x features, raw); outputs ``scores`` (values,
P(class 1) or class probabilities, as `TrainedModel.scores`) and, for a
classifier, ``label`` (int64 class ids). A conv model reshapes the scaled
rows to (N, C, L) or (N, C, H, W), then Conv (+Relu), MaxPool/AveragePool,
Flatten, MatMul+Add (+Relu), as its layer list says. The card (spec, class names,
scaler) is in the model's metadata under ``edgeps_card``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.model.card import ModelCard, TrainedModel, to_predictions

OPSET = 17
IR_VERSION = 8  # readable by onnxruntime releases of the last few years
INSTALL = "ONNX export needs the export extra: pip install 'edgeps[export]'"


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise ValueError(INSTALL) from None
    return onnx


def build(model: TrainedModel, meta: dict[str, Any]) -> Any:
    """The ``onnx.ModelProto`` of ``model``."""
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    spec = model.spec
    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    h = "x"
    scaler = model.card.scaler
    if scaler is not None:
        mean, inv = scaler.offset_scale()
        nodes.append(helper.make_node("Sub", [h, const("mean", mean)], ["centred"]))
        nodes.append(helper.make_node("Mul", ["centred", const("inv_std", inv)], ["z"]))
        h = "z"
    if spec.is_conv:
        h = _conv_layers(model, h, const, nodes)
    layers = [] if spec.is_conv else spec.layer_slices()
    for i, (ws, shape, bs) in enumerate(layers):
        w = const(f"W{i}", model.params[ws].reshape(shape).copy())
        b = const(f"b{i}", model.params[bs].copy())
        nodes.append(helper.make_node("MatMul", [h, w], [f"mm{i}"]))
        nodes.append(helper.make_node("Add", [f"mm{i}", b], [f"a{i}"]))
        h = f"a{i}"
        if i < len(layers) - 1:
            act = "Relu" if spec.activation == "relu" else "Tanh"
            nodes.append(helper.make_node(act, [h], [f"h{i}"]))
            h = f"h{i}"
    n = "n"
    outputs = []
    if spec.kind in ("linear", "logistic"):
        if spec.kind == "logistic":
            nodes.append(helper.make_node("Sigmoid", [h], ["p"]))
            h = "p"
        axes = const("axes", np.array([1], dtype=np.int64))
        nodes.append(helper.make_node("Squeeze", [h, axes], ["scores"]))
        outputs.append(helper.make_tensor_value_info("scores", TensorProto.FLOAT, [n]))
        if spec.kind == "logistic":
            half = const("half", np.array(0.5, dtype=np.float32))
            nodes.append(helper.make_node("GreaterOrEqual", ["scores", half], ["ge"]))
            nodes.append(
                helper.make_node("Cast", ["ge"], ["label"], to=TensorProto.INT64)
            )
    else:
        nodes.append(helper.make_node("Softmax", [h], ["scores"], axis=1))
        nodes.append(
            helper.make_node("ArgMax", ["scores"], ["label"], axis=1, keepdims=0)
        )
        outputs.append(
            helper.make_tensor_value_info(
                "scores", TensorProto.FLOAT, [n, spec.n_classes]
            )
        )
    if spec.kind != "linear":
        outputs.append(helper.make_tensor_value_info("label", TensorProto.INT64, [n]))
    graph = helper.make_graph(
        nodes,
        "edgeps",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, spec.n_features])],
        outputs,
        initializer=inits,
    )
    proto = helper.make_model(
        graph,
        producer_name="edgeps",
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    proto.ir_version = IR_VERSION
    helper.set_model_props(
        proto,
        {
            "edgeps_card": json.dumps(model.card.to_dict()),
            "edgeps_meta": json.dumps(meta),
            "classes": ",".join(model.card.class_names()),
        },
    )
    onnx.checker.check_model(proto)
    return proto


def _conv_layers(
    model: TrainedModel,
    h: str,
    const: Callable[[str, np.ndarray], str],
    nodes: list[Any],
) -> str:
    """A conv model's layers: rows reshaped to (N, C, L) or (N, C, H, W), then ops."""
    from onnx import helper

    spec = model.spec
    shape = const("in_shape", np.array([-1, *spec.in_shape], dtype=np.int64))
    nodes.append(helper.make_node("Reshape", [h, shape], ["x_nc"]))
    h = "x_nc"
    dims = len(spec.in_shape) - 1
    for i, op in enumerate(spec.ops):
        ly = op.layer
        out = f"{op.op}{i}"
        if op.op == "dense":
            if len(op.in_shape) > 1:  # channel first, as the flat layout has it
                nodes.append(helper.make_node("Flatten", [h], [f"flat{i}"], axis=1))
                h = f"flat{i}"
            w = const(f"W{i}", model.params[op.w].reshape(op.w_shape).copy())
            b = const(f"b{i}", model.params[op.b].copy())
            nodes.append(helper.make_node("MatMul", [h, w], [f"mm{i}"]))
            nodes.append(helper.make_node("Add", [f"mm{i}", b], [out]))
        elif op.op == "conv":
            w = const(f"W{i}", model.params[op.w].reshape(op.w_shape).copy())
            b = const(f"b{i}", model.params[op.b].copy())
            nodes.append(
                helper.make_node(
                    "Conv",
                    [h, w, b],
                    [out],
                    kernel_shape=[ly.k] * dims,
                    strides=[ly.stride] * dims,
                    pads=[ly.pad] * (2 * dims),
                )
            )
        else:
            pool = "MaxPool" if op.op == "maxpool" else "AveragePool"
            nodes.append(
                helper.make_node(
                    pool,
                    [h],
                    [out],
                    kernel_shape=[ly.k] * dims,
                    strides=[ly.stride] * dims,
                )
            )
        h = out
        if ly.relu and op.op in ("conv", "dense"):
            nodes.append(helper.make_node("Relu", [h], [f"relu{i}"]))
            h = f"relu{i}"
    return h


def write(model: TrainedModel, path: Path, meta: dict[str, Any]) -> Path:
    onnx = _onnx()
    onnx.save_model(build(model, meta), str(path))
    return path


class OnnxModel:
    """An ONNX export run by onnxruntime, with its card: what `edgeps predict` uses."""

    def __init__(self, path: str | Path) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise ValueError(
                "running an ONNX model needs: pip install 'edgeps[export]'"
            ) from None
        try:
            self.session = ort.InferenceSession(
                str(path), providers=["CPUExecutionProvider"]
            )
            props = self.session.get_modelmeta().custom_metadata_map
            self.card = ModelCard.from_dict(json.loads(props["edgeps_card"]))
            self.meta = dict(json.loads(props.get("edgeps_meta", "{}")))
        except (KeyError, ValueError, RuntimeError, OSError) as exc:
            raise ValueError(f"{path}: not an edgeps ONNX export: {exc}") from None

    @property
    def spec(self) -> Any:
        return self.card.spec

    def scores(self, X: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(X, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.spec.n_features:
            raise ValueError(
                f"model {self.spec} takes {self.spec.n_features} features, "
                f"got data of shape {x.shape}"
            )
        return np.asarray(self.session.run(["scores"], {"x": x})[0])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return to_predictions(self.spec.kind, self.scores(X))
