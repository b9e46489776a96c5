#!/usr/bin/env bash
# Set up this checkout on a fresh Debian/Ubuntu machine and run the test suite.
# Extra arguments go to pytest, e.g. `bash tools/test.sh -m "not integration"`.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q mosquitto
fi
# the dashboard test opens the page in a real headless browser
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q chromium
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
.venv/bin/python -m pytest "$@"
