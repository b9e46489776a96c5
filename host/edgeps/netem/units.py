"""Link figures as people write them: ``250kbit``, ``1mbit``, ``64kbps``, ``20ms``.

Rates follow tc's spelling: ``bit``/``kbit``/``mbit``/``gbit`` are bits per
second and ``bps``/``kbps``/``mbps``/``gbps`` are **bytes** per second (as in
``tc``, where ``kbps`` means kilobytes); prefixes are decimal (k = 1000). A bare
number is bits per second. Durations take ``us``, ``ms``, ``s`` or a bare
number of seconds.
"""

from __future__ import annotations

import math
import re

_RATE_UNITS = {
    "": 1.0,
    "bit": 1.0,
    "kbit": 1e3,
    "mbit": 1e6,
    "gbit": 1e9,
    "bps": 8.0,
    "kbps": 8e3,
    "mbps": 8e6,
    "gbps": 8e9,
}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$")


def _split(text: str, what: str) -> tuple[float, str]:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a string, got {type(text).__name__}")
    m = _NUMBER.match(text.lower())
    if m is None:
        raise ValueError(f"bad {what} {text!r}: expected a number and a unit")
    value = float(m.group(1))
    if not math.isfinite(value):
        raise ValueError(f"bad {what} {text!r}: not a finite number")
    return value, m.group(2)


def parse_rate(text: str) -> float:
    """Bits per second from ``250kbit``, ``1mbit``, ``64kbps`` (bytes/s) or ``1e6``."""
    value, unit = _split(text, "rate")
    if unit not in _RATE_UNITS:
        known = ", ".join(u for u in _RATE_UNITS if u)
        raise ValueError(f"bad rate {text!r}: unknown unit {unit!r} (known: {known})")
    rate = value * _RATE_UNITS[unit]
    if rate <= 0:
        raise ValueError(f"bad rate {text!r}: must be > 0")
    return rate


def parse_duration(text: str) -> float:
    """Seconds from ``20ms``, ``0.02s``, ``500us`` or a bare ``0.02``."""
    value, unit = _split(text, "duration")
    if unit not in _TIME_UNITS:
        known = ", ".join(u for u in _TIME_UNITS if u)
        raise ValueError(
            f"bad duration {text!r}: unknown unit {unit!r} (known: {known})"
        )
    return value * _TIME_UNITS[unit]


def parse_loss(text: str) -> float:
    """A loss probability in [0, 1) from ``0.01`` or ``1%``."""
    if not isinstance(text, str):
        raise TypeError(f"loss must be a string, got {type(text).__name__}")
    raw = text.strip()
    scale = 1.0
    if raw.endswith("%"):
        raw, scale = raw[:-1], 0.01
    try:
        p = float(raw) * scale
    except ValueError:
        raise ValueError(f"bad loss {text!r}: expected 0.01 or 1%") from None
    if not 0.0 <= p < 1.0:
        raise ValueError(f"bad loss {text!r}: must be in [0, 1)")
    return p


def format_rate(bits_per_s: float) -> str:
    """``250kbit`` for 250000.0: the short form tables print."""
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bits_per_s >= scale:
            return f"{bits_per_s / scale:g}{unit}"
    return f"{bits_per_s:g}bit"
