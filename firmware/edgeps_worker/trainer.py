"""The board trainer: MicroPython kernels over a data source, buffers allocated once.

It implements the trainer interface of ``edgeps_worker.worker``: the loop
copies PARAMS into ``params_buffer()``, ``step()`` draws a minibatch from the
source and returns (mean loss, samples, gradient array('f')). The minibatch
is read a chunk of rows at a time (``source.draw(n)`` says how many rows it
has, ``source.rows`` fills each chunk), so RAM holds one chunk, not the batch.
The number formats of the wire are ``edgeps_worker.codec``'s: ``codecs`` and
``reads`` announce them, ``encode_grad`` and ``write_params`` use them.
"""

import gc
from array import array

from edgeps_worker.data import LABEL_FLOAT, LABEL_INT


class KernelTrainer:
    """Minibatch gradients of one model spec on one data source."""

    # the dtypes of edgeps_worker.codec (encoders) and codec_read (decoders),
    # bit 1 << code: F32, F16, I8. Both modules are imported at their first
    # use (on a board a module's code takes heap; no module global is added)
    codecs = 14  # UPDATE dtypes it produces
    reads = 14  # PARAMS dtypes it decodes

    def __init__(self, spec, source, batch=16, buffers=None, residual="i8"):
        """``buffers``: optional (params, grad) array('f') pairs reserved early;
        ``residual``: how I8's error feedback is kept (codec.GradCodec's keep:
        "i8", 1 B a parameter, fits the board's heap; "f32", 4 B, exact)."""
        if batch < 1:
            raise ValueError("batch must be a positive integer")
        # per-batch scratch taken once, here; a conv network needs none of the
        # dense kernels, and no global here holds them (builder.build drops them)
        if spec.startswith("conv"):
            from edgeps_worker.conv import ConvNet as net
        else:
            from edgeps_worker.kernels import net
        self.net = net(spec, batch)
        if buffers is None:
            buffers = reserve(self.net.n_params)
        self.params, self.grad = buffers
        if len(self.params) != self.net.n_params or len(self.grad) != len(self.params):
            raise ValueError("buffers must hold n_params floats each")
        if source.n_features != self.net.n_features:
            raise ValueError(
                "data has "
                + str(source.n_features)
                + " features, model "
                + spec
                + " wants "
                + str(self.net.n_features)
            )
        self.model = spec
        self.source = source
        self.batch = batch
        # announced in HELLO: its scratch holds ``batch`` rows, a bounded ring
        # (a sensor's) fewer if it is smaller; the PS then asks for no more,
        # so a push of all it takes is not weighed as a short one
        cap = getattr(getattr(source, "ring", source), "capacity", batch)
        self.max_batch = cap if cap < batch else batch
        self.n_params = self.net.n_params
        # one chunk of the batch at a time: the kernels ask the source for
        # ``net.rows`` rows per chunk, so the batch is never held whole
        rows = self.net.rows
        self.X = array("f", bytes(4 * rows * self.net.n_features))
        kind = label_kind(spec)
        self.y = array("i" if kind == LABEL_INT else "f", bytes(4 * rows))
        self.residual = residual
        self.codec = None  # a codec.GradCodec from the first F16 or I8 step

    def params_buffer(self):
        return self.params

    def encode_grad(self, code, arg=0):
        """The last step's gradient as an UPDATE body in dtype ``code``.

        Called once per step, after ``step()``: F16 and I8 are written over
        the gradient buffer. I8 adds and keeps the error-feedback residual.
        ValueError (nothing encoded, the residual unchanged) on NaN or Inf.
        """
        c = self.codec
        if c is None:
            gc.collect()  # the step's floats gone: the code loads into fewer holes
            from edgeps_worker import codec

            c = self.codec = codec.GradCodec(self.n_params, self.residual)
        return c.encode(code, self.grad)

    def write_params(self, code, offset, data):
        """One PARAMS chunk of dtype ``code`` at encoded byte ``offset``, decoded
        into the parameters (F32 a plain copy); ValueError, nothing written,
        for a chunk that does not fit or holds NaN/Inf (F16, I8)."""
        if code == 1:  # F32, without loading the decoders
            from edgeps_worker.wire import byte_view

            end = offset + len(data)
            if offset < 0 or offset & 3 or end > 4 * self.n_params:
                raise ValueError("F32 chunk does not fit the parameters")
            byte_view(self.params)[0][offset:end] = data
            return
        from edgeps_worker import codec_read

        codec_read.write_params(self.params, code, offset, data)

    def step(self):
        """One gradient on the next minibatch; (0.0, 0, zeros) when no data yet."""
        n = self.source.draw(self.batch)
        if n == 0:
            # nothing sampled yet (an empty sensor ring): a zero update, zero samples
            for i in range(self.n_params):
                self.grad[i] = 0.0
            return 0.0, 0, self.grad
        loss = self.net.loss_and_grad(
            self.params, self.X, self.y, n, self.grad, self.source.rows
        )
        return loss, n, self.grad


def reserve(n_params):
    """The parameter and gradient buffers, allocated together after a collection.

    On a board they are the largest objects; taking them before the worker's
    modules are imported keeps the heap from being too fragmented for them.
    """
    gc.collect()
    zeros = bytes(4 * n_params)
    return array("f", zeros), array("f", zeros)


def label_kind(spec):
    """Regression targets are floats; every classifier wants class ids."""
    return LABEL_FLOAT if spec.startswith("linear:") else LABEL_INT
