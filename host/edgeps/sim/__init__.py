"""Discrete-event simulator: the real PS core and real gradients, in virtual time.

``simulate(SimConfig(policy="dsp", scenario="mixed"))`` runs one job;
``edgeps.sim.compare.compare`` runs several policies over several seeds.
"""

from edgeps.sim.simulator import Simulator, simulate
from edgeps.sim.types import SimConfig, SimResult

__all__ = ["SimConfig", "SimResult", "Simulator", "simulate"]
