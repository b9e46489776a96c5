"""Short model forms (``softmax``, ``logistic``, ``mlp``, ``mlp:32``) made whole.

A dataset fixes the input and output sizes, so ``--model`` only needs to say
what the dataset does not: the kind and, for an MLP, the hidden widths. Full
specs (``mlp:30-32-6``, ``softmax:64x10``) pass through unchanged; whether
they fit the data is checked where the data is loaded.
"""

from __future__ import annotations

DEFAULT_HIDDEN = "32"
EXAMPLES = "softmax, logistic, linear, mlp, mlp:64, mlp:64-32, mlp:32:tanh"


def complete_model(text: str, n_features: int, n_classes: int) -> str:
    """The full spec text for ``text`` on data with these sizes.

    ``n_classes`` counts the labels (2 for binary data). ``mlp`` takes one or
    two hidden widths (``mlp:64`` or ``mlp:64-32``, default 32) and an
    optional activation (``mlp:32:tanh``); ``logistic`` needs binary data.
    """
    if not isinstance(text, str):
        raise TypeError("model spec must be a string")
    if n_features < 1 or n_classes < 2:
        raise ValueError("data needs at least 1 feature and 2 classes")
    parts = text.strip().split(":")
    kind, rest = parts[0], parts[1:]
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
