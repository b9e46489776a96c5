"""A stale shared copy parks no worker (a real mosquitto without ACLs).

Observed before: republishing a valid shared PARAMS of the current run,
captured earlier, made every worker whose RELEASE came after it wait its full
release timeout for a copy that never came again, and BSP stopped.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from edgeps_worker import wire_host as wire

from tests.e2e.test_hostile_clients import JOB, MASTER, Run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPLAY_S = 4.0  # how long the old copy is replayed


def first_whole_copy(raw: list[tuple[str, bytes]]) -> list[bytes]:
    """The chunks of the first shared copy the intruder saw whole."""
    topic = wire.topic_params(JOB)
    copies: dict[int, dict[int, bytes]] = {}
    for t, payload in raw:
        if t != topic:
            continue
        msg = wire.decode(payload)
        parts = copies.setdefault(msg.version, {})
        parts[msg.chunk_index] = payload
        if len(parts) == msg.chunk_count:
            return [parts[i] for i in sorted(parts)]
    return []


@pytest.mark.parametrize("policy,n", [("bsp", 4), ("dsp:rounds=8", 8)])
def test_a_replayed_old_shared_copy_parks_no_worker(
    mosquitto: Any, tmp_path: Any, policy: str, n: int
) -> None:
    # Prepare: keyed sensors; the intruder captured an early shared copy
    key_file = tmp_path / "master.key"
    key_file.write_bytes(MASTER)
    key_file.chmod(0o600)
    run = Run(mosquitto, policy, n, key_file=str(key_file), hmac_key=MASTER,
              max_chunk=256)  # fmt: skip
    try:
        captured = lambda: bool(first_whole_copy(list(run.intruder.raw)))  # noqa: E731
        assert wait_until(captured, 45.0), "no shared copy to replay"
        stale = first_whole_copy(list(run.intruder.raw))
        topic = wire.topic_params(JOB)
        stop = threading.Event()

        def replay() -> None:  # about 100 old copies a second
            while not stop.is_set():
                for chunk in stale:
                    run.intruder.client.publish(topic, chunk, qos=1)
                stop.wait(0.01)

        before = run.coord.server.version
        # Execute: the old copy is republished for 4 s (a parked worker waits
        # out its 15 s release timeout: the versions stall well within it)
        attacker = threading.Thread(target=replay)
        attacker.start()
        time.sleep(REPLAY_S)
        during = run.coord.server.version - before
        stop.set()
        attacker.join(10)
        went_on = wait_until(lambda: run.coord.server.version >= before + during + 5)
    finally:
        summary = run.finish()

    # Assert: rounds went on while the copy was replayed; nobody timed out
    timeouts = {w: r.stats.get("timeouts", 0) for w, r in run.emu.reports.items()}
    assert during >= 10 and went_on, (
        f"NOT HELD: {policy}: a replayed shared copy parked the job "
        f"({during} versions in {REPLAY_S:g} s; stop {summary.stop_reason})"
    )
    assert sum(timeouts.values()) == 0, (
        f"NOT HELD: {policy}: workers waited out their release timeout {timeouts}"
    )
    print(f"HELD: {policy}: {during} versions while an old copy was replayed")
