"""Builds the board's Worker from its config: run once, then unloaded.

``app.build`` imports this module, builds the worker and deletes the module
from ``sys.modules``: on MicroPython a loaded module's code stays on the heap
until then, and none of this runs again. Nothing built here may keep a
function of this module (a lambda, a class) alive, or its code stays loaded;
the closures the worker keeps come from ``app``. Imports are deliberately
late: the parameter and gradient buffers are reserved first, while the heap
is still unfragmented.
"""

import gc
import json
import os
import sys
from binascii import hexlify, unhexlify

from edgeps_worker import unload

# module, class ("": none), name of code only building runs, flat (a tuple
# of tuples costs more heap): a built board drops it (``shed``) and its bytecode
# leaves the heap; a SocketLink is made on every connect, a HELLO encoded on
# every join, so neither is here. A module that not every board loads lists
# its own as ONCE = (class, name, ...): its names are then interned only on
# the boards that load it
ONCE = (
    "worker", "Worker", "__init__", "params_sink", "ParamsSink", "__init__",
    "trainer", "KernelTrainer", "__init__", "trainer", "", "reserve",
    "trainer", "", "label_kind", "kernels", "Model", "__init__",
    "kernels", "", "parse_spec", "data", "FileSource", "__init__",
    "ring", "SensorSource", "__init__", "data", "XorShift", "__init__",
    "mqtt", "MQTTClient", "__init__", "wire", "", "topic_up",
    "wire", "", "topic_down", "wire", "", "topic_model",
    "builder", "", "read_config", "builder", "", "build_source",
    "builder", "", "mqtt_buffers", "worker", "", "STAT_NAMES",
    "app", "", "build", "kernels", "", "KINDS",
    "kernels", "", "net", "kernels", "", "n_params",
    # never run on a board: whole packets for benches and tests
    "mqtt_packets", "", "publish_packet", "mqtt_packets", "", "publish_into",
)  # fmt: skip


def mqtt_extra(cfg):
    """What MQTT adds to a message in a PUBLISH's remaining length: topic length
    and packet id (4 bytes) and the longest topic this worker sends or reads
    ("edgeps/J/down/W", "edgeps/J/params/shared"). The host chunks to our
    max_chunk, so nothing larger comes; a larger packet is refused before a
    buffer for it is allocated."""
    return 4 + 7 + len(cfg["job"]) + max(14, 6 + len(cfg["worker_id"]))


def read_config(path):
    """Validate a config file, then unload the validator (its code is heap)."""
    from edgeps_worker import config

    cfg = config.load(path, sys.platform == "esp32")
    # one host, or the nodes of a broker cluster, tried in turn
    cfg["broker_host"] = config.broker_nodes(cfg["broker_host"], cfg["broker_port"])
    unload("config")
    return cfg


def build_source(cfg, n_features, label_kind):
    """The configured data source: a data file, or a sensor module's read()."""
    from edgeps_worker import data

    if cfg["sensor"]:
        from edgeps_worker.ring import SensorSource

        try:
            mod = __import__(cfg["sensor"])
            read = mod.read
        except (ImportError, AttributeError):
            raise ValueError(
                "sensor module " + cfg["sensor"] + " with a read(xbuf) not found"
            ) from None
        if cfg["model"].startswith("conv"):  # one sample a read: windows of them
            from edgeps_worker.window import sensor_read

            read = sensor_read(read, cfg["model"], cfg.get("stride", 0))
        src = SensorSource(read, n_features, cfg["capacity"], label_kind, cfg["seed"])
        src.fill(cfg["batch"])
        return src
    path = cfg["data"]
    if path.endswith(".csv"):
        from edgeps_worker import datafile

        return datafile.load_csv(
            path, n_features, cfg["capacity"], label_kind, cfg["seed"]
        )
    src = data.FileSource(path, cfg["seed"])
    if src.n_features != n_features or src.label_kind != label_kind:
        src.close()
        raise ValueError(path + " does not fit the model (features or label kind)")
    return src


def make_transport(cfg, buffers, n_features=0):
    """The firmware MQTT client; on an ESP32 it brings Wi-Fi back on connect.

    ``buffers``: its (send, receive) buffers, from ``mqtt_buffers``.
    ``n_features``: the model's; a WELCOME whose card may be longer than a
    chunk (a scaler is 8 bytes a feature: 1.5 KB for 3 x 64 windows) is
    then read whole, in a block taken only for it.
    """
    if sys.platform == "esp32":
        from edgeps_worker.wifi import mqtt_client_class

        cls = mqtt_client_class(cfg)
    else:
        from edgeps_worker.mqtt import MQTTClient as cls
    ctx = None
    if cfg["tls_ca"]:
        from edgeps_worker.tlsconf import tls_context  # only then: code is heap

        ctx = tls_context(cfg["tls_ca"])
    t = cls(
        # an unguessable suffix per start, so no client can aim a takeover
        cfg["worker_id"] + "-" + hexlify(os.urandom(6)).decode(),
        cfg["broker_host"],  # one host, or a cluster's (host, port) nodes
        cfg["broker_port"],
        cfg["username"] or None,
        cfg["password"] or None,
        cfg["keepalive"],
        max_packet=cfg["max_chunk"] + mqtt_extra(cfg),
        ssl_context=ctx,
        server_hostname=cfg["tls_hostname"] or None,  # None: the node's host
        # the worker is done with a payload before it calls the client again
        payload_views=True,
        buffers=buffers,
    )
    # a WELCOME's bytes besides its scaler: frame, head, model spec, class
    # names, tag (PROTOCOL.md): 256
    card = 8 * n_features + 256
    if card > cfg["max_chunk"]:
        t.keep_over = card  # pyright: ignore[reportAttributeAccessIssue]
    return t


def mqtt_buffers(cfg):
    """The MQTT client's send and receive buffers for max_chunk bytes of data."""
    n = (
        cfg["max_chunk"] + mqtt_extra(cfg) + 5
    )  # and a fixed header byte, 4 length bytes
    return bytearray(min(n, 16389)), bytearray(n)


def shed(mods):
    """On MicroPython, drop the ONCE code of modules ``mods``: no second worker
    can be built in this process (a board builds one)."""
    if sys.implementation.name != "micropython":
        return
    for i in range(0, len(ONCE), 3):
        if ONCE[i] in mods:
            _drop(sys.modules.get("edgeps_worker." + ONCE[i]), ONCE[i + 1], ONCE[i + 2])
    for mod in mods:
        m = sys.modules.get("edgeps_worker." + mod)
        own = getattr(m, "ONCE", ())
        for i in range(0, len(own), 2):
            _drop(m, own[i], own[i + 1])
    gc.collect()


def _drop(obj, cls, name):
    if obj is not None and cls:
        obj = getattr(obj, cls, None)
    if obj is not None and hasattr(obj, name):
        # a deleted class attribute keeps its value in the class's table:
        # overwritten first, the function is garbage
        setattr(obj, name, None)
        delattr(obj, name)


def build(path, stop=None):
    """A ready Worker (not yet connected) for the config file at ``path``;
    None for a board that predicts (``app.build`` then builds it with
    ``edgeps_worker.infer`` once this module's code is off the heap)."""
    from edgeps_worker import app

    try:
        with open(path) as f:
            raw = json.load(f)
        model, mode = raw.get("model", ""), raw.get("mode")
        # a sensor board whose job is done: on_done predict (the default)
        # and its model_file there (edgeps_worker.keep)
        k = "on_done predict model_file model.bin".split()
        done = bool(raw.get("sensor")) and raw.get(k[0], k[1]) == k[1]
        if done:
            try:
                os.stat(raw.get(k[2], k[3]))
            except OSError:  # not there: train
                done = False
    except (OSError, ValueError, AttributeError, TypeError):
        model = mode = ""
        done = False
    raw = None
    # "mode": "infer" predicts with the model from flash (edgeps_worker.infer
    # checks the mode), and so does a sensor board that kept its job's model
    # (edgeps_worker.keep); the names are bytes and long strings, which are
    # not interned: a training board's heap keeps no trace of inference mode
    if done or isinstance(mode, str) and mode.encode() != b"train":
        return None
    buffers = None
    if isinstance(model, str) and model:
        from edgeps_worker import kernels, trainer

        try:
            buffers = trainer.reserve(kernels.n_params(model))
        except ValueError:
            pass  # the validation below says what is wrong with the model
    cfg = read_config(path)
    # next, in the validator's space, before the imports below scatter small
    # blocks over it: a small heap has no hole large enough left for them later
    mqtt_bufs = mqtt_buffers(cfg)
    from edgeps_worker import kernels, trainer

    model = cfg["model"]
    n_features = kernels.parse_spec(model)[1][0]
    if model.startswith("conv"):  # its network needs none of the dense kernels
        kernels = None
        unload("kernels")
        gc.collect()
    net = trainer.KernelTrainer(
        model,
        build_source(cfg, n_features, trainer.label_kind(model)),
        cfg["batch"],
        buffers,
    )
    hook = getattr(net.source, "set_classes", None)
    if hook is not None:
        # a CSV's text labels: the WELCOME's class names renumber them
        net.set_classes = hook  # pyright: ignore[reportAttributeAccessIssue]
    hook = None
    # each module's once code goes before the next modules load: the start-up
    # peak is then lower than with everything loaded at once
    shed(("trainer", "kernels", "conv", "data", "ring", "datafile", "builder"))
    from edgeps_worker import worker

    # the worker before its transport: its attribute table (47 slots, 752 B)
    # is taken before the MQTT modules scatter small blocks over the heap
    w = worker.Worker(
        None,
        net,
        cfg["job"],
        cfg["worker_id"],
        max_iterations=cfg["max_iterations"],
        stop=stop,
        heartbeat_ms=cfg["heartbeat_ms"],
        release_timeout_ms=cfg["release_timeout_ms"],
        max_chunk=cfg["max_chunk"],
        key=unhexlify(cfg["hmac_key"]) if cfg["hmac_key"] else None,
        mem_probe=app.live_heap
        if cfg["memory_probe"] and hasattr(gc, "mem_alloc")
        else None,
        log=print if cfg["verbose"] else None,
    )
    shed(("worker", "params_sink", "wire", "app"))
    w.t = make_transport(cfg, mqtt_bufs, n_features)  # pyright: ignore[reportAttributeAccessIssue]
    shed(("mqtt", "mqtt_packets"))
    if cfg["step_heartbeats"]:
        # steps longer than the host's liveness timeout: beat during them
        from edgeps_worker import alive

        alive.install(w, cfg["heartbeat_ms"])
    return w
