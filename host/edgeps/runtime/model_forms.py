"""Short model forms (``softmax``, ``mlp:32``, ``conv1d``, ``lenet5``) made whole.

A dataset fixes the input and output sizes, so ``--model`` only needs to say
what the dataset does not: the kind and, for an MLP, the hidden widths; for
a conv model on windows or images, nothing or its layers. Full specs
(``mlp:30-32-6``, ``softmax:64x10``, ``conv1d:3x64-c8k5-m2-4``) pass through
unchanged; whether they fit the data is checked where the data is loaded.
"""

from __future__ import annotations

from edgeps.kernels.layers import default_conv1d, default_conv2d, lenet5

DEFAULT_HIDDEN = "32"
EXAMPLES = (
    "softmax, logistic, linear, mlp, mlp:64, mlp:64-32, mlp:32:tanh, "
    "conv1d, conv1d:c16k5p2-m2-d32, conv2d, lenet5"
)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(v) for v in shape)


def _complete_conv(
    text: str, kind: str, rest: list[str], n_classes: int, shape: tuple[int, ...] | None
) -> str:
    dims = 2 if kind in ("conv2d", "lenet5") else 1
    if shape is None and rest and rest[0].split("-")[0][:1].isdigit():
        return text.strip()  # a full spec names its shape: rows of C*L (C*H*W) floats
    if shape is None or len(shape) != dims + 1:
        what = "windows (C x L: an .npz X of shape (n, C, L), or --window on a CSV)"
        if dims == 2:
            what = "images (C x H x W: an .npz X of shape (n, C, H, W))"
        got = "rows" if shape is None else _shape_text(shape)
        raise ValueError(f"--model {text} needs {what}; the data has {got}")
    if kind == "lenet5":
        if rest:
            raise ValueError(f"bad model spec {text!r}: lenet5 takes no layers")
        if min(shape[1:]) < 28:
            raise ValueError(
                f"lenet5 needs images of at least 28x28, the data has "
                f"{_shape_text(shape)}"
            )
        return lenet5(shape, n_classes)
    if not rest:
        make = default_conv1d if dims == 1 else default_conv2d
        return make(shape, n_classes)
    layers = rest[0]
    if layers.split("-")[0][:1].isdigit():  # already shape-layers-classes
        return text.strip()
    return f"{kind}:{_shape_text(shape)}-{layers}-{n_classes}"


def complete_model(
    text: str, n_features: int, n_classes: int, shape: tuple[int, ...] | None = None
) -> str:
    """The full spec text for ``text`` on data with these sizes.

    ``n_classes`` counts the labels (2 for binary data). ``mlp`` takes one or
    two hidden widths (``mlp:64`` or ``mlp:64-32``, default 32) and an
    optional activation (``mlp:32:tanh``); ``logistic`` needs binary data.
    ``shape`` is a sample's (C, L) or (C, H, W) for windows and images:
    ``conv1d``/``conv2d`` alone pick a default network for it, ``conv1d:<layers>``
    adds the input shape and the classes, ``lenet5`` names LeNet-5.
    """
    if not isinstance(text, str):
        raise TypeError("model spec must be a string")
    if n_features < 1 or n_classes < 2:
        raise ValueError("data needs at least 1 feature and 2 classes")
    parts = text.strip().split(":")
    kind, rest = parts[0], parts[1:]
    if kind in ("conv1d", "conv2d", "lenet5") and len(rest) <= 1:
        return _complete_conv(text, kind, rest, n_classes, shape)
    if kind in ("linear", "logistic") and not rest:
        if kind == "logistic" and n_classes != 2:
            raise ValueError(
                f"bad model spec {text!r}: logistic needs 2 classes, "
                f"the data has {n_classes}"
            )
        return f"{kind}:{n_features}"
    if kind == "softmax" and not rest:
        return f"softmax:{n_features}x{n_classes}"
    if kind == "mlp" and len(rest) <= 2:
        widths = rest[0] if rest else DEFAULT_HIDDEN
        sizes = widths.split("-")
        if not all(s.isdigit() and int(s) > 0 for s in sizes):
            raise ValueError(
                f"bad model spec {text!r}: hidden widths must be positive "
                f"integers; short forms: {EXAMPLES}"
            )
        if len(sizes) >= 3:  # already input-hidden-...-output
            return text.strip()
        full = f"mlp:{n_features}-{widths}-{n_classes}"
        return full + (f":{rest[1]}" if len(rest) == 2 else "")
    return text.strip()  # a full spec or nonsense: ModelSpec.parse says which
