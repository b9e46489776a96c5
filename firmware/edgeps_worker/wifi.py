"""Wi-Fi for ESP32 boards: boot.py joins at start-up, the MQTT link at every connect.

Both import this module (precompiled with ``edgeps flash --mpy``), so the
board never compiles boot.py from source a second time nor reruns it. The
board's MQTT client class is made here (not in the unloaded builder), as it
lives as long as the worker.
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


def mqtt_client_class(cfg):
    """The MQTT client class whose every (re)connect first brings Wi-Fi up."""
    from edgeps_worker.mqtt import MQTTClient

    class BoardMQTT(MQTTClient):
        def connect(
            self, will_topic=None, will_payload=None, will_retain=False, clean=True
        ):
            if not wifi_connect(
                cfg["wifi_ssid"], cfg["wifi_password"], cfg["wifi_timeout_ms"], 1
            ):
                raise OSError("wifi down")
            super().connect(will_topic, will_payload, will_retain, clean)

    return BoardMQTT


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
