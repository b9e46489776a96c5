"""The simulator's shaped links: the emulator's ``LinkPipe``, real message sizes.

A board whose profile has a link rate (``edgeps.netem.links``) gets one
``LinkPipe`` per direction, the class the emulator's relay shapes real bytes
with. A message costs the bytes of the MQTT PUBLISH packets that carry it:
the wire's chunks as the host wire encoder (``edgeps_worker.wire_host``)
frames them at the emulator's chunk size, each in the MQTT PUBLISH packet
the board's own client encodes (``edgeps_worker.mqtt_packets``); an UPDATE
body has the length of the job's ``--compress`` code, a PARAMS body that of
its ``--compress-down`` code. Not priced:
PUBACKs, pings, the retained MODEL, the CONNECT and SUBSCRIBE of a (re)join.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from edgeps_worker import mqtt_packets, wire, wire_host

from edgeps.codecs import parse_compress
from edgeps.kernels import params_codec
from edgeps.netem.links import link_shape
from edgeps.netem.shaping import LinkPipe
from edgeps.workloads.scenarios import WorkerProfile

EMULATED_CHUNK = 1 << 16  # the max_chunk `edgeps emulate` announces in its HELLO
SIM_JOB = "sim"


def _publishes(topic: str, chunks: list[bytes] | list[bytearray]) -> int:
    """Bytes of the MQTT PUBLISH packets (QoS 1) that carry these chunks."""
    return sum(len(mqtt_packets.publish_packet(topic, c, qos=1, pid=1)) for c in chunks)


@functools.lru_cache(maxsize=256)
def message_bytes(
    wid: str,
    n_params: int,
    model: str,
    max_chunk: int = EMULATED_CHUNK,
    compress: str = "f32",
    compress_down: str = "f32",
) -> dict[str, int]:
    """Bytes on the link of each message kind for one worker (no HMAC)."""
    zeros = np.zeros(n_params, dtype=np.float32)
    up, down = wire.topic_up(SIM_JOB, wid), wire.topic_down(SIM_JOB, wid)
    code = parse_compress(compress)
    body = bytes(code.update_bytes(n_params))
    update = wire_host.encode_update(SIM_JOB, wid, 1, 1, 1, 1, 0.0, 32, 0.0, body,
                                     dtype=code.code, max_chunk=max_chunk)  # fmt: skip
    down_code = params_codec.parse_code(compress_down)
    params = wire_host.encode_params(SIM_JOB, wid, 1, 1, 1,
                                     params_codec.encode(zeros, down_code),
                                     max_chunk=max_chunk, dtype=down_code)  # fmt: skip
    hello = wire_host.encode_hello(SIM_JOB, wid, 1, 1, model, max_chunk)
    heartbeat = wire.encode_heartbeat(SIM_JOB, wid, 1, 1)
    return {
        "update": _publishes(up, update),
        "params": _publishes(down, params),
        "hello": _publishes(up, [hello]),
        "heartbeat": _publishes(up, [heartbeat]),
    }


@dataclass
class SimLink:
    """One board's shaped link: a pipe each way and the size of each message."""

    up: LinkPipe  # board -> PS
    down: LinkPipe  # PS -> board
    sizes: dict[str, int]

    @classmethod
    def build(
        cls,
        wid: str,
        profile: WorkerProfile,
        n_params: int,
        model: str,
        rng: np.random.Generator,
        compress: str = "f32",
        compress_down: str = "f32",
    ) -> SimLink:
        shape = link_shape(profile)
        draw = rng.random
        sizes = message_bytes(wid, n_params, model, compress=compress,
                              compress_down=compress_down)  # fmt: skip
        return cls(LinkPipe(shape, draw), LinkPipe(shape, draw), sizes)

    def arrival(self, direction: str, kind: str, now: float) -> float:
        pipe = self.up if direction == "up" else self.down
        return pipe.arrival(now, self.sizes[kind])
