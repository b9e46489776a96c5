"""The example sensor modules (firmware/sensors/) with a fake I2C bus, pin and ADC.

Run by tests/firmware/test_sensor_examples.py under MicroPython and CPython
(argv[1]: the sensors folder); prints one line per check.
"""

import struct
import sys
from array import array

sys.path.append(sys.argv[1])

from edgeps_worker.data import LABEL_FLOAT  # noqa: E402
from edgeps_worker.ring import SensorSource  # noqa: E402


class FakeI2C:
    """An MPU-6050 that answers with the frames given, then fails."""

    def __init__(self, frames):
        self.frames = frames
        self.writes = []
        self.reads = []

    def writeto_mem(self, addr, reg, data):
        self.writes.append((addr, reg, bytes(data)))

    def readfrom_mem_into(self, addr, reg, buf):
        self.reads.append((addr, reg, len(buf)))
        if not self.frames:
            raise OSError(19)  # ENODEV: the chip is gone
        frame = self.frames.pop(0)
        for i in range(len(buf)):
            buf[i] = frame[i]


class FakePin:
    IN = 1
    PULL_UP = 2

    def __init__(self, *args, **kwargs):
        self.args = args
        self.level = 1  # pulled up: not pressed

    def value(self):
        return self.level


def frame(ax, ay, az, gx, gy, gz):
    return struct.pack(">7h", ax, ay, az, 1234, gx, gy, gz)


def show(xs):
    return " ".join(str(round(v, 3)) for v in xs)


import accel_gesture  # noqa: E402

bus = FakeI2C(
    [frame(16384, -16384, 8192, 131, -262, 0), frame(0, 0, -32768, 0, 0, 32767)]
)
button = FakePin()
g = accel_gesture.Gesture(bus, button)
x = array("f", bytes(24))
print("wake", bus.writes)
print("released", g.read(x), show(x))
button.level = 0
print("held", g.read(x), show(x))
print("gone", g.read(x))
print("reads", bus.reads[0])

# the module's own read(): the machine module builds the bus on first use
made = []


class FakeMachine:
    Pin = FakePin

    @staticmethod
    def I2C(n, scl=None, sda=None, freq=0):
        made.append((n, scl.args, sda.args, freq))
        return FakeI2C([frame(16384, 0, 0, 0, 0, 0)] * 3)


sys.modules["machine"] = FakeMachine  # type: ignore[assignment]
src = SensorSource(accel_gesture.read, 6, 4)
print("source", src.fill(5), src.count(), made)

import next_value  # noqa: E402

seq = [0.5, 1.0, 1.5, 2.0, 2.5, None, 3.0]
nv = next_value.NextValue(lambda: seq.pop(0), 3)
w = array("f", bytes(12))
out = []
for _ in range(7):
    label = nv.read(w)
    out.append("None" if label is None else str(label) + ":" + show(w))
print("next", " | ".join(out))
ramp = [0]


class FakeADC:
    def __init__(self, pin):
        self.pin = pin

    def read_u16(self):
        ramp[0] += 1
        return ramp[0] * 1000


FakeMachine.ADC = FakeADC  # type: ignore[attr-defined]
src = SensorSource(next_value.read, next_value.K, 16, LABEL_FLOAT)
# a source takes one reading per batch: the window fills over the first K
print("adc", sum(src.fill(1) for _ in range(20)), src.count(), show(src.ring.X[:8]))
