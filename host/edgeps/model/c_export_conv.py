"""The C export of conv models: an ``EpsNet`` header over native's eps_conv.c.

Same shape as the dense header (c_export.py): static const arrays (the net,
its weights, the scaler, the class names), ``<name>_check`` and
``<name>_predict`` (one raw window or image -> class probabilities and the
class id) calling ``eps_net_forward``. The scratch length is computed here
exactly as eps_conv.c's eps_net_layout counts it, for one row.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from edgeps.kernels import ModelSpec
from edgeps.kernels.layers import Op
from edgeps.model.c_export import _floats
from edgeps.model.card import TrainedModel

EPS_BATCH_CHUNK = 32  # eps_model.h
EPS_CONV_COLS = 512  # eps_conv.c: output positions per im2col group
EPS_NET_NARROW = 16  # eps_conv.c: dense layers narrower use transposed kernels
_OP = {
    "conv": "EpsOpConv",
    "maxpool": "EpsOpMaxPool",
    "avgpool": "EpsOpAvgPool",
    "dense": "EpsOpDense",
}


def _n_w(op: Op) -> int:
    return math.prod(op.w_shape) if op.w_shape else 0


def net_scratch_length(spec: ModelSpec, batch: int = 1) -> int:
    """Floats of scratch ``eps_net_forward`` and ``eps_net_loss_grad`` need."""
    rows = min(batch, EPS_BATCH_CHUNK)
    n = gtmp = cols = ybuf = widest = 0
    for i, op in enumerate(spec.ops):
        n_w = _n_w(op)
        if op.op in ("conv", "dense"):
            n += n_w
        if op.op == "dense" and op.layer.n_out < EPS_NET_NARROW:
            n += n_w
        if op.op == "conv":
            sp = math.prod(op.out_shape[1:])
            group = min(max(EPS_CONV_COLS // sp, 1), rows)
            ckk = math.prod(op.w_shape[1:])
            gtmp = max(gtmp, n_w)
            cols = max(cols, ckk * group * sp)
            ybuf = max(ybuf, op.layer.n_out * group * sp)
        widest = max(widest, math.prod(op.out_shape))
        if i > 0:
            widest = max(widest, math.prod(op.in_shape))
    n += rows * sum(math.prod(op.out_shape) for op in spec.ops)
    return n + gtmp + cols + ybuf + 2 * rows * widest


def _net_struct(spec: ModelSpec, p: str) -> list[str]:
    shape = list(spec.in_shape) + [0] * (3 - len(spec.in_shape))
    rows = []
    for op in spec.ops:
        ly = op.layer
        relu = int(ly.relu and ly.op in ("conv", "dense"))
        fields = (_OP[ly.op], ly.n_out, ly.k, ly.stride, ly.pad, relu)
        rows.append("        {" + ", ".join(map(str, fields)) + "},")
    return [
        "/* layers: {op, n_out, k, stride, pad, relu} */",
        f"static const EpsNet {p}_net = {{",
        f"    {len(spec.in_shape) - 1}, {{{shape[0]}, {shape[1]}, {shape[2]}}}, "
        f"{len(spec.ops)},",
        "    {",
        *rows,
        "    }};",
    ]


def _scaler(model: TrainedModel) -> tuple[np.ndarray, np.ndarray]:
    """mean and 1/std per input float (a per-channel scaler is repeated)."""
    assert model.card.scaler is not None
    mean, inv = model.card.scaler.offset_scale()
    n, channels = model.spec.n_features, model.spec.in_shape[0]
    if mean.size == channels and n != channels:
        mean, inv = np.repeat(mean, n // channels), np.repeat(inv, n // channels)
    return mean, inv


def render(model: TrainedModel, name: str, meta: dict[str, Any]) -> str:
    """The header's text for a conv model; ``name`` prefixes every symbol."""
    spec, card = model.spec, model.card
    p, P = name.lower(), name.upper()
    names = ", ".join(json.dumps(c) for c in card.class_names())
    about = json.dumps({k: v for k, v in meta.items() if v is not None})
    shape = "x".join(map(str, spec.in_shape))
    out = [
        f"/* {name}.h: {spec} exported by edgeps; {about.replace('*/', '* /')}",
        " *",
        f" * {p}_predict(x, x_scaled, out, scratch): x holds one {shape} input",
        f" * ({P}_N_FEATURES raw floats, channel first); x_scaled {P}_N_FEATURES",
        f" * floats and scratch {P}_SCRATCH_LENGTH floats are the caller's; out",
        f" * gets {P}_N_OUTPUTS class probabilities; returns the class id. Call",
        f" * {p}_check() once first. Needs native/'s eps_conv.c, eps_model.c,",
        " * eps_math.c and eps.c (EPS_PORTABLE on a microcontroller). Include it in",
        " * one .c file: the arrays are static.",
        " */",
        f"#ifndef {P}_H",
        f"#define {P}_H",
        "#include <stdint.h>",
        "",
        '#include "eps_conv.h"',
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f"#define {P}_N_FEATURES {spec.n_features}",
        f"#define {P}_N_OUTPUTS {spec.n_classes}",
        f"#define {P}_N_CLASSES {spec.n_classes}",
        f"#define {P}_N_PARAMS {spec.n_params}",
        f"#define {P}_SCRATCH_LENGTH {net_scratch_length(spec)}",
        f"#define {P}_SCALED {1 if card.scaler is not None else 0}",
        "",
        *_net_struct(spec, p),
        "",
        "/* layers in order: conv W (N, C, K[, K]) then b (N); dense W (n_in x n_out)",
        " * then b (n_out) */",
        f"static const float {p}_params[{P}_N_PARAMS] = {{",
        _floats(model.params),
        "};",
        "",
    ]
    if card.scaler is not None:
        mean, inv = _scaler(model)
        out += [
            "/* the scaler: x_scaled = (x - mean) * inv_std */",
            f"static const float {p}_mean[{P}_N_FEATURES] = {{",
            _floats(mean),
            "};",
            f"static const float {p}_inv_std[{P}_N_FEATURES] = {{",
            _floats(inv),
            "};",
            "",
        ]
    scale = (
        f"        x_scaled[i] = (x[i] - {p}_mean[i]) * {p}_inv_std[i];"
        if card.scaler is not None
        else "        x_scaled[i] = x[i];"
    )
    out += [
        f"static const char *const {p}_class_names[{P}_N_CLASSES] = {{{names}}};",
        "",
        "/* the name of a class id that predict returned */",
        f"static inline const char *{p}_class_name(int32_t id) {{",
        f'    return id >= 0 && id < {P}_N_CLASSES ? {p}_class_names[id] : "?";',
        "}",
        "",
        "/* EpsOk when scratch_length floats of scratch are enough */",
        f"static inline EpsStatus {p}_check(int32_t scratch_length) {{",
        f"    return eps_net_check(&{p}_net, {P}_N_PARAMS, scratch_length, 1);",
        "}",
        "",
        f"static inline int32_t {p}_predict(const float *x, float *x_scaled,",
        "                                   float *out, float *scratch) {",
        f"    for (int32_t i = 0; i < {P}_N_FEATURES; i++)",
        scale,
        f"    eps_net_forward(&{p}_net, {p}_params, x_scaled, 1, out, scratch);",
        "    int32_t best = 0;",
        f"    for (int32_t c = 1; c < {P}_N_OUTPUTS; c++)",
        "        if (out[c] > out[best]) best = c;",
        "    return best;",
        "}",
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "#endif",
        "",
    ]
    return "\n".join(out)
