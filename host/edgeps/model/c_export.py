"""The C export: one header of static const arrays and a predict over ``eps_``.

The header holds the model struct, the weights, the scaler (mean and
1/std) and the class names, plus two static functions: ``<name>_check``
(validates the scratch length once), ``<name>_class_name`` and
``<name>_predict`` (one row of raw
features -> outputs and the class id), which scale the row and call
``eps_model_forward`` from native/. The caller owns every buffer; nothing
allocates. Include the header in one .c file of the firmware.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.kernels import ModelSpec
from edgeps.model.card import TrainedModel

EPS_BATCH_CHUNK = 1  # the header predicts one row at a time
EPS_NARROW = 16  # layers narrower than this use transposed kernels (eps_model.c)
_KIND = {"linear": "EpsLinear", "logistic": "EpsLogistic", "softmax": "EpsSoftmax"}


def scratch_length(spec: ModelSpec, batch: int = 1) -> int:
    """Floats of scratch ``eps_model_forward`` needs: eps_scratch64 in eps_model.c."""
    s = spec.layer_sizes
    n_layers = len(s) - 1
    rows = min(batch, 32)
    n, widest = 0, 0
    for i in range(n_layers):
        w = s[i] * s[i + 1]
        if i > 0 or s[i + 1] < EPS_NARROW:
            n += w
        if s[i + 1] < EPS_NARROW:
            n += w
    for i in range(1, n_layers):
        n += rows * s[i]
        widest = max(widest, s[i])
    return n + rows * s[n_layers] + 2 * rows * widest


def c_name(text: str) -> str:
    """A C identifier from a file name: ``iris-model`` -> ``iris_model``."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "model"
    return name if not name[0].isdigit() else f"m_{name}"


def _floats(values: np.ndarray, per_line: int = 6) -> str:
    cells = []
    for v in np.asarray(values, dtype=np.float32).reshape(-1).tolist():
        t = f"{v:.9g}"
        if not any(ch in t for ch in ".en"):
            t += ".0"
        cells.append(t + "f")
    lines = [
        "    " + ", ".join(cells[i : i + per_line])
        for i in range(0, len(cells), per_line)
    ]
    return ",\n".join(lines)


def render(model: TrainedModel, name: str, meta: dict[str, Any]) -> str:
    """The header's text; ``name`` prefixes every symbol."""
    spec = model.spec
    if spec.is_conv:
        from edgeps.model import c_export_conv

        return c_export_conv.render(model, name, meta)
    card = model.card
    p, P = name.lower(), name.upper()
    kind = "EpsMlp" if spec.kind == "mlp" else _KIND[spec.kind]
    hidden = list(spec.hidden) + [0] * (2 - len(spec.hidden))
    act = "EpsTanh" if spec.activation == "tanh" else "EpsRelu"
    n_classes = len(card.class_names()) if spec.kind != "linear" else 0
    names = ", ".join(json.dumps(c) for c in card.class_names())
    about = json.dumps({k: v for k, v in meta.items() if v is not None})
    out = [
        f"/* {name}.h: {spec} exported by edgeps; {about.replace('*/', '* /')}",
        " *",
        f" * {p}_predict(x, x_scaled, out, scratch): x holds {P}_N_FEATURES raw",
        f" * features; x_scaled {P}_N_FEATURES floats and scratch",
        f" * {P}_SCRATCH_LENGTH floats are the caller's; out gets {P}_N_OUTPUTS",
        " * floats (the value, P(class 1) or class probabilities); returns the",
        " * class id (0 for a linear model). Call " + f"{p}_check() once first.",
        " * Needs native/'s eps_model.c, eps_math.c and eps.c, built with",
        " * -DEPS_PORTABLE (on a PC too). Include it in one .c file: the arrays",
        " * are static.",
        " */",
        f"#ifndef {P}_H",
        f"#define {P}_H",
        "#include <stdint.h>",
        "",
        '#include "eps_model.h"',
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f"#define {P}_N_FEATURES {spec.n_features}",
        f"#define {P}_N_OUTPUTS {spec.n_classes}",
        f"#define {P}_N_CLASSES {n_classes}",
        f"#define {P}_N_PARAMS {spec.n_params}",
        f"#define {P}_SCRATCH_LENGTH {scratch_length(spec)}",
        f"#define {P}_SCALED {1 if card.scaler is not None else 0}",
        "",
        f"static const EpsModel {p}_model = {{{kind}, {spec.n_features}, "
        f"{spec.n_classes}, {len(spec.hidden)}, {{{hidden[0]}, {hidden[1]}}}, {act}}};",
        "",
        "/* layers in order, each W (n_in x n_out, row-major) then b (n_out) */",
        f"static const float {p}_params[{P}_N_PARAMS] = {{",
        _floats(model.params),
        "};",
        "",
    ]
    if card.scaler is not None:
        mean, inv = card.scaler.offset_scale()
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
    if spec.kind != "linear":
        out += [
            f"static const char *const {p}_class_names[{P}_N_CLASSES] = {{{names}}};",
            "",
            "/* the name of a class id that predict returned */",
            f"static inline const char *{p}_class_name(int32_t id) {{",
            f'    return id >= 0 && id < {P}_N_CLASSES ? {p}_class_names[id] : "?";',
            "}",
            "",
        ]
    out += [
        "/* EpsOk when scratch_length floats of scratch are enough */",
        f"static inline EpsStatus {p}_check(int32_t scratch_length) {{",
        f"    return eps_model_check(&{p}_model, {P}_N_PARAMS, scratch_length, 1);",
        "}",
        "",
        f"static inline int32_t {p}_predict(const float *x, float *x_scaled,",
        "                                   float *out, float *scratch) {",
        f"    for (int32_t i = 0; i < {P}_N_FEATURES; i++)",
    ]
    if card.scaler is not None:
        out.append(f"        x_scaled[i] = (x[i] - {p}_mean[i]) * {p}_inv_std[i];")
    else:
        out.append("        x_scaled[i] = x[i];")
    out.append(
        f"    eps_model_forward(&{p}_model, {p}_params, x_scaled, 1, out, scratch);"
    )
    if spec.kind == "linear":
        out.append("    return 0;")
    elif spec.kind == "logistic":
        out.append("    return out[0] >= 0.5f ? 1 : 0;")
    else:
        out += [
            "    int32_t best = 0;",
            f"    for (int32_t c = 1; c < {P}_N_OUTPUTS; c++)",
            "        if (out[c] > out[best]) best = c;",
            "    return best;",
        ]
    out += [
        "}",
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "#endif",
        "",
    ]
    return "\n".join(out)


def write(model: TrainedModel, path: Path, meta: dict[str, Any]) -> Path:
    path.write_text(render(model, c_name(path.stem), meta), encoding="utf-8")
    return path
