"""Run boot.py's Wi-Fi (edgeps_worker.wifi) against a scripted ``network`` module.

argv: polls_until_up tries timeout_ms. Prints the result and the calls made.
"""

import sys

calls = []


class WLAN:
    """Comes up after a given number of isconnected() polls."""

    def __init__(self, iface):
        self.left = int(sys.argv[1])
        self.active_flag = False

    def active(self, flag):
        self.active_flag = flag

    def connect(self, ssid, password):
        calls.append("connect:" + ssid)

    def disconnect(self):
        calls.append("disconnect")

    def isconnected(self):
        if self.left < 0:
            return False
        self.left -= 1
        return self.left < 0

    def ifconfig(self):
        return ("10.0.0.7", "255.255.255.0", "10.0.0.1", "10.0.0.1")


class network:  # noqa: N801 - stands in for the module of that name
    STA_IF = 0
    WLAN = WLAN


sys.modules["network"] = network
from edgeps_worker import wifi  # noqa: E402

ok = wifi.wifi_connect("lab", "pw", int(sys.argv[3]), int(sys.argv[2]))
print("RESULT", ok, " ".join(calls))
