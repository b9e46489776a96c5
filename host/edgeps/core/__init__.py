"""The parameter-server core: pure logic, time passed in, no I/O."""

from edgeps.core.server import ParameterServer
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
from edgeps.policy.base import ClusterView, Policy

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
