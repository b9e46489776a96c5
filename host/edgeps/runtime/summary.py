"""Final summaries of a run: a table for people, a JSON object for scripts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from edgeps.observe.metrics import dumps
from edgeps.observe.privacy import privacy_line
from edgeps.runtime.checkpoint_log import checkpoint_line


@dataclass
class Summary:
    """The outcome of a run, as `edgeps serve --json` prints it."""

    policy: str
    stop_reason: str
    elapsed: float
    version: int
    accuracy: float | None
    updates: int
    updates_per_s: float
    max_staleness: int
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    # rows past the limit, folded (see runtime.worker_rows); ids forgotten
    workers_omitted: dict[str, Any] = field(default_factory=dict)
    workers_forgotten: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, Any] = field(default_factory=dict)  # see runtime.accounting
    broker: dict[str, Any] = field(default_factory=dict)
    releases: dict[str, Any] = field(default_factory=dict)  # Outbox.stats()
    inbound: dict[str, Any] = field(default_factory=dict)  # see runtime.inbound
    first_update: float | None = None  # seconds from the start to the first applied
    state: str = "learning"  # edgeps.core.divergence: learning, diverging, backed off
    advice: str = ""  # what happened and what to change, when not learning
    # --dp: {epsilon, delta, sigma, clip, steps, mode, budget} (observe.privacy)
    privacy: dict[str, Any] = field(default_factory=dict)
    # {spec, kind, in_shape, architecture, params, macs} (edgeps.model.architecture)
    model: dict[str, Any] = field(default_factory=dict)
    # --checkpoint: {path, saved, failed, last_saved_version, final_saved, last_error}
    checkpoints: dict[str, Any] = field(default_factory=dict)

    @property
    def checkpoint_lost(self) -> bool:
        """The final checkpoint was tried and not saved (serve exits 1)."""
        return self.checkpoints.get("final_saved") is False


def summary_dict(summary: Summary) -> dict[str, Any]:
    """The JSON form: policy, elapsed, accuracy, per-worker accepted/rejected, ..."""
    data = asdict(summary)
    data["elapsed"] = round(summary.elapsed, 3)
    data["updates_per_s"] = round(summary.updates_per_s, 2)
    return data


def summary_json(summary: Summary) -> str:
    return dumps(summary_dict(summary))


def summary_table(summary: Summary, operator: bool = True) -> str:
    """Per worker: accepted, rejected by reason, clock, class; then the overall line.

    ``operator``: also the broker's ($SYS) and the release fan-out's lines, for
    whoever runs the host; without it (the demo) they show only when something
    was dropped or overflowed.
    """
    profiles = any("profile" in w for w in summary.workers.values())
    head = (
        f"{'worker':<14} {'accepted':>8} {'rejected':>8} {'clock':>6} "
        f"{'max stale':>9}  {'state':<9} {'class':<11} "
        + (f"{'profile':<16} " if profiles else "")
        + "rejected by reason"
    )
    lines = [head, "-" * len(head)]
    for wid, w in sorted(summary.workers.items()):
        profile = f"{str(w.get('profile', '-')):<16} " if profiles else ""
        reasons = ", ".join(
            f"{k}={v}" for k, v in sorted(w.get("rejected_by_reason", {}).items())
        )
        lines.append(
            f"{wid:<14} {w.get('accepted', 0):>8} {w.get('rejected', 0):>8} "
            f"{w.get('clock', 0):>6} {w.get('max_staleness', 0):>9}  "
            f"{str(w.get('state', '?')):<9} {str(w.get('class', '?')):<11} "
            f"{profile}{reasons or '-'}"
        )
    omitted = summary.workers_omitted
    if omitted.get("count"):
        lines.append(
            f"... and {omitted['count']} more workers "
            f"({_counts(omitted.get('by_state', {}))}): accepted "
            f"{omitted.get('accepted', 0)}, rejected {omitted.get('rejected', 0)}"
        )
    acc = "n/a" if summary.accuracy is None else f"{summary.accuracy:.4f}"
    lines.append("-" * len(head))
    lines.append(
        f"policy {summary.policy}  accuracy {acc}  elapsed {summary.elapsed:.1f}s  "
        f"updates {summary.updates} ({summary.updates_per_s:.1f}/s)  "
        f"version {summary.version}  max staleness {summary.max_staleness}  "
        f"stop: {summary.stop_reason}"
    )
    m = summary.model
    if m:
        lines.append(
            f"model {m['spec']}: {m['architecture']}; {m['params']:,} params, "
            f"{m['macs']:,} MACs/sample"
        )
    if summary.first_update is not None:
        lines.append(
            f"first update applied at {summary.first_update:.1f}s: "
            f"{summary.elapsed - summary.first_update:.1f}s of training"
        )
    if summary.advice:
        lines.append(summary.advice)
    if summary.privacy:
        lines.append(privacy_line(summary.privacy))
    if checkpoint_line(summary.checkpoints):
        lines.append(checkpoint_line(summary.checkpoints))
    if summary.dropped:
        dropped = ", ".join(f"{k}={v}" for k, v in sorted(summary.dropped.items()))
        lines.append(f"dropped messages: {dropped}")
    if summary.workers_forgotten:
        lines.append(
            f"forgotten worker ids: {summary.workers_forgotten} "
            "(said HELLO and never pushed, or evicted to bound the registry)"
        )
    lines.extend(_unknown_and_broker(summary, operator))
    r = summary.releases
    if r.get("rounds") and operator:
        lines.append(
            f"releases: {r['rounds']} ({r['multi_rounds']} of several workers, "
            f"{r['shared_rounds']} shared), PARAMS {r['code']}; bytes published per "
            f"release of several workers {r['bytes_per_multi_round']:.0f}"
        )
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "-"


def _unknown_and_broker(summary: Summary, operator: bool = True) -> list[str]:
    """Senders the PS does not know; what the broker dropped; serve's inbox."""
    lines = []
    u = summary.unknown
    if u.get("rejected") or u.get("dropped"):
        lines.append(
            f"unknown senders: rejected {_counts(u.get('rejected_by_reason', {}))}; "
            f"dropped {_counts(u.get('dropped_by_reason', {}))}"
        )
    b = summary.broker
    if not operator and not (b.get("publish_dropped") or b.get("inbox_full")):
        b = {}  # nothing lost: the broker's line is for operators
    if b:
        sys_state = b.get("sys")
        dropped, held = b.get("publish_dropped"), b.get("store_messages")
        if sys_state == "ok" and (dropped is not None or held is not None):
            # a broker may publish one counter and not the other
            sys_text = ", ".join(
                (
                    "dropped publishes unknown" if dropped is None
                    else f"dropped {dropped} publishes",
                    "stored messages unknown" if held is None
                    else f"holds {held} messages",
                )
            )  # fmt: skip
        elif sys_state in ("ok", "no_counters"):
            sys_text = "published no drop/queue counters in $SYS"
        else:  # refused or unreadable
            sys_text = (
                "serve heard nothing on $SYS (an ACL refuses it, or the broker "
                "publishes none): what it dropped is unknown"
            )
        lines.append(
            f"broker: {sys_text}; serve's inbox overflowed {b.get('inbox_full', 0)}x"
        )
    return lines
