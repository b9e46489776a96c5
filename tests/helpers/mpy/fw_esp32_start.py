"""Start the board files the way an ESP32 does, under the unix MicroPython binary.

Usage (cwd holding config.json): micropython fw_esp32_start.py FIRMWARE_DIR CYCLES

Like MicroPython's ESP32 port (ports/esp32/main.c, shared/runtime/pyexec.c)
it runs boot.py, then main.py, as files; a SystemExit out of either is a
forced exit and soft-resets the board (modules forgotten, both run again),
any other ending leaves the board at the REPL. ``sys.platform`` reads
"esp32", a scripted ``network`` module stands in for the radio, whose
link comes up at once, and ``machine.soft_reset()`` raises SystemExit as
the port's does. Prints one RESULT line.
"""

import sys

real_sys = sys
fw = sys.argv[1]
cycles = int(sys.argv[2])


class BoardSys:
    """The board's sys: platform esp32, no command line; the rest is real."""

    platform = "esp32"
    argv = []

    def __getattr__(self, name):
        return getattr(real_sys, name)


class WLAN:
    """One station interface, shared by every WLAN() like the real one."""

    connects = 0
    up = False

    def __init__(self, iface):
        pass

    def active(self, flag):
        pass

    def connect(self, ssid, password):
        WLAN.connects += 1
        WLAN.up = True

    def disconnect(self):
        WLAN.up = False

    def isconnected(self):
        return WLAN.up

    def ifconfig(self):
        return ("10.0.0.7", "255.255.255.0", "10.0.0.1", "10.0.0.1")


class network:  # noqa: N801 - stands in for the module of that name
    STA_IF = 0
    WLAN = WLAN


class machine:  # noqa: N801 - stands in for the module of that name
    @staticmethod
    def soft_reset():
        # the port's raises SystemExit as a forced exit: pyexec soft-resets
        raise SystemExit("machine.soft_reset()")


def fresh_modules():
    """What a soft reset leaves: nothing imported but the port's stand-ins."""
    for name in list(real_sys.modules):
        del real_sys.modules[name]
    real_sys.modules["sys"] = BoardSys()
    real_sys.modules["network"] = network
    real_sys.modules["machine"] = machine


def run_file(name):
    with open(fw + "/" + name) as f:
        src = f.read()
    exec(compile(src, name, "exec"), {"__name__": "__main__"})


runs = resets = 0
boot_imported = False
for _ in range(cycles):
    fresh_modules()
    runs += 1
    try:
        run_file("boot.py")
        run_file("main.py")
    except SystemExit as exc:
        print("soft reset:", exc)
        resets += 1
        continue
    except Exception as exc:  # pyexec prints it and goes on to the REPL
        print("main.py raised:", repr(exc))
    boot_imported = "boot" in real_sys.modules
    break
flags = (runs, resets, boot_imported, WLAN.connects)
print(f"RESULT runs={flags[0]} resets={flags[1]} boot_imported={flags[2]}", end="")
print(f" wlan_connects={flags[3]}")
