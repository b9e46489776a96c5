"""Wi-Fi for ESP32 boards: boot.py joins at start-up, the MQTT link at every connect.

Both import this module (precompiled with ``edgeps flash --mpy``), so the
board never compiles boot.py from source a second time nor reruns it.
"""

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


def join_from_config(path="config.json"):
    """boot.py's job: join the Wi-Fi named in the config file, if any."""
    import json

    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as exc:
        print("boot: no usable " + path + ":", exc)
        return False
    ssid = cfg.get("wifi_ssid", "")
    if not ssid:
        return False
    return wifi_connect(
        ssid, cfg.get("wifi_password", ""), cfg.get("wifi_timeout_ms", 20000)
    )
