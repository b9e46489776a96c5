"""ESP32 start-up: join Wi-Fi from config.json (bounded retries) before main.py runs.

The code lives in edgeps_worker.wifi, which the MQTT link imports again on
every (re)connect to bring Wi-Fi back: nothing ever imports this file, so
the board compiles it once, at boot. Other ports (unix) skip the radio.
"""

import sys

if sys.platform == "esp32":
    from edgeps_worker import wifi

    wifi.join_from_config("config.json")
