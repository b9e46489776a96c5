"""C conv forward against an independent implementation: ONNX Runtime.

The graph is built here, op by op (Conv, MaxPool, AveragePool, Relu, Flatten,
MatMul, Add, Softmax), from the same flat parameter vector and the layout the
spec documents, so a layout or padding mistake shared by edgeps's C and numpy
kernels would show.
"""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

C = get_backend("c")
SPECS = [
    "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10",
    "conv1d:6x100-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-6",
    "conv1d:3x17-c4k5s2p2-a2-c2k3-m2s1-4",
    "conv1d:2x31-c5k7s3p3-m3s2-a3s1-d17-3",
    "conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10",
    "conv2d:3x11x13-c5k4s3p2-m3s1-a2-d20-d17-5",
    "conv2d:2x7x8-c3k3s2p1-m2-2",
]


def onnx_graph(spec: ModelSpec, params: np.ndarray) -> bytes:
    """The model as an ONNX graph: input X (batch, n_features), output P."""
    nodes, inits = [], []
    dims = len(spec.in_shape) - 1
    shape = np.array([0, *spec.in_shape], np.int64)
    inits.append(numpy_helper.from_array(shape, "in_shape"))
    nodes.append(helper.make_node("Reshape", ["X", "in_shape"], ["h0"]))
    h = "h0"
    flat = False
    for i, op in enumerate(spec.ops):
        ly, out = op.layer, f"h{i + 1}"
        if op.op == "conv":
            w, b = f"W{i}", f"b{i}"
            inits.append(numpy_helper.from_array(params[op.w].reshape(op.w_shape), w))
            inits.append(numpy_helper.from_array(params[op.b], b))
            nodes.append(
                helper.make_node(
                    "Conv",
                    [h, w, b],
                    [out + "c"],
                    kernel_shape=[ly.k] * dims,
                    strides=[ly.stride] * dims,
                    pads=[ly.pad] * (2 * dims),
                )
            )
            nodes.append(helper.make_node("Relu", [out + "c"], [out]))
        elif op.op in ("maxpool", "avgpool"):
            kind = "MaxPool" if op.op == "maxpool" else "AveragePool"
            nodes.append(
                helper.make_node(
                    kind,
                    [h],
                    [out],
                    kernel_shape=[ly.k] * dims,
                    strides=[ly.stride] * dims,
                )
            )
        else:
            if not flat:
                nodes.append(helper.make_node("Flatten", [h], [h + "f"], axis=1))
                h, flat = h + "f", True
            w, b = f"W{i}", f"b{i}"
            inits.append(numpy_helper.from_array(params[op.w].reshape(op.w_shape), w))
            inits.append(numpy_helper.from_array(params[op.b], b))
            nodes.append(helper.make_node("MatMul", [h, w], [out + "m"]))
            last = i == len(spec.ops) - 1
            nodes.append(
                helper.make_node(
                    "Add", [out + "m", b], [out + ("z" if ly.relu else "")]
                )
            )
            if ly.relu:
                nodes.append(helper.make_node("Relu", [out + "z"], [out]))
            if last:
                nodes.append(helper.make_node("Softmax", [out], ["P"], axis=1))
        h = out
    graph = helper.make_graph(
        nodes,
        "edgeps_conv",
        [
            helper.make_tensor_value_info(
                "X", TensorProto.FLOAT, [None, spec.n_features]
            )
        ],
        [helper.make_tensor_value_info("P", TensorProto.FLOAT, [None, spec.n_classes])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.mark.parametrize("text", SPECS)
def test_c_forward_matches_onnx_runtime(text: str) -> None:
    spec = ModelSpec.parse(text)
    rng = np.random.default_rng(4)
    p = spec.init_params(2) + rng.normal(scale=0.05, size=spec.n_params).astype(
        np.float32
    )
    X = rng.standard_normal((37, spec.n_features)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(
        onnx_graph(spec, p), opts, providers=["CPUExecutionProvider"]
    )
    want = sess.run(["P"], {"X": X})[0]
    got = C.forward(spec, p, X)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
