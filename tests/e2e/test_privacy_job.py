"""A local-DP job on a real broker: the workers add the noise, serve counts it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("dp_accounting")


@pytest.mark.integration
def test_local_dp_job_reports_its_epsilon(mosquitto, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Prepare: serve with --dp local and its budget; two workers that privatize
    metrics = tmp_path / "m.jsonl"
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
         "--job", "dp", "--policy", "asp", "--max-time", "20", "--json",
         "--quiet", "--target-accuracy", "0.999", "--dp", "local",
         "--dp-clip", "1", "--dp-noise", "4", "--dp-epsilon-budget", "30",
         "--metrics-out", str(metrics)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def worker(i: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "edgeps", "worker", "--broker", mosquitto.url,
             "--job", "dp", "--id", f"w{i}", "--emulated", f"sensors:{i}/2",
             "--dp-clip", "1", "--dp-noise", "4"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    workers = [worker(i) for i in range(2)]
    try:
        # Execute
        out, err = serve.communicate(timeout=90)
        codes = [w.wait(timeout=30) for w in workers]
    finally:
        for p in (serve, *workers):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    # Assert: the budget ended it, within the budget, and the records carry it
    assert serve.returncode == 0, err
    assert codes == [0, 0]
    summary = json.loads(out)
    p = summary["privacy"]
    assert summary["stop_reason"] == "privacy_budget", summary
    assert p["mode"] == "local" and p["steps"] == summary["updates"] > 0
    assert 0 < p["epsilon"] <= 30.0 and (p["sigma"], p["clip"]) == (4.0, 1.0)
    last = json.loads(metrics.read_text().splitlines()[-1])
    assert last["privacy"]["steps"] == p["steps"]
