"""A model's architecture for people and files: its layers, output shapes, size, MACs.

One description serves the model card, the JSON export, `edgeps info`, the
serve summary and the dashboard, so all of them say the same thing:
``conv 16x40 -> maxpool 16x20 -> ... -> dense 10``, the parameter count and
the multiply-adds of one sample's forward pass.
"""

from __future__ import annotations

import functools
from typing import Any

from edgeps.kernels import ModelSpec


def layers(spec: ModelSpec) -> list[dict[str, Any]]:
    """Every layer in order: op, width, kernel, stride, padding, shapes, size."""
    if spec.is_conv:
        return [
            {
                "op": op.op,
                "n_out": op.layer.n_out,
                "kernel": op.layer.k if op.op != "dense" else None,
                "stride": op.layer.stride if op.op != "dense" else None,
                "padding": op.layer.pad if op.op == "conv" else None,
                "relu": op.layer.relu if op.op in ("conv", "dense") else False,
                "in_shape": list(op.in_shape),
                "out_shape": list(op.out_shape),
                "w_shape": list(op.w_shape),
                "params": op.n_params,
                "macs": op.macs,
            }
            for op in spec.ops
        ]
    out = []
    slices = spec.layer_slices()
    for i, (_, (a, b), _) in enumerate(slices):
        hidden = i < len(slices) - 1
        out.append(
            {
                "op": "dense",
                "n_out": b,
                "kernel": None,
                "stride": None,
                "padding": None,
                "relu": hidden and spec.activation == "relu",
                "in_shape": [a],
                "out_shape": [b],
                "w_shape": [a, b],
                "params": a * b + b,
                "macs": a * b,
            }
        )
    return out


def line(spec: ModelSpec) -> str:
    """The layers and output shapes: ``conv 16x40 -> maxpool 16x20 -> dense 10``."""
    return " -> ".join(
        f"{ly['op']} {'x'.join(str(v) for v in ly['out_shape'])}" for ly in layers(spec)
    )


@functools.lru_cache(maxsize=64)
def _describe(text: str) -> dict[str, Any]:
    spec = ModelSpec.parse(text)
    return {
        "spec": text,
        "kind": spec.kind,
        "in_shape": list(spec.in_shape) if spec.is_conv else [spec.n_features],
        "architecture": line(spec),
        "params": spec.n_params,
        "macs": spec.macs,
    }


def describe(spec: ModelSpec | str) -> dict[str, Any]:
    """Spec text, input shape, architecture line, parameters and MACs (JSON-ready)."""
    return dict(_describe(str(spec)))


def size_text(info: dict[str, Any]) -> str:
    """``3,498 params, 25,376 MACs/sample`` from `describe`'s dict."""
    return f"{info['params']:,} params, {info['macs']:,} MACs/sample"
