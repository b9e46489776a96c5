"""Exercise edgeps_worker.data (argv: data.bin data.csv); prints batches to compare."""

import sys
from array import array

from edgeps_worker import data, datafile, ring

rb = ring.RingBuffer(4, 3, data.LABEL_INT, seed=9)
for i in range(6):
    rb.add([i, i + 0.5, -i], i % 3)
# the two oldest samples were overwritten
print("ring", rb.count(), rb.added, list(rb.y), list(rb.X)[:3])
X = array("f", bytes(4 * 5 * 3))
y = array("i", bytes(4 * 5))
print("ringbatch", rb.batch(X, y, 5), list(y), list(X)[:6])

src = data.FileSource(sys.argv[1], seed=4)
X = array("f", bytes(4 * 6 * src.n_features))
y = array("i", bytes(4 * 6))
print("file", src.n_features, src.n_samples, src.batch(X, y, 6), list(y))
print("filex", " ".join(repr(v) for v in X[: src.n_features]))
src.close()

csv = datafile.open_source(sys.argv[2], 2, data.LABEL_INT, 8, 2)
X = array("f", bytes(4 * 3 * 2))
y = array("i", bytes(4 * 3))
print("csv", csv.count(), csv.batch(X, y, 3), list(y), list(X))

readings = [[1.0, 2.0], [float("nan"), 0.0], [3.0, 4.0]]


def read(xbuf):
    if not readings:
        return None
    r = readings.pop(0)
    xbuf[0], xbuf[1] = r[0], r[1]
    return 1


sensor = ring.SensorSource(read, 2, capacity=4, seed=3)
print("sensor", sensor.fill(10), sensor.count(), sensor.bad_readings)

for bad in ("missing.bin", sys.argv[2]):
    try:
        data.FileSource(bad)
        print("error none")
    except (OSError, ValueError) as exc:
        print("error", "OSError" if isinstance(exc, OSError) else "ValueError")
