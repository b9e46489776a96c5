"""Where a local round's time goes: one `edgeps bench local` cell with a timeline.

Runs serve and emulate for one cell on a private mosquitto (as `edgeps bench
local` does) while a passive client notes each worker's PARAMS and UPDATE at
the broker, and prints the round (PARAMS to UPDATE: downlink, compute and
uplink) and the host's part (UPDATE to the next PARAMS) as one JSON line.

    python tools/local_round_phases.py 8 slowlinks fedbuff:k=4/h8/int8/int8 0
"""

from __future__ import annotations

import argparse
import json
import sys

from edgeps.lab.bench.local_phases import phases, timeline_run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workers", type=int)
    p.add_argument("scenario")
    p.add_argument("row", help="POLICY[/hH][/UP[/DOWN]], as `edgeps bench local`")
    p.add_argument("seed", type=int)
    p.add_argument("--max-time", type=float, default=60.0)
    p.add_argument("--emulate-args", default="")
    a = p.parse_args()
    args = argparse.Namespace(max_time=a.max_time, target_accuracy=None,
                              board="esp32", sleep_at_barrier=False, serve_args="",
                              emulate_args=a.emulate_args)  # fmt: skip
    run, events = timeline_run(a.workers, a.scenario, a.row, a.seed, args)
    got = phases(events)
    out = {
        "cell": [a.workers, a.scenario, a.row, a.seed],
        "time_to_target": run.broker.time_to_target,
        "error": run.broker.error,
        **{k: None if v is None else v.__dict__ for k, v in got.items()},
    }
    print(json.dumps(out))
    for k, v in got.items():
        print(f"{k}: {'-' if v is None else v.text()}", file=sys.stderr)
    return 0 if not run.broker.error else 1


if __name__ == "__main__":
    sys.exit(main())
