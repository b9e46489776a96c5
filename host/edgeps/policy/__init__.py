"""Sync policies, one per module, each a subclass of ``edgeps.core.Policy``.

Policies depend on the core (its ``Policy`` interface and read-only
``ClusterView``); the core depends on no policy. ``parse_policy`` turns the
text forms into policy objects for the CLI, the config and the simulator.
"""

from __future__ import annotations

from edgeps.core.policy_api import Policy
from edgeps.core.view import ClusterView
from edgeps.policy.parse import POLICIES, parse_policy

__all__ = ["POLICIES", "ClusterView", "Policy", "parse_policy"]
