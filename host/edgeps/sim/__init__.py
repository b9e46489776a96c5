"""Discrete-event simulator: the real PS core and real gradients, in virtual time.

``simulate(SimConfig(policy="dsp", scenario="mixed"))`` runs one job;
``edgeps.sim.compare.compare`` runs several policies over several seeds.
"""

from edgeps.sim.config import SimConfig, SimResult
from edgeps.sim.simulator import Simulator, simulate

__all__ = ["SimConfig", "SimResult", "Simulator", "simulate"]
