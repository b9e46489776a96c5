"""The board application behind main.py: config, trainer, data, MQTT client, loop.

It lives in the package (not in main.py) so that ``edgeps flash --mpy``
precompiles it too. Only the network bring-up differs between ports: on the
ESP32 every (re)connect first makes sure Wi-Fi is up. Imports are
deliberately late: the parameter and gradient buffers are reserved first,
while the heap is still unfragmented.

A finished run (job done, max_iterations, a config error, out of memory)
ends in ``finish``: an exit status where there is an operating system, the
REPL on a board, which then stays idle until it is reset.
"""

import gc
import json
import sys
from binascii import unhexlify

# ports with an operating system to hand an exit status to
HOSTED = ("linux", "darwin", "win32")


def _is_esp32():
    return sys.platform == "esp32"


def finish(status):
    """End main.py with ``status``: sys.exit on an OS, back to the REPL on a board.

    On the ESP32 a SystemExit leaving main.py makes MicroPython soft-reset the
    board (pyexec's forced exit), so a finished board would rejoin, finish
    again forever; returning instead leaves
    it idle at the REPL until someone resets it.
    """
    if sys.platform in HOSTED:
        sys.exit(status)
    print("edgeps worker: finished, status " + str(status) + "; idle until reset")


def read_config(path):
    """Validate a config file, then unload the validator (its code is heap)."""
    from edgeps_worker import config

    cfg = config.load(path, _is_esp32())
    if sys.implementation.name == "micropython":
        import edgeps_worker

        edgeps_worker.config = None  # type: ignore[attr-defined]
        del sys.modules["edgeps_worker.config"]
        gc.collect()
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


def make_transport(cfg):
    """The firmware MQTT client; on an ESP32 it brings Wi-Fi back on connect."""
    from edgeps_worker.mqtt import MQTTClient

    class BoardMQTT(MQTTClient):
        def connect(
            self, will_topic=None, will_payload=None, will_retain=False, clean=True
        ):
            from edgeps_worker.wifi import wifi_connect

            if not wifi_connect(
                cfg["wifi_ssid"], cfg["wifi_password"], cfg["wifi_timeout_ms"], 1
            ):
                raise OSError("wifi down")
            super().connect(will_topic, will_payload, will_retain, clean)

    cls = BoardMQTT if _is_esp32() else MQTTClient
    ctx = None
    if cfg["tls_ca"]:
        from edgeps_worker.tlsconf import tls_context  # only then: code is heap

        ctx = tls_context(cfg["tls_ca"])
    return cls(
        cfg["worker_id"],
        cfg["broker_host"],
        cfg["broker_port"],
        cfg["username"] or None,
        cfg["password"] or None,
        cfg["keepalive"],
        # the host chunks to our max_chunk; anything far larger is refused
        # before a buffer for it is allocated (topic and MQTT header fit in 256)
        max_packet=cfg["max_chunk"] + 256,
        ssl_context=ctx,
        server_hostname=cfg["tls_hostname"] or cfg["broker_host"],
    )


def _live_heap():
    """Bytes of heap held by live objects (collects first; MicroPython only)."""
    gc.collect()
    return gc.mem_alloc()  # type: ignore[attr-defined]


def build(path, stop=None):
    """A ready Worker (not yet connected) for the config file at ``path``."""
    try:
        with open(path) as f:
            model = json.load(f).get("model", "")
    except (OSError, ValueError, AttributeError):
        model = ""
    buffers = None
    if isinstance(model, str) and model:
        from edgeps_worker import kernels, trainer

        try:
            buffers = trainer.reserve(kernels.Model(model).n_params)
        except ValueError:
            pass  # the validation below says what is wrong with the model
    cfg = read_config(path)
    from edgeps_worker import kernels, trainer, worker

    model = cfg["model"]
    net = trainer.KernelTrainer(
        model,
        build_source(cfg, kernels.parse_spec(model)[1][0], trainer.label_kind(model)),
        cfg["batch"],
        buffers,
    )
    w = worker.Worker(
        make_transport(cfg),
        net,
        cfg["job"],
        cfg["worker_id"],
        max_iterations=cfg["max_iterations"],
        stop=stop,
        heartbeat_ms=cfg["heartbeat_ms"],
        release_timeout_ms=cfg["release_timeout_ms"],
        max_chunk=cfg["max_chunk"],
        key=unhexlify(cfg["hmac_key"]) if cfg["hmac_key"] else None,
        mem_probe=_live_heap
        if cfg["memory_probe"] and hasattr(gc, "mem_alloc")
        else None,
        log=print if cfg["verbose"] else None,
    )
    if cfg["step_heartbeats"]:
        # steps longer than the host's liveness timeout: beat during them
        from edgeps_worker import alive

        alive.install(w, cfg["heartbeat_ms"])
    return w


def _drop_builders():
    """On MicroPython, free the bytecode of what only ran to build the worker."""
    if sys.implementation.name == "micropython":
        g = globals()
        for name in ("read_config", "build_source", "make_transport", "build"):
            g.pop(name, None)
        g.pop("_is_esp32", None)
        gc.collect()


def main(argv):
    path = argv[1] if len(argv) > 1 else "config.json"
    try:
        w = build(path)
    except (ValueError, OSError) as exc:
        print("edgeps worker: " + str(exc))
        return 2
    except MemoryError as exc:  # the model, batch or chunks do not fit this heap
        print("edgeps worker: out of memory at start-up: " + str(exc))
        return 2
    _drop_builders()
    print("edgeps worker " + w.wid + " job " + w.job + " " + w.trainer.model)
    try:
        reason = w.run()
    except ValueError as exc:
        # bad local data (a label outside the model's classes, ...): a restart
        # would fail the same way, so say why and stop
        print("edgeps worker: " + str(exc))
        return 2
    finally:
        close = getattr(w.trainer, "close", None)  # alive.StepHeartbeat's thread
        if close is not None:
            close()
    if reason == "memory":
        print("edgeps worker: out of memory; try a smaller max_chunk, batch or model")
    print("stopped: " + reason + " " + json.dumps(w.stats))
    return 0 if reason in ("done", "iterations", "stopped") else 1
