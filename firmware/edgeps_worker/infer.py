"""The board's inference mode: config ``"mode": "infer"``, no host needed.

``app.build`` hands a config in this mode here. The model comes from
flash (``model_file``, written by ``edgeps export --format micropython``);
each reading of the config's sensor module (the ``read(xbuf)`` the trainer
uses; a reading whose read returns None is skipped), or each row of an EPSD
or CSV ``data`` file in order, is predicted. Every prediction is printed (with
``verbose``) and, when a broker is configured, published with QoS 0 as
JSON ``{"id", "class", "value"}`` on ``edgeps/<job>/pred/<id>`` (PROTOCOL.md,
"Topics"). The broker is optional: a board with no host in reach predicts
and keeps trying to connect every ``RETRY_MS``. With a broker and no model
file (config ``fetch``) the board first takes the job's current model
(``edgeps_worker.fetch``, loaded only then).

``Inference`` shows ``app.main`` the face of a Worker (``wid``, ``job``,
``trainer.model``, ``run()``, ``stats``), so app needs no code of its own
for this mode and a training board never loads this module.
"""

import gc
import json
import struct
from array import array

from edgeps_worker import unload
from edgeps_worker.clock import sleep_ms, ticks_diff, ticks_ms

RETRY_MS = 10000


def topic_pred(job, wid):
    """The topic a board publishes its predictions on."""
    return "edgeps/" + job + "/pred/" + wid


class EpsdRows:
    """The rows of an EPSD file in order, as a sensor's ``read(xbuf)``."""

    def __init__(self, path, n_features):
        from edgeps_worker.data import FileSource

        src = FileSource(path)
        if src.n_features != n_features:
            src.close()
            raise ValueError(path + " does not fit the model (features)")
        self.f, self.n, self.i = src.f, src.n_samples, 0
        self.row_bytes = src.row_bytes
        self.lab = bytearray(4)

    def read(self, xbuf):
        """The next row into xbuf, its label; StopIteration after the last."""
        if self.i >= self.n:
            raise StopIteration
        self.f.seek(12 + self.i * self.row_bytes)
        self.f.readinto(memoryview(xbuf))
        self.f.readinto(self.lab)
        self.i += 1
        return struct.unpack("<i", self.lab)[0]

    def close(self):
        self.f.close()


class Inference:
    """Predicts each reading with the model from flash; publishes when it can."""

    def __init__(self, cfg, client):
        self.wid, self.job = cfg["worker_id"], cfg["job"]
        cfg["model_file"] = cfg.get("model_file", "model.bin")
        from edgeps_worker.predict import Model  # after a fetch: its code is gone

        self.net = net = Model(cfg["model_file"])
        if net.spec != cfg["model"]:
            raise ValueError(
                cfg["model_file"] + " holds " + net.spec + ", the config "
                "says model " + cfg["model"] + ": export the job's model again"
            )
        self.model = "infer " + net.spec
        self.trainer = self  # app.main prints trainer.model and calls its close
        self.client = client
        self.topic = topic_pred(self.job, self.wid)
        self.max_n = cfg["max_iterations"]
        self.period_ms = cfg.get("period_ms", 0)
        self.log = print if cfg["verbose"] else None
        self.rows = None
        if cfg["sensor"]:
            try:
                self.read = __import__(cfg["sensor"]).read
            except (ImportError, AttributeError):
                raise ValueError(
                    "sensor module " + cfg["sensor"] + " with a read(xbuf) not found"
                ) from None
            if net.spec.startswith("conv"):  # one sample a read: a window a stride
                from edgeps_worker.window import sensor_read

                self.read = sensor_read(self.read, net.spec, cfg.get("stride", 0))
        else:
            path = cfg["data"]
            if path.endswith(".csv"):  # its reader loads only then
                from edgeps_worker.csvtext import CsvRows as Rows
            else:
                Rows = EpsdRows
            self.rows = Rows(path, net.n_features)
            self.read = self.rows.read
        self.x = array("f", range(net.n_features))
        self.stats = {"predictions": 0, "skipped": 0, "published": 0}
        # memory_probe: the peak live heap (after a collection) between readings
        self.probe = cfg["memory_probe"] and hasattr(gc, "mem_alloc")
        if self.probe:
            self.stats["peak_heap"] = 0
        self._retry = None  # ticks of the last failed connect

    def attach(self, client):
        """Publish with this MQTT client (made after the model is loaded)."""
        self.client = client

    def _publish(self, text):
        c = self.client
        if c is None:
            return
        if not c.connected:
            now = ticks_ms()
            if self._retry is not None and ticks_diff(now, self._retry) < RETRY_MS:
                return
            try:
                c.connect()
                self._retry = None
            except OSError as exc:
                self._retry = now
                if self.log:
                    self.log("edgeps infer: no broker: " + str(exc))
                return
        try:
            c.publish(self.topic, text, qos=0)
            c.poll(0)  # keepalive pings, and anything the broker sent
            self.stats["published"] += 1
        except OSError:
            c.close_link()
            self._retry = ticks_ms()

    def step(self):
        """Take one reading and predict it; None when it had no reading."""
        try:
            label = self.read(self.x)
        except OSError:  # a sensor glitch: the next reading may do
            label = None
        if label is None:
            self.stats["skipped"] += 1
            return None
        out, name = self.net.predict(self.x)
        n = self.stats["predictions"]
        self.stats["predictions"] = n + 1
        if self.net.linear:
            msg = {"id": self.wid, "class": None, "value": out}
        else:
            msg = {"id": self.wid, "class": name, "value": out}
        text = json.dumps(msg)
        if self.log:
            self.log("pred " + str(n) + " " + text)
        self._publish(text)
        if self.probe:
            gc.collect()
            used = gc.mem_alloc()  # type: ignore[attr-defined]
            if used > self.stats["peak_heap"]:
                self.stats["peak_heap"] = used
        return out

    def run(self):
        """Predict until max_iterations predictions (0: forever) or the data ends."""
        try:
            while not self.max_n or self.stats["predictions"] < self.max_n:
                self.step()
                if self.period_ms:
                    sleep_ms(self.period_ms)
        except StopIteration:
            return "done"
        except KeyboardInterrupt:
            return "stopped"
        return "iterations"

    def close(self):
        if self.rows is not None:
            self.rows.close()
        if self.client is not None:
            self.client.close()


def build(path):
    """The inference runner for the config file at ``path``."""
    from edgeps_worker import config

    cfg = config.load(path)
    if cfg["broker_host"]:
        cfg["broker_host"] = config.broker_nodes(cfg["broker_host"], cfg["broker_port"])
    config = None
    # the validator and what it imported (the wire protocol, a training
    # board's kernels and the builder) are not used here: off the heap
    for name in ("config", "wire", "builder"):
        unload(name)
    gc.collect()
    path = cfg["model_file"] = cfg.get("model_file", "model.bin")
    want, have = cfg.get("fetch", "missing"), exists(path)
    client = None
    if cfg["broker_host"] and (want == "always" or want == "missing" and not have):
        from edgeps_worker import fetch  # loaded only to fetch

        client = fetch.board(cfg, have)
        fetch = None
        unload("fetch")
        gc.collect()
    elif not have:
        raise ValueError(path + " not found: export the job's model to it, or "
                         "set broker_host to fetch it from the job")  # fmt: skip
    # the model first (its parameters are the largest block), then MQTT
    runner = Inference(cfg, None)
    if cfg["broker_host"]:
        runner.attach(client or transport(cfg))
    return runner


def transport(cfg):
    from edgeps_worker import builder

    try:
        return builder.make_transport(cfg, builder.mqtt_buffers(cfg))
    finally:
        builder = None
        unload("builder")


def exists(path):
    try:
        open(path, "rb").close()
        return True
    except OSError:
        return False
