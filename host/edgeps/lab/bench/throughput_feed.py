"""The feeder side of `edgeps bench throughput`: a separate process that publishes.

It runs in its own process (spawned), so the host side being measured does not
share a GIL with it. It publishes QoS1 as fast as paho's inflight window allows:
real UPDATE messages for joined bench workers ("ps"), or the same bytes to a
plain topic ("raw").
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import numpy as np

JOB = "bench"
RAW_TOPIC = "edgeps-bench/raw"
N_WORKERS = 8
BIG_CHUNK = 1 << 20  # one message per update: compare equal payload sizes
DEADLINE = 60.0  # seconds per measurement, whatever happens


def update_payloads(
    n_params: int, n: int, chunk: int = 0, sessions: dict[str, int] | None = None
) -> list[list[bytes]]:
    """Encoded UPDATEs (each a list of chunks), round-robin over the bench workers.

    ``sessions`` are the ones the PS issued in its WELCOMEs (1 when not given:
    the same bytes on the wire for the raw measurements)."""
    from edgeps_worker import wire_host as wire

    rng = np.random.default_rng(7)
    grad = (rng.standard_normal(n_params) * 1e-4).astype("<f4").tobytes()
    out = []
    for i in range(n):
        w, k = i % N_WORKERS, i // N_WORKERS + 1
        wid = f"w{w:02d}"
        msgs = wire.encode_update(
            JOB,
            wid,
            (sessions or {}).get(wid, 1),
            k,
            k,
            0,
            0.001,
            32,
            0.5,
            grad,
            max_chunk=chunk or BIG_CHUNK,
        )
        out.append(msgs)
    return out


def _feed(
    host: str, port: int, mode: str, n_params: int, n: int, chunk: int, go: Any
) -> None:
    """Feeder process: QoS1 publishes as fast as paho's inflight window allows."""
    import threading
    import time

    import paho.mqtt.client as mqtt
    from edgeps_worker import wire_host as wire

    sessions: dict[str, int] = {}
    welcomed = threading.Event()

    def on_message(client: Any, userdata: Any, message: Any) -> None:
        try:
            msg = wire.decode(message.payload)
        except wire.WireError:
            return
        if msg.type == wire.WELCOME:
            sessions[msg.wid] = msg.session
            if len(sessions) == N_WORKERS:
                welcomed.set()

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    client.max_inflight_messages_set(100)
    client.on_message = on_message
    client.connect(host, port)
    client.loop_start()
    try:
        if mode == "ps":
            # join first: every UPDATE names the session its WELCOME issued
            client.subscribe(f"edgeps/{JOB}/down/+", qos=1)
            time.sleep(0.2)  # the SUBACK, before any WELCOME can be missed
            for w in range(N_WORKERS):
                hello = wire.encode_hello(
                    JOB, f"w{w:02d}", w + 1, w + 1, max_chunk=chunk or BIG_CHUNK
                )
                client.publish(wire.topic_up(JOB, f"w{w:02d}"), hello, qos=1)
            welcomed.wait(DEADLINE)
            client.unsubscribe(f"edgeps/{JOB}/down/+")
            topics = [wire.topic_up(JOB, f"w{i % N_WORKERS:02d}") for i in range(n)]
        else:
            topics = [RAW_TOPIC] * n
        updates = update_payloads(n_params, n, chunk, sessions)
        go.wait(DEADLINE)
        info = None
        for topic, chunks in zip(topics, updates, strict=True):
            for payload in chunks:
                info = client.publish(topic, payload, qos=1)
        if info is not None:
            info.wait_for_publish(DEADLINE)
    finally:
        client.disconnect()
        client.loop_stop()


def start_feeder(
    host: str, port: int, mode: str, n_params: int, n: int, chunk: int
) -> tuple:
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    proc = ctx.Process(target=_feed, args=(host, port, mode, n_params, n, chunk, go))
    proc.start()
    return proc, go


def stop_feeder(proc: Any) -> None:
    proc.join(10)
    if proc.is_alive():
        proc.terminate()
        proc.join(5)
