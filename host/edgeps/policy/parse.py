"""``parse_policy``: the text forms of the sync policies, read at the edges.

Text forms: "bsp", "asp", "ssp:3", "dsp", "dsp:w=8", "dsp:rounds=48", "kofn:k=6",
"kofn:auto" (both kofn forms also take ",cap=N"), "dssp:sl=1,su=6"; over deltas:
"fedavg", "fedavg:k=K,deadline=S,agg=mean|median|trim:F", "fedbuff:k=K,agg=...",
"fedasync:a=A".
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from edgeps.core.policy_api import Policy
from edgeps.policy.asp import ASP
from edgeps.policy.bsp import BSP
from edgeps.policy.dsp import DSP
from edgeps.policy.dssp import DSSP
from edgeps.policy.fedasync import FedAsync
from edgeps.policy.fedavg import FedAvg
from edgeps.policy.fedbuff import FedBuff
from edgeps.policy.kofn import KofN
from edgeps.policy.ssp import SSP

POLICIES: tuple[str, ...] = (
    "bsp",
    "asp",
    "ssp",
    "dsp",
    "kofn",
    "dssp",
    "fedavg",
    "fedbuff",
    "fedasync",
)

# the parameters of each text form, by name (ssp also takes "ssp:S")
PARAMETERS: dict[str, tuple[str, ...]] = {
    "bsp": (),
    "asp": (),
    "ssp": ("s",),
    "dsp": tuple(inspect.signature(DSP.__init__).parameters)[1:],
    "kofn": ("k", "cap"),
    "dssp": ("sl", "su"),
    "fedavg": ("k", "deadline", "agg"),
    "fedbuff": ("k", "agg"),
    "fedasync": ("a",),
}

_NAME = re.compile(r"^[a-z]+$")
_KEY = re.compile(r"^[a-z_]+$")


def _int(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what} must be an integer, got {text!r}") from None
    return value


def _number(text: str, what: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{what} must be a number, got {text!r}") from None


def _options(name: str, rest: str) -> dict[str, str]:
    """``key=value,...`` of policy ``name``; ValueError naming an unknown key."""
    allowed = PARAMETERS[name]
    opts: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not _KEY.match(key) or not value:
            raise ValueError(f"{name}: expected key=value, got {part!r}")
        if key not in allowed:
            raise ValueError(
                f"{name}: unknown parameter {key!r} (known: {', '.join(allowed)})"
            )
        if key in opts:
            raise ValueError(f"{name}: option {key!r} given twice")
        opts[key] = value
    return opts


def _federated(name: str, opts: dict[str, str]) -> Policy:
    if name == "fedbuff":
        k_buff = _int(opts.get("k", "10"), "fedbuff k")
        return FedBuff(k_buff, agg=opts["agg"]) if "agg" in opts else FedBuff(k_buff)
    if name == "fedasync":
        return FedAsync(float(_number(opts.get("a", "0.6"), "fedasync a")))
    k = _int(opts["k"], "fedavg k") if "k" in opts else None
    deadline = opts.get("deadline")
    secs = None if deadline is None else float(_number(deadline, "fedavg deadline"))
    if "agg" in opts:
        return FedAvg(k, deadline=secs, agg=opts["agg"])
    return FedAvg(k, deadline=secs)


def parse_policy(text: str) -> Policy:
    """Build a policy from its text form; ValueError on anything unknown.

    The error names the policy and the parameter: an unknown one with the
    known ones, a bad value with what it must be.
    """
    if not isinstance(text, str):
        raise TypeError(f"policy must be given as text, got {type(text).__name__}")
    try:
        return _parse(text)
    except ValueError as exc:
        if str(exc).startswith(("unknown policy", "policy ")):
            raise
        raise ValueError(f"policy {text!r}: {exc}") from None


def _parse(text: str) -> Policy:
    spec = text.strip().lower()
    name, colon, rest = spec.partition(":")
    if not _NAME.match(name) or name not in POLICIES:
        raise ValueError(
            f"unknown policy {text!r}; expected one of: bsp, asp, ssp:S, dsp, "
            "dsp:w=W, kofn:k=K, kofn:auto, dssp:sl=L,su=U, fedavg, "
            "fedavg:k=K,deadline=S, fedbuff:k=K, fedasync:a=A"
        )
    if colon and not rest:
        raise ValueError(f"policy {text!r}: nothing after ':'")
    if name in ("bsp", "asp"):
        if colon:
            raise ValueError(f"policy {name!r} takes no parameters, got {text!r}")
        return BSP() if name == "bsp" else ASP()
    if name == "ssp":
        if not colon:
            return SSP()
        value = _options("ssp", rest)["s"] if "=" in rest else rest
        return SSP(_int(value, "ssp s (the staleness)"))
    if name == "dsp":
        kwargs_dsp: dict[str, Any] = {}
        if colon:
            for key, value in _options("dsp", rest).items():
                kwargs_dsp[key] = _number(value, f"dsp {key}")
        return DSP(**kwargs_dsp)
    if name in ("fedavg", "fedbuff", "fedasync"):
        return _federated(name, _options(name, rest) if colon else {})
    if name == "kofn":
        if not colon:
            raise ValueError("kofn needs k=K or auto, e.g. 'kofn:k=6' or 'kofn:auto'")
        head, _, tail = rest.partition(",")
        kwargs: dict[str, Any] = {}
        if head.strip() == "auto":
            kwargs["k"] = "auto"
            opts = _options("kofn", tail) if tail else {}
            if "k" in opts:
                raise ValueError("kofn: give k=K or auto, not both")
        else:
            opts = _options("kofn", rest)
            if "k" not in opts:
                raise ValueError(f"kofn needs k=K or auto, got {text!r}")
            kwargs["k"] = _int(opts["k"], "kofn k")
        if "cap" in opts:
            kwargs["cap"] = _int(opts["cap"], "kofn cap")
        return KofN(**kwargs)
    if not colon:
        return DSSP()
    opts = _options("dssp", rest)
    return DSSP(
        sl=_int(opts.get("sl", "1"), "dssp sl"), su=_int(opts.get("su", "6"), "dssp su")
    )
