"""Forward passes of the board kernels: outputs and predictions.

A training board never imports them (their code would be heap there); a
board in inference mode predicts with them (``predict``), and tests and the
host use ``Predictor`` like ``Model``.
"""

import math

from edgeps_worker.kernels import (
    OUT_IDENTITY,
    OUT_SIGMOID,
    OUT_SOFTMAX,
    Model,
    _softmax,
)


class Predictor(Model):
    """A ``Model`` that also computes outputs and class predictions."""

    def _outputs(self, s):
        """Turn row s of the output buffer into the model's outputs, in place."""
        z, no = self.h[-1], self.n_outputs
        if self.out == OUT_SOFTMAX:
            _softmax(z, s * no, no, 1.0)
        elif self.out == OUT_SIGMOID:
            z[s] = 1.0 / (1.0 + math.exp(-z[s]))

    def forward(self, params, X, n, out):
        """Outputs of n rows into out (n * n_outputs): value, P(y=1) or class probs."""
        self._check(params, X, 0, n)
        nf, no = self.n_features, self.n_outputs
        for start in range(0, n, self.rows):
            m = min(self.rows, n - start)
            ok = self._forward(params, X, start * nf, m)
            z = self.h[-1]
            for s in range(m):
                self._outputs(s)
                o = (start + s) * no
                for j in range(no):
                    out[o + j] = z[s * no + j] if ok else float("nan")
        return out

    def predict_one(self, params, X, s):
        """Class id (or value, for linear) of row s."""
        self._check(params, X, s, 1)
        self._forward(params, X, s * self.n_features, 1)
        z = self.h[-1]
        if self.out == OUT_IDENTITY:
            return z[0]
        if self.out == OUT_SIGMOID:
            return 1 if z[0] > 0.0 else 0
        best = 0
        for j in range(1, self.n_outputs):
            if z[j] > z[best]:
                best = j
        return best
