"""Board entry point: read the config, build trainer + data + MQTT client, run the loop.

On an ESP32 this runs after boot.py and reads config.json; on the unix port
run ``micropython firmware/main.py cfg.json`` (CPython works the same way).
Only the network bring-up differs: on the ESP32 every (re)connect first makes
sure Wi-Fi is up.
"""

import sys

from edgeps_worker import config, data, kernels, trainer, worker
from edgeps_worker.mqtt import MQTTClient


def _is_esp32():
    return sys.platform == "esp32"


class BoardMQTT(MQTTClient):
    """The firmware MQTT client that brings Wi-Fi back before each connect."""

    def __init__(self, cfg, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._cfg = cfg

    def connect(
        self, will_topic=None, will_payload=None, will_retain=False, clean=True
    ):
        from boot import wifi_connect

        cfg = self._cfg
        if not wifi_connect(
            cfg["wifi_ssid"], cfg["wifi_password"], cfg["wifi_timeout_ms"], 1
        ):
            raise OSError("wifi down")
        super().connect(will_topic, will_payload, will_retain, clean)


def build_source(cfg, n_features, label_kind):
    """The configured data source: a data file, or a sensor module's read()."""
    if cfg["sensor"]:
        mod = __import__(cfg["sensor"])
        src = data.SensorSource(
            mod.read, n_features, cfg["capacity"], label_kind, cfg["seed"]
        )
        src.fill(cfg["batch"])
        return src
    return data.open_source(
        cfg["data"], n_features, label_kind, cfg["capacity"], cfg["seed"]
    )


def build(cfg, stop=None):
    """A ready Worker (not yet connected) for a validated config."""
    model = cfg["model"]
    net = trainer.KernelTrainer(
        model,
        build_source(cfg, kernels.Model(model).n_features, trainer.label_kind(model)),
        cfg["batch"],
    )
    kwargs = {
        "port": cfg["broker_port"],
        "user": cfg["username"] or None,
        "password": cfg["password"] or None,
        "keepalive": cfg["keepalive"],
    }
    if _is_esp32():
        transport = BoardMQTT(cfg, cfg["worker_id"], cfg["broker_host"], **kwargs)
    else:
        transport = MQTTClient(cfg["worker_id"], cfg["broker_host"], **kwargs)
    log = print if cfg["verbose"] else None
    return worker.Worker(
        transport,
        net,
        cfg["job"],
        cfg["worker_id"],
        max_iterations=cfg["max_iterations"],
        stop=stop,
        heartbeat_ms=cfg["heartbeat_ms"],
        release_timeout_ms=cfg["release_timeout_ms"],
        max_chunk=cfg["max_chunk"],
        key=config.hmac_key_bytes(cfg),
        log=log,
    )


def main(argv):
    path = argv[1] if len(argv) > 1 else "config.json"
    try:
        cfg = config.load(path, _is_esp32())
        w = build(cfg)
    except (ValueError, OSError) as exc:
        print("edgeps worker: " + str(exc))
        return 2
    print(
        "edgeps worker " + cfg["worker_id"] + " job " + cfg["job"] + " " + cfg["model"]
    )
    reason = w.run()
    print("stopped: " + reason + " " + str(w.stats))
    return 0 if reason in ("done", "iterations", "stopped") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
