"""Under MicroPython: truncated and mutated messages raise only WireError.

Prints 'decoded N rejected M other 0' and exits 1 if anything else escaped.
"""

import random
import sys

from edgeps_worker import wire_host as wire

random.seed(7)
base = [
    wire.encode_update("job1", "w1", 2, 5, 3, 9, 0.5, 32, 0.25, b"\0" * 8)[0],
    wire.encode_heartbeat("job1", "w1", 2, 3, key=b"k"),
    wire.encode_bye("job1", "w1", 2, "lost"),
    wire.encode_model("job1", 7, "done", "m", 1, 2),
]
cases = []
for m in base:
    for n in range(len(m)):
        cases.append(m[:n])
for _ in range(3000):
    m = bytearray(base[random.getrandbits(2)])
    for _ in range(1 + random.getrandbits(2)):
        m[random.getrandbits(16) % len(m)] = random.getrandbits(8)
    cases.append(bytes(m))
ok = bad = other = 0
for c in cases:
    try:
        wire.decode(c)
        ok += 1
    except wire.WireError:
        bad += 1
    except Exception as e:
        other += 1
        print("escaped", type(e).__name__, e, c.hex())
r = wire.Reassembler(max_bytes=16, max_age=1, max_pending=1)
try:
    r.add(
        wire.decode(wire.encode_params("j", "w", 7, 2, 1, b"\0" * 64, max_chunk=80)[0]),
        0,
    )
except wire.WireError as e:
    print("size reason", e.reason)
print("decoded", ok, "rejected", bad, "other", other)
sys.exit(1 if other else 0)
