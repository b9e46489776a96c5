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
from edgeps.model.card import ModelCard


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


def layer_table(spec: ModelSpec) -> list[str]:
    """One aligned line per layer: op, its text, shapes in and out, params, MACs."""
    texts = (
        [op.layer.text() for op in spec.ops]
        if spec.is_conv
        else ["-"] * len(spec.layer_slices())
    )
    rows = []
    for ly, text in zip(layers(spec), texts, strict=True):
        shape_in = "x".join(str(v) for v in ly["in_shape"])
        shape_out = "x".join(str(v) for v in ly["out_shape"])
        rows.append(
            f"{ly['op']:<8} {text:<10} {shape_in:>10} -> {shape_out:<10} "
            f"{ly['params']:>10,} params {ly['macs']:>12,} MACs"
        )
    return rows


def card_view(card: ModelCard, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """What `edgeps info MODEL` shows of a model: its card, architecture and layers."""
    spec = card.spec
    return {
        **describe(spec),
        "layers": layers(spec),
        "classes": list(card.class_names()) if spec.kind != "linear" else None,
        "scaled": card.scaler is not None,
        "feature_names": (
            list(card.feature_names) if card.feature_names is not None else None
        ),
        "meta": dict(meta or {}),
    }


def card_text(view: dict[str, Any]) -> str:
    """`card_view`'s dict as aligned text for people."""
    spec = ModelSpec.parse(view["spec"])
    scaled = "per-feature mean and std (raw rows in)" if view["scaled"] else "none"
    lines = [
        f"model         {view['spec']}",
        f"input         {'x'.join(str(v) for v in view['in_shape'])} "
        f"({spec.n_features} values a row)",
        f"architecture  {view['architecture']}",
        f"size          {size_text(view)}",
        f"classes       {', '.join(view['classes']) if view['classes'] else '-'}",
        f"scaler        {scaled}",
        "layers:",
        *("  " + row for row in layer_table(spec)),
    ]
    for key, value in view["meta"].items():
        if value is not None:
            lines.append(f"{key:<13} {value}")
    return "\n".join(lines)
