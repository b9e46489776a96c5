"""The ONNX export: scaler, layers and output as one graph, built with ``onnx``.

Input ``x`` (float32, rows x features, raw); outputs ``scores`` (values,
P(class 1) or class probabilities, as `TrainedModel.scores`) and, for a
classifier, ``label`` (int64 class ids). A conv model reshapes the scaled
rows to (N, C, L) or (N, C, H, W), then Conv (+Relu), MaxPool/AveragePool,
Flatten, MatMul+Add (+Relu), as its layer list says. The card (spec, class names,
scaler) is in the model's metadata under ``edgeps_card``; ``edgeps_digest``
is a SHA-256 of the graph (every weight), the opset and the card, checked on
load, so a damaged file is refused rather than predicting wrongly.
"""

from __future__ import annotations

import hashlib
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
    props = {
        "edgeps_card": json.dumps(model.card.to_dict()),
        "edgeps_meta": json.dumps(meta),
        "classes": ",".join(model.card.class_names()),
    }
    props["edgeps_digest"] = digest(proto, props)
    helper.set_model_props(proto, props)
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


def digest(proto: Any, props: dict[str, str]) -> str:
    """SHA-256 (hex) of what a prediction depends on: versions, graph, card, meta."""
    h = hashlib.sha256()
    h.update(f"{proto.ir_version}|".encode())
    for op in proto.opset_import:
        h.update(f"{op.domain}:{op.version}|".encode())
    h.update(proto.graph.SerializeToString(deterministic=True))
    for key in ("edgeps_card", "edgeps_meta"):
        h.update(b"|" + props.get(key, "").encode("utf-8"))
    return h.hexdigest()


def check_file(path: str | Path) -> tuple[bytes, dict[str, str]]:
    """The bytes of an edgeps ONNX export and its metadata, once its digest and
    weights check out; ValueError naming the file and the fault."""
    onnx = _onnx()
    from onnx import numpy_helper

    try:
        data = Path(path).read_bytes()
        proto = onnx.load_model_from_string(data)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the model file: {exc}") from None
    except Exception as exc:  # protobuf's DecodeError and kin: a damaged file
        raise ValueError(f"{path}: not a readable ONNX model ({exc})") from None
    props = {p.key: p.value for p in proto.metadata_props}
    if not all(isinstance(v, str) for kv in props.items() for v in kv):
        raise ValueError(f"{path}: its metadata is not text: the file is damaged")
    if "edgeps_card" not in props:
        raise ValueError(f"{path}: not an edgeps ONNX export (no edgeps_card)")
    if "edgeps_digest" not in props:
        raise ValueError(
            f"{path}: no edgeps_digest in its metadata, so its weights cannot be "
            "checked (an export of an older edgeps, or damaged): export it again"
        )
    if digest(proto, props) != props["edgeps_digest"]:
        raise ValueError(f"{path}: digest mismatch: the file is damaged")
    for init in proto.graph.initializer:
        try:
            value = numpy_helper.to_array(init)
        except Exception as exc:
            raise ValueError(f"{path}: weight {init.name} unreadable ({exc})") from None
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise ValueError(f"{path}: weight {init.name} is not all finite")
    return data, props


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
        data, props = check_file(path)
        try:
            self.card = ModelCard.from_dict(json.loads(props["edgeps_card"]))
            self.meta = dict(json.loads(props.get("edgeps_meta", "{}")))
            self.session = ort.InferenceSession(
                data, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's own errors are not ValueErrors
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ValueError(
                f"{path}: not a usable edgeps ONNX export: {first}"
            ) from None

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
