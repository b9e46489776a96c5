"""ESP32 start-up: join Wi-Fi from config.json (bounded retries) before main.py runs.

Other ports (unix) skip the radio; main.py calls ``wifi_connect`` again
whenever the MQTT link has to be rebuilt, so a board that booted without
Wi-Fi recovers on its own.
"""

import sys
import time


def wifi_connect(ssid, password, timeout_ms=20000, tries=3):
    """Connect the station interface; True once it has an address."""
    import network  # type: ignore[import-not-found]

    wlan = network.WLAN(network.STA_IF)
    wlan.active(True)
    if wlan.isconnected():
        return True
    for attempt in range(tries):
        try:
            wlan.connect(ssid, password)
        except OSError as exc:
            print("wifi: connect failed:", exc)
        start = time.ticks_ms()
        while time.ticks_diff(time.ticks_ms(), start) < timeout_ms:
            if wlan.isconnected():
                print("wifi: up", wlan.ifconfig()[0])
                return True
            time.sleep_ms(200)
        print("wifi: no link after try", attempt + 1)
        wlan.disconnect()
        time.sleep_ms(1000 * (attempt + 1))
    return False


def _boot():
    import json

    try:
        with open("config.json") as f:
            cfg = json.load(f)
    except (OSError, ValueError) as exc:
        print("boot: no usable config.json:", exc)
        return
    ssid = cfg.get("wifi_ssid", "")
    if ssid:
        wifi_connect(
            ssid, cfg.get("wifi_password", ""), cfg.get("wifi_timeout_ms", 20000)
        )


if sys.platform == "esp32":
    _boot()
