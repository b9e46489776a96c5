"""Local differential privacy on the CPython worker: clip and noise before sending.

With ``edgeps worker --dp-clip C --dp-noise SIGMA`` each gradient is scaled
to L2 norm at most C and gets N(0, (SIGMA x C)^2) noise per coordinate
(``edgeps.core.privacy.privatize``) before it is encoded, so the PS and the
broker only ever see the noisy one. Serve the job with ``--dp local`` and the
same C and SIGMA: its accountant counts the updates (the protocol does not
carry the settings yet). The noise comes from the operating system's entropy
unless a seed is given (tests only: a known seed lets anyone take the noise
off again). The MicroPython board worker has no local DP.
"""

from __future__ import annotations

import numpy as np

from edgeps.core.privacy import check_dp, privatize


class LocalDP:
    """Clip a gradient to ``clip`` and add Gaussian noise, in place."""

    def __init__(self, clip: float, noise: float, seed: int | None = None) -> None:
        check_dp("local", clip, noise)
        self.clip = float(clip)
        self.noise = float(noise)
        self.rng = np.random.default_rng(seed)
        self.updates = 0  # gradients privatized
        self.clipped = 0  # of them, scaled down to ``clip``

    def apply(self, grad: np.ndarray) -> None:
        """Replace ``grad`` (float32, flat) by its clipped, noisy version."""
        noisy, clipped = privatize(grad, self.clip, self.noise, self.rng)
        grad[...] = noisy
        self.updates += 1
        self.clipped += clipped
