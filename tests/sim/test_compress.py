"""`edgeps simulate --compress`: the simulated link carries the encoded UPDATE sizes."""

from __future__ import annotations

import json
import struct

import pytest
from edgeps.cli import main
from edgeps.codecs import parse_compress
from edgeps.sim.links import message_bytes
from edgeps.sim.simulator import simulate
from edgeps.sim.types import SimConfig
from edgeps_worker import mqtt_packets
from edgeps_worker import wire_host as wire


@pytest.mark.parametrize("compress", ["f32", "f16", "int8", "topk:0.01"])
def test_update_size_is_the_encoded_body_in_its_publish(compress: str) -> None:
    # Prepare: one chunk (the emulator's 64 KB max_chunk), no HMAC
    n = 650
    body = parse_compress(compress).update_bytes(n)
    fields = struct.calcsize(wire.FIELDS[wire.UPDATE][0])  # 47 bytes in v3
    head = wire.PREFIX_LEN + len("sim") + len("w00") + fields
    topic = wire.topic_up("sim", "w00")
    publish = len(mqtt_packets.publish_packet(topic, bytes(head + body), qos=1, pid=1))

    # Execute
    sizes = message_bytes("w00", n, "mlp:x", compress=compress)

    # Assert
    assert sizes["update"] == publish
    assert sizes["params"] == message_bytes("w00", n, "mlp:x")["params"]


def _run(compress: str) -> dict:
    cfg = SimConfig(policy="dsp", scenario="homogeneous", n_workers=4, seed=0,
                    link_rate=250e3, link_delay=0.02, max_time=30.0,
                    compress=compress)  # fmt: skip
    return simulate(cfg).to_dict()


def test_compressed_uplink_moves_fewer_bytes_and_still_trains() -> None:
    # Execute
    f32, int8, topk = _run("f32"), _run("int8"), _run("topk:0.01")

    # Assert: bytes per update up fall as the code says; the model still learns
    def per_update(r: dict) -> float:
        up = sum(b[0] for b in r["link_bytes"].values())
        return up / max(1, r["applied"])

    assert per_update(int8) < 0.3 * per_update(f32)
    assert per_update(topk) < 0.06 * per_update(f32)
    assert int8["final_accuracy"] > 0.85 and topk["final_accuracy"] > 0.85


def test_simulate_cli_takes_compress(capsys: pytest.CaptureFixture[str]) -> None:
    # Execute
    code = main(["simulate", "--scenario", "homogeneous", "--workers", "2",
                 "--max-time", "5", "--compress", "int8", "--json"])  # fmt: skip

    # Assert
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["config"]["compress"] == "int8"


def test_simulate_cli_refuses_a_bad_codec(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--max-time", "1", "--compress", "zip"])
    assert code == 2 and "--compress" in capsys.readouterr().err


@pytest.mark.parametrize(("down", "ratio"), [("f16", 0.5), ("int8", 0.26)])
def test_compressed_releases_cost_their_encoded_size(down: str, ratio: float) -> None:
    # Execute: 4,000 parameters in one 64 KB chunk
    f32 = message_bytes("w00", 4000, "mlp:x")["params"]
    got = message_bytes("w00", 4000, "mlp:x", compress_down=down)["params"]

    # Assert: the body shrinks by the code's ratio, the header stays
    assert got == pytest.approx(ratio * f32, abs=120)


def test_a_board_computes_on_what_its_int8_release_decodes_to() -> None:
    # Prepare
    base = dict(policy="dsp", scenario="homogeneous", n_workers=4, seed=0,
                link_rate=250e3, link_delay=0.02, max_time=30.0)  # fmt: skip

    # Execute
    f32 = simulate(SimConfig(**base)).to_dict()  # type: ignore[arg-type]
    int8 = simulate(SimConfig(compress_down="int8", **base)).to_dict()  # type: ignore[arg-type]

    # Assert: fewer bytes down per release, the same data, still learning, and a
    # different trajectory (the workers' parameters are the quantized ones)
    def down_per_release(r: dict) -> float:
        return sum(b[1] for b in r["link_bytes"].values()) / max(1, r["applied"])

    assert down_per_release(int8) < 0.35 * down_per_release(f32)
    assert int8["final_accuracy"] > 0.85
    assert int8["trace"] != f32["trace"]
