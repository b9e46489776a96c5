"""An inference board fetches the job's current model; it never trains.

It joins the job as a worker would (HELLO with its own key, so the WELCOME
and the PARAMS that answer it are signed for it and checked: an unsigned or
forged one is dropped before it is read), takes the WELCOME's card (class
names, scaler) and the first complete release, writes the model file
(``keep.save``), says BYE and goes. It never pushes: ``Fetcher`` is the
shared ``Worker`` whose release ends the run instead of starting a step.
The PS counts it as a worker that joined and left.

``edgeps_worker.infer`` loads this module only when a model is to be
fetched (config ``fetch``: ``missing``, the default, when ``model_file`` is
not there; ``always`` at every start; ``never``); ``edgeps worker --infer
--fetch`` runs the same code on CPython.
"""

import gc
from array import array

from edgeps_worker import unload
from edgeps_worker.clock import ticks_diff, ticks_ms

FETCHED = "fetched"
FETCH_MS = 60000  # fetch "always" with a model on flash: then that one


class Holder:
    """A trainer that only holds a release: the Worker's buffer, never a step.

    It announces every UPDATE code (it pushes none, so no job refuses it for
    its codec) and reads F32, F16 and I8 releases (``codec_read``).
    """

    codecs = 30  # F32, F16, I8, TOPK (bit 1 << code)
    reads = 14  # F32, F16, I8

    def __init__(self, spec, n_params, params=None):
        self.model = spec
        self.n_params = n_params
        if params is None:
            params = array("f", range(n_params))  # no n-byte temporary
        self.params = params
        self.scale = None  # the WELCOME's scaler, bytes

    def params_buffer(self):
        return self.params

    def set_scale(self, data):
        self.scale = data

    def write_params(self, code, offset, data):
        from edgeps_worker import codec_read

        codec_read.write_params(self.params, code, offset, data)


def fetcher(*args, **kw):
    """A Worker whose first complete release ends its run (stop reason
    ``fetched``): it says BYE then, having pushed nothing. The worker loop is
    imported here, after the release buffer was taken."""
    from edgeps_worker.worker import Worker

    class Fetcher(Worker):
        def _release(self):
            self.stats["releases"] += 1
            self.stop_reason = FETCHED

    return Fetcher(*args, **kw)


def n_params(spec):
    """Parameters of a model spec: each dense layer's W and b."""
    from edgeps_worker.kernels import n_params as count
    from edgeps_worker.kernels import parse_spec

    if spec.startswith("conv"):  # its layers are not a list of dense sizes
        return count(spec)
    sizes = parse_spec(spec)[1]
    return sum(sizes[i] * sizes[i + 1] + sizes[i + 1] for i in range(len(sizes) - 1))


def fetch(transport, spec, job, wid, path, key=None, stop=None, log=None,
          params=None, **opts):  # fmt: skip
    """Join job ``job`` as ``wid`` over ``transport``, write the model of its
    first release to ``path``; the stop reason (``fetched`` when written).
    ``params``: the buffer the release lands in (an array('f') of the
    model's size, taken early on a board); ``opts``: the Worker's timing and
    size keywords."""
    # a board's buffer is the model's size already: its n_params would load
    # the kernels (and blockfp) again, for the whole join
    h = Holder(spec, n_params(spec) if params is None else len(params), params)
    w = fetcher(transport, h, job, wid, key=key, stop=stop, log=log, **opts)
    reason = w.run()
    if reason == "done":  # the job ended first: its final release, when whole
        from edgeps_worker.keep import released

        if released(w) is not None:
            reason = FETCHED
    if reason == FETCHED:
        from edgeps_worker.keep import save

        save(path, spec, getattr(w, "classes", None), h.params, h.scale)
    peak = w.stats["peak_mem"]
    if peak:  # memory_probe: the join's peak, before the model loads
        print("edgeps infer: fetch peak heap " + str(peak) + " B")
    return reason


def board(cfg, have):
    """An inference board's fetch into its model_file, with its config; with
    a model file there already (``have``), given up after FETCH_MS for the
    one on flash. Returns the MQTT client, for the predictions; ValueError
    when the job will not give this board a model."""
    from binascii import unhexlify

    # where the release lands: first, while the heap is whole (the model
    # loads into the same hole once it is written); the kernels, which the
    # config's check loaded, come back with the model
    n = n_params(cfg["model"])
    for name in ("kernels", "blockfp", "conv", "convk"):
        unload(name)
    gc.collect()
    params = array("f", range(n))
    from edgeps_worker.infer import transport

    client = transport(cfg)
    gc.collect()  # the builder's code gone before the worker's loads
    key = cfg["hmac_key"]
    probe = None
    if cfg["memory_probe"]:
        from edgeps_worker.app import live_heap as probe
    t0 = ticks_ms()
    try:
        reason = fetch(
            client, cfg["model"], cfg["job"], cfg["worker_id"], cfg["model_file"],
            unhexlify(key) if key else None,
            lambda: have and ticks_diff(ticks_ms(), t0) > FETCH_MS,
            print if cfg["verbose"] else None, params=params,
            heartbeat_ms=cfg["heartbeat_ms"], max_chunk=cfg["max_chunk"],
            release_timeout_ms=cfg["release_timeout_ms"], mem_probe=probe,
        )  # fmt: skip
    finally:
        # the join's code is not used again: off the heap before the model
        # loads; the client, kept to publish, lets go of the worker (its
        # early hook) and with it of the release buffer
        client.payload_views = True
        params = None
        for name in ("worker", "worker_link", "params_sink", "wire",
                     "release_round", "codec_read", "local_round", "local_card",
                     "scaled", "keep"):  # fmt: skip
            unload(name)
        gc.collect()
    if reason == FETCHED:
        print("edgeps infer: fetched job " + cfg["job"] + "'s model into "
              + cfg["model_file"])  # fmt: skip
        if not key:  # anyone who can publish on the broker could have sent it
            print("edgeps infer: the model came unsigned: set hmac_key")
    elif reason != "stopped":
        raise ValueError("job " + cfg["job"] + " gave no model: " + reason)
    return client
