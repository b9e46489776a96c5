"""The parameter-server core: pure logic, time passed in, no I/O.

Dependency rule: nothing in ``edgeps.core`` imports ``edgeps.policy``, the
runtime or the transport; policies import the core (``policy_api``, ``view``).
"""

from __future__ import annotations

from edgeps.core.monitor import PerformanceMonitor
from edgeps.core.policy_api import Policy
from edgeps.core.server import ParameterServer
from edgeps.core.sink import ActionSink, carry_out
from edgeps.core.types import (
    Action,
    Applied,
    Event,
    Heartbeat,
    Held,
    Join,
    Leave,
    Push,
    Rejected,
    Release,
    Tick,
    WorkerLeft,
    WorkerState,
    WorkerStats,
)
from edgeps.core.view import ClusterView

__all__ = [
    "Action",
    "ActionSink",
    "Applied",
    "ClusterView",
    "Event",
    "Heartbeat",
    "Held",
    "Join",
    "Leave",
    "ParameterServer",
    "PerformanceMonitor",
    "Policy",
    "Push",
    "Rejected",
    "Release",
    "Tick",
    "WorkerLeft",
    "WorkerState",
    "WorkerStats",
    "carry_out",
]
