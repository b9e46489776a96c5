"""Sensor module: an MPU-6050 on I2C, labelled by a button held during a gesture.

Copy it next to the board's config as ``accel_gesture.py`` and set
``"sensor": "accel_gesture"`` with ``"model": "logistic:6"`` (or
``"mlp:6-16-2"``). Each reading is the 6 axes of the chip: acceleration
x, y, z in g and rotation x, y, z in degrees per second. The label is 1 while
the button is held (hold it during the gesture you teach), 0 otherwise;
there is no label (None) when the chip does not answer, and that reading is
skipped. In inference mode the button is ignored: the board predicts
gesture (1) or not (0) for every reading.

Wiring (change the constants for your board): SDA on GPIO 21, SCL on
GPIO 22, the chip's AD0 low (address 0x68), a push button from GPIO 0 (the
DevKit's BOOT button) to ground, read with the internal pull-up.
"""

SDA_PIN = 21
SCL_PIN = 22
BUTTON_PIN = 0
ADDR = 0x68
PWR_MGMT_1 = 0x6B  # write 0: leave sleep, internal clock
ACCEL_XOUT_H = 0x3B  # 14 bytes from here: accel x y z, temperature, gyro x y z
ACCEL_LSB = 16384.0  # per g at the default +-2 g range
GYRO_LSB = 131.0  # per deg/s at the default +-250 deg/s range
# offsets in those 14 bytes of the 6 big-endian int16 axes (temperature skipped)
AXES = (0, 2, 4, 8, 10, 12)


class Gesture:
    """The chip on an I2C bus and the label button on a pin."""

    def __init__(self, i2c, button, addr=ADDR):
        self.i2c = i2c
        self.button = button
        self.addr = addr
        self.buf = bytearray(14)
        i2c.writeto_mem(addr, PWR_MGMT_1, b"\x00")

    def read(self, xbuf):
        """The 6 axes into xbuf; 1 while the button is held, else 0; None: none."""
        b = self.buf
        try:
            self.i2c.readfrom_mem_into(self.addr, ACCEL_XOUT_H, b)
        except OSError:
            return None
        for i in range(6):
            o = AXES[i]
            v = (b[o] << 8) | b[o + 1]
            if v >= 32768:
                v -= 65536
            xbuf[i] = v / (ACCEL_LSB if i < 3 else GYRO_LSB)
        return 1 if self.button.value() == 0 else 0  # pressed pulls the pin low


_sensor = None


def read(xbuf):
    """The board's sensor interface; the chip is set up on the first reading."""
    global _sensor
    if _sensor is None:
        from machine import I2C, Pin

        i2c = I2C(0, scl=Pin(SCL_PIN), sda=Pin(SDA_PIN), freq=400000)
        _sensor = Gesture(i2c, Pin(BUTTON_PIN, Pin.IN, Pin.PULL_UP))
    return _sensor.read(xbuf)
