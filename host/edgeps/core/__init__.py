"""The parameter-server core: pure logic, time passed in, no I/O.

``ParameterServer``, ``ClusterView`` and ``Policy`` load on first use, so that
``edgeps.policy`` and ``edgeps.core`` can import each other's leaf modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from edgeps.core.types import (
    Action,
    Applied,
    Held,
    Push,
    Rejected,
    Release,
    WorkerLeft,
    WorkerState,
    WorkerStats,
)

if TYPE_CHECKING:
    from edgeps.core.server import ParameterServer
    from edgeps.policy.base import ClusterView, Policy

_LAZY = {
    "ParameterServer": "edgeps.core.server",
    "ClusterView": "edgeps.policy.base",
    "Policy": "edgeps.policy.base",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'edgeps.core' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "Action",
    "Applied",
    "ClusterView",
    "Held",
    "ParameterServer",
    "Policy",
    "Push",
    "Rejected",
    "Release",
    "WorkerLeft",
    "WorkerState",
    "WorkerStats",
]
