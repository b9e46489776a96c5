"""Every refusal is charged to a worker id or to `unknown`: pure logic, coordinator."""

from __future__ import annotations

from collections import Counter

from edgeps.observe.prometheus import Exporter
from edgeps.observe.state import LatestState
from edgeps.runtime.accounting import UNKNOWN, Accounting
from edgeps.runtime.summary import summary_dict, summary_table
from edgeps_worker import wire_host as wire

from tests.runtime.test_coordinator import JOB, _coordinator, _push


def _accounting(known: set[str]) -> Accounting:
    return Accounting(JOB, lambda wid: wid in known)


def test_source_is_the_topic_worker_when_known_else_unknown() -> None:
    acc = _accounting({"w1"})
    assert acc.source(wire.topic_up(JOB, "w1")) == "w1"
    assert acc.source(wire.topic_up(JOB, "ghost")) == UNKNOWN  # never joined
    assert acc.source(wire.topic_up("other", "w1")) == UNKNOWN  # another job
    assert acc.source("edgeps/jc/up/") == UNKNOWN
    assert acc.source("not/a/topic") == UNKNOWN


def test_after_feed_charges_only_what_was_gained() -> None:
    # Prepare
    acc = _accounting({"w1"})
    dropped: Counter[str] = Counter()

    # Execute: two drops on w1's topic, one on a ghost's, expiry in between
    dropped["hmac"] += 1
    acc.after_feed(wire.topic_up(JOB, "w1"), dropped)
    acc.after_feed(wire.topic_up(JOB, "w1"), dropped)  # nothing new: no charge
    dropped["expired"] = 4
    acc.resync(dropped)  # expiry has no sender
    dropped["short"] += 1
    acc.after_feed(wire.topic_up(JOB, "ghost"), dropped)
    dropped["hmac"] += 1
    acc.after_feed(wire.topic_up(JOB, "w1"), dropped)

    # Assert
    assert acc.dropped_of("w1") == {"hmac": 2}
    assert acc.unknown({})["dropped_by_reason"] == {"short": 1}


def test_unknown_merges_core_and_ingest_rejections() -> None:
    acc = _accounting(set())
    acc.rejected_at_ingest("ghost", "model_mismatch")
    u = acc.unknown({"unknown_worker": 2})
    assert u["rejected"] == 3
    assert u["rejected_by_reason"] == {"model_mismatch": 1, "unknown_worker": 2}


def test_sys_counters_are_read_and_bad_ones_counted() -> None:
    # Prepare
    acc = _accounting(set())

    # Execute
    acc.feed_sys("$SYS/broker/publish/messages/dropped", b"17")
    acc.feed_sys("$SYS/broker/store/messages/count", b"nope")
    acc.feed_sys("$SYS/broker/store/messages/count", b"-1")
    acc.feed_sys("$SYS/broker/uptime", b"5 seconds")  # not one of ours: ignored

    # Assert
    report = acc.broker([], inbox_full=3)
    assert report["sys"] == "ok"
    assert report["publish_dropped"] == 17
    assert report["store_messages"] is None
    assert report["sys_malformed"] == 2
    assert report["inbox_full"] == 3
    assert _accounting(set()).broker([], 0)["sys"] == "unreadable"
    heard = _accounting(set())
    heard.feed_sys("$SYS/broker/version", b"mosquitto version 2.0.11")
    assert heard.broker([], 0)["sys"] == "no_counters"
    refused = [
        "$SYS/broker/publish/messages/dropped",
        "$SYS/broker/store/messages/count",
        "$SYS/broker/store/messages/bytes",
    ]
    assert _accounting(set()).broker(refused, 0)["sys"] == "refused"


def test_coordinator_summary_lists_an_unknown_clients_junk_per_reason() -> None:
    # Prepare: w1 joins and pushes; a client that never joined sends junk
    coord, link = _coordinator()
    up = wire.topic_up(JOB, "w1")
    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1, model=f"linear:{99}"), 0.0)
    _push(coord, "w1", 1, 0, 0.1)
    ghost = wire.topic_up(JOB, "ghost")

    # Execute
    coord.handle(ghost, b"garbage", 0.2)
    coord.handle(ghost, wire.encode_hello(JOB, "ghost", 1, 1, model="mlp:4-2-3"), 0.3)
    _push(coord, "ghost", 1, 0, 0.4)  # an update without a hello
    coord.handle(up, b"EP" + bytes(60), 0.5)  # junk on w1's own topic
    coord.handle("$SYS/broker/publish/messages/dropped", b"5", 0.6)
    summary = coord.finish("stopped")
    record = coord.record(1.0)

    # Assert: junk and refusals of the unknown client, per reason, under unknown
    assert summary.unknown["rejected_by_reason"] == {
        "model_mismatch": 1,
        "unknown_worker": 1,
    }
    assert sum(summary.unknown["dropped_by_reason"].values()) == 1
    assert summary.workers["w1"]["accepted"] == 1
    assert summary.workers["w1"]["dropped"] == 1
    assert "ghost" not in summary.workers
    assert summary.broker["publish_dropped"] == 5
    assert record["unknown"] == summary.unknown
    assert summary_dict(summary)["unknown"] == summary.unknown
    assert "unknown senders: rejected model_mismatch=1, unknown_worker=1" in (
        summary_table(summary)
    )
    state = LatestState()
    state.publish(record)
    text = Exporter(state).render()[0].decode()
    assert (
        'edgeps_updates_rejected_total{reason="unknown_worker",worker="unknown"} 1.0'
        in text
    )
    assert 'edgeps_worker_messages_dropped_total{reason="' in text
    assert "edgeps_broker_publish_dropped_total 5.0" in text
