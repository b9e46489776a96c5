"""The worker's JSON config: defaults, types, one validation for board and host.

``edgeps flash`` validates a config with the same function the board runs at
start-up, so a mistake shows on the host before anything is flashed. Keys
starting with "_" are comments and ignored.
"""

import json
from binascii import unhexlify

from edgeps_worker import wire
from edgeps_worker.kernels import parse_spec

# key -> (type, default); REQUIRED has no default
REQUIRED = object()
KEYS = {
    "job": (str, REQUIRED),
    "worker_id": (str, REQUIRED),
    "model": (str, REQUIRED),
    "broker_host": (str, REQUIRED),
    "broker_port": (int, 1883),
    "username": (str, ""),
    "password": (str, ""),
    "keepalive": (int, 30),
    "wifi_ssid": (str, ""),
    "wifi_password": (str, ""),
    "wifi_timeout_ms": (int, 20000),
    "data": (str, ""),
    "sensor": (str, ""),
    "capacity": (int, 256),
    "batch": (int, 16),
    "seed": (int, 1),
    "max_iterations": (int, 0),
    "heartbeat_ms": (int, 5000),
    "step_heartbeats": (bool, False),
    "release_timeout_ms": (int, 15000),
    "max_chunk": (int, 1024),
    "tls_ca": (str, ""),
    "tls_hostname": (str, ""),
    "hmac_key": (str, ""),
    "verbose": (bool, True),
    "memory_probe": (bool, False),
}
# (key, lowest allowed, highest allowed)
RANGES = (
    ("broker_port", 1, 65535),
    ("keepalive", 5, 3600),
    ("wifi_timeout_ms", 1000, 600000),
    ("capacity", 1, 1 << 20),
    ("batch", 1, 4096),
    ("max_iterations", 0, 1 << 30),
    ("heartbeat_ms", 100, 3600000),
    ("release_timeout_ms", 100, 3600000),
    ("max_chunk", 256, 65536),
)


def validate(raw, board=False):
    """Return the config with defaults filled in; ValueError lists every problem.

    ``board`` is True for an ESP32 target, which also needs Wi-Fi settings.
    """
    if not isinstance(raw, dict):
        raise ValueError("config must be a JSON object")
    problems = []
    cfg = {}
    # inference mode's keys and what a board does when its job is done
    # (defaults in edgeps_worker.infer and keep) and their values: in long
    # strings, which are not interned, so a training board's heap keeps none
    # of these names (a short str constant, a key of KEYS or a global's name
    # would stay there for good)
    extra = "mode model_file period_ms on_done fetch stride".split()
    for key in raw:
        if not isinstance(key, str) or (
            key not in KEYS and key[:1] != "_" and key not in extra
        ):
            problems.append("unknown key " + repr(key))
    for key in KEYS:
        typ, default = KEYS[key]
        if key not in raw:
            if default is REQUIRED:
                problems.append("missing key " + repr(key))
            else:
                cfg[key] = default
            continue
        v = raw[key]
        # JSON true/false must not pass for numbers, nor numbers for flags
        if type(v) is not typ:
            problems.append(key + " must be " + typ.__name__ + ", got " + repr(v))
            continue
        cfg[key] = v
    for key, lo, hi in RANGES:
        if key in cfg and type(cfg[key]) is int and not lo <= cfg[key] <= hi:
            problems.append(key + " must be in [" + str(lo) + ", " + str(hi) + "]")
    for key in ("job", "worker_id"):
        if type(cfg.get(key)) is str and not wire.valid_id(cfg[key]):
            problems.append(key + " must match [A-Za-z0-9_-]{1,32}")
    if type(cfg.get("model")) is str:
        try:
            parse_spec(cfg["model"])
        except ValueError as exc:
            problems.append(str(exc))
    modes = "train infer".split()
    infer = raw.get(extra[0], modes[0]) == modes[1]
    if raw.get(extra[0], modes[0]) not in modes:
        problems.append("mode must be train or infer")
    v = raw.get(extra[1])
    if v is not None and (type(v) is not str or not v):
        problems.append("model_file must be a file name")
    v = raw.get(extra[2])
    if v is not None and (type(v) is not int or not 0 <= v <= 3600000):
        problems.append("period_ms must be an int in [0, 3600000]")
    v = raw.get(extra[5])  # a conv1d sensor board's samples between windows
    if v is not None and (type(v) is not int or not 1 <= v <= 1 << 20):
        problems.append("stride must be an int in [1, 1048576]")
    for i, values in ((3, "predict keep stop"), (4, "missing always never")):
        values = values.split()
        if raw.get(extra[i], values[0]) not in values:
            problems.append(extra[i] + " must be one of " + ", ".join(values))
    for key in extra:
        if key in raw:
            cfg[key] = raw[key]
    # an inference board may predict without any broker
    if type(cfg.get("broker_host")) is str and (cfg["broker_host"] or not infer):
        port = cfg.get("broker_port")  # absent when of the wrong type
        try:
            broker_nodes(cfg["broker_host"], port if type(port) is int else 1883)
        except ValueError as exc:
            problems.append(str(exc))
    if cfg.get("password") and not cfg.get("username"):
        # MQTT 3.1.1 has no password without a user name [MQTT-3.1.2-22]:
        # brokers drop such a CONNECT, and the board would retry forever
        problems.append("a password needs a username")
    if not problems and (cfg["data"] == "") == (cfg["sensor"] == ""):
        problems.append("give exactly one of 'data' (a file) or 'sensor' (a module)")
    if board and not cfg.get("wifi_ssid"):
        problems.append("an ESP32 config needs wifi_ssid")
    key = cfg.get("hmac_key", "")
    if type(key) is str and key:
        # this board's own key, as `edgeps keys derive` writes it: 64 hex digits
        try:
            ok = len(key) == 64 and len(unhexlify(key)) == 32
        except ValueError:
            ok = False
        if not ok:
            problems.append("hmac_key must be the 64 hex digits of this board's key")
    if problems:
        raise ValueError("bad config: " + "; ".join(problems))
    return cfg


def broker_nodes(text, port):
    """The MQTT client's server: ``text`` as one host, or a tuple of (host,
    port) for the comma-separated nodes of one broker cluster, tried in turn
    (``host`` or ``host:port``; ``port`` where none is given)."""
    nodes = []
    for part in text.split(","):
        host, p = part.strip(), ""
        if ":" in host:
            host, _, p = host.rpartition(":")
            p = p or "0"  # "host:" names no port
        if not host:
            raise ValueError(
                "broker_host must name a host in every entry: " + repr(text)
            )
        n = port
        if p:
            try:
                n = int(p)
            except ValueError:
                n = 0
            if not 1 <= n <= 65535:
                raise ValueError(
                    "broker_host port must be in [1, 65535]: " + repr(part)
                )
        nodes.append((host, n))
    if len(nodes) == 1 and nodes[0][1] == port:
        return nodes[0][0]
    return tuple(nodes)


def load(path, board=False):
    """Read and validate a JSON config file."""
    try:
        with open(path) as f:
            raw = json.load(f)
    except OSError:
        raise ValueError("cannot read config file " + repr(path)) from None
    except ValueError:
        raise ValueError(repr(path) + " is not valid JSON") from None
    return validate(raw, board)
