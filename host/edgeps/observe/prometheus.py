"""`/metrics`: the latest state in the Prometheus text format (prometheus-client).

A custom collector on a private registry turns the newest metrics record into
metric families at scrape time, so nothing is counted twice: the counters are
the parameter server's own (accepted and rejected per worker, dropped
messages, applied updates by staleness). Rejections and wire-level drops of
senders the PS does not know carry ``worker="unknown"``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from edgeps.observe.state import LatestState

# staleness (parameter versions) bucket bounds of edgeps_update_staleness
STALENESS_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
WORKER_STATES = ("joining", "live", "suspected", "dead")
CLASSES = ("normal", "transient", "persistent")


def staleness_histogram(counts: dict[str, int]) -> tuple[list[tuple[str, float]], int]:
    """Cumulative (le, count) buckets ending with +Inf, and the sum of staleness."""
    pairs = sorted((int(k), int(v)) for k, v in counts.items())
    buckets: list[tuple[str, float]] = []
    for bound in STALENESS_BUCKETS:
        buckets.append(
            (floatToGoString(bound), float(sum(v for s, v in pairs if s <= bound)))
        )
    buckets.append(("+Inf", float(sum(v for _, v in pairs))))
    return buckets, sum(s * v for s, v in pairs)


class StateCollector(Collector):
    """Reads a `LatestState` at each scrape; yields nothing before the first record."""

    def __init__(self, state: LatestState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        rec = self.state.latest()
        if rec is None:
            return
        workers: dict[str, dict[str, Any]] = rec.get("workers", {})
        info = GaugeMetricFamily(
            "edgeps_job_info",
            "The job, its sync policy and bound",
            labels=["job", "policy", "bound"],
        )
        info.add_metric(
            [
                str(rec.get("job", "")),
                str(rec.get("policy", "")),
                str(rec.get("bound", "")),
            ],
            1.0,
        )
        yield info
        applied = CounterMetricFamily(
            "edgeps_updates_applied", "Updates applied, per worker", labels=["worker"]
        )
        rejected = CounterMetricFamily(
            "edgeps_updates_rejected",
            "Updates rejected, per worker and reason",
            labels=["worker", "reason"],
        )
        clock = GaugeMetricFamily(
            "edgeps_worker_clock", "Applied pushes of the worker", labels=["worker"]
        )
        lag = GaugeMetricFamily(
            "edgeps_worker_staleness_clocks",
            "Clocks the worker is behind the fastest live worker",
            labels=["worker"],
        )
        waiting = GaugeMetricFamily(
            "edgeps_worker_waiting",
            "1 while the worker is held at the barrier",
            labels=["worker"],
        )
        phase = GaugeMetricFamily(
            "edgeps_worker_iteration_seconds",
            "Typical time of one iteration, by phase (performance monitor)",
            labels=["worker", "phase"],
        )
        unknown: dict[str, Any] = rec.get("unknown", {})
        rejections, drops = _per_source(workers, unknown)
        for (wid, reason), n in sorted(rejections.items()):
            rejected.add_metric([wid, reason], float(n))
        dropped = CounterMetricFamily(
            "edgeps_worker_messages_dropped",
            "Network messages dropped at ingest, per sender (worker or unknown) "
            "and reason",
            labels=["worker", "reason"],
        )
        for (wid, reason), n in sorted(drops.items()):
            dropped.add_metric([wid, reason], float(n))
        yield dropped
        for wid, w in sorted(workers.items()):
            applied.add_metric([wid], float(w.get("accepted", 0)))
            clock.add_metric([wid], float(w.get("clock", 0)))
            lag.add_metric([wid], float(w.get("staleness") or 0))
            waiting.add_metric([wid], 1.0 if w.get("waiting") else 0.0)
            for name, key in (("compute", "compute_s"), ("comm", "comm_s")):
                if w.get(key) is not None:
                    phase.add_metric([wid, name], float(w[key]))
        yield from (applied, rejected, clock, lag, waiting, phase)
        yield from self._counts(workers)
        yield from self._run(rec)

    def _counts(self, workers: dict[str, dict[str, Any]]) -> Iterator[Metric]:
        by_state = GaugeMetricFamily(
            "edgeps_workers", "Workers by state", labels=["state"]
        )
        by_class = GaugeMetricFamily(
            "edgeps_workers_by_class",
            "Live workers by straggler class (performance monitor)",
            labels=["class"],
        )
        states = [str(w.get("state")) for w in workers.values()]
        for s in sorted(set(WORKER_STATES) | set(states)):
            by_state.add_metric([s], float(states.count(s)))
        classes = [str(w.get("class")) for w in workers.values()]
        for c in CLASSES:
            by_class.add_metric([c], float(classes.count(c)))
        yield by_state
        yield by_class

    def _run(self, rec: dict[str, Any]) -> Iterator[Metric]:
        buckets, total = staleness_histogram(rec.get("staleness_counts", {}))
        yield HistogramMetricFamily(
            "edgeps_update_staleness",
            "Staleness of applied updates, in parameter versions",
            buckets=buckets,
            sum_value=float(total),
        )
        dropped = CounterMetricFamily(
            "edgeps_messages_dropped",
            "Network messages dropped, by reason",
            labels=["reason"],
        )
        for reason, n in sorted(rec.get("dropped", {}).items()):
            dropped.add_metric([reason], float(n))
        yield dropped
        yield from _broker(rec.get("broker", {}))
        yield from _inbound(rec.get("inbound", {}))
        gauges = (
            ("edgeps_model_version", "Parameter version", rec.get("version")),
            (
                "edgeps_accuracy",
                "Test accuracy of the current model",
                rec.get("accuracy"),
            ),
            (
                "edgeps_diverging",
                "1 while the job is seen diverging (edgeps.core.divergence), else 0",
                None if "state" not in rec else float(rec["state"] == "diverging"),
            ),
            (
                "edgeps_step_scale",
                "Share of the configured step after divergence back-offs",
                rec.get("step_scale"),
            ),
            (
                "edgeps_max_staleness",
                "Largest staleness of an applied update",
                rec.get("max_staleness"),
            ),
            (
                "edgeps_inbox_depth",
                "Messages waiting in the host's MQTT inbox",
                rec.get("inbox_depth"),
            ),
            (
                "edgeps_elapsed_seconds",
                "Seconds since the job started",
                rec.get("elapsed"),
            ),
            (
                "edgeps_privacy_epsilon",
                "Differential privacy spent: epsilon at the job's delta over every "
                "applied update (edgeps.observe.privacy); absent without --dp",
                privacy_epsilon(rec),
            ),
        )
        for name, doc, value in gauges:
            if value is not None:
                yield GaugeMetricFamily(name, doc, value=float(value))


def privacy_epsilon(rec: dict[str, Any]) -> float | None:
    """The record's epsilon; +Inf when it has --dp with no noise (null in JSON)."""
    privacy = rec.get("privacy")
    if not privacy:
        return None
    eps = privacy.get("epsilon")
    return math.inf if eps is None else float(eps)


def _per_source(
    workers: dict[str, dict[str, Any]], unknown: dict[str, Any]
) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """(worker, reason) -> rejected and dropped; a worker named unknown is summed."""
    rejections: Counter[tuple[str, str]] = Counter()
    drops: Counter[tuple[str, str]] = Counter()
    rows = [*workers.items(), ("unknown", unknown)]
    for wid, w in rows:
        for reason, n in w.get("rejected_by_reason", {}).items():
            rejections[(wid, reason)] += int(n)
        for reason, n in w.get("dropped_by_reason", {}).items():
            drops[(wid, reason)] += int(n)
    return rejections, drops


def _broker(broker: dict[str, Any]) -> Iterator[Metric]:
    """The broker's $SYS counters (when it publishes them) and whether it refused."""
    if not broker:
        return
    yield GaugeMetricFamily(
        "edgeps_broker_sys_unreadable",
        "1 if serve cannot read the broker's $SYS (refused, or an ACL)",
        value=1.0 if broker.get("sys") in ("refused", "unreadable") else 0.0,
    )
    if broker.get("publish_dropped") is not None:
        yield CounterMetricFamily(
            "edgeps_broker_publish_dropped",
            "Publishes the broker dropped at its queue/inflight limits ($SYS)",
            value=float(broker["publish_dropped"]),
        )
    if broker.get("store_messages") is not None:
        yield GaugeMetricFamily(
            "edgeps_broker_store_messages",
            "Messages held in the broker's store ($SYS)",
            value=float(broker["store_messages"]),
        )


def _inbound(inbound: dict[str, Any]) -> Iterator[Metric]:
    """Serve's inbound path (runtime.inbound): latency quantiles, inbox depth p99."""
    latency = GaugeMetricFamily(
        "edgeps_push_to_release_seconds",
        "Host-side time from a complete UPDATE to its release, by quantile",
        labels=["quantile"],
    )
    for q in ("50", "95", "99"):
        v = inbound.get(f"push_to_release_ms_p{q}")
        if v is not None:
            latency.add_metric([f"0.{q}"], float(v) / 1000.0)
    yield latency
    if inbound.get("inbox_depth_p99") is not None:
        yield GaugeMetricFamily(
            "edgeps_inbox_depth_p99",
            "99th percentile of the sampled inbox depth",
            value=float(inbound["inbox_depth_p99"]),
        )


class Exporter:
    """A private registry with one `StateCollector`; `render()` is a scrape."""

    def __init__(self, state: LatestState) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StateCollector(state))

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
