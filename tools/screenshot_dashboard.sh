#!/usr/bin/env bash
# A screenshot of the live dashboard during `edgeps demo` (8 sensors, 2 of them
# 4x slower), taken by headless chromium once the monitor has marked both
# stragglers persistent. Usage: tools/screenshot_dashboard.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
out=${1:-tools/img/dashboard.png}
chromium=${CHROMIUM:-$(command -v chromium || echo /usr/bin/chromium)}
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
profile=$(mktemp -d)

"$py" -m edgeps demo --quiet --dashboard "127.0.0.1:$port" --dashboard-linger 0 \
    --target-accuracy 0.99 --max-time 40 >/dev/null 2>&1 &
demo=$!
trap 'kill "$demo" 2>/dev/null || true; wait "$demo" 2>/dev/null || true; rm -rf "$profile"' EXIT

"$py" - "$port" <<'PY'
import json, sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/api/state"
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        state = json.load(urllib.request.urlopen(url, timeout=2))
    except OSError:
        state = {}
    classes = [w["class"] for w in state.get("workers", {}).values()]
    if len(classes) == 8 and classes.count("persistent") == 2 and state["elapsed"] > 6:
        sys.exit(0)
    time.sleep(0.2)
sys.exit("the demo's dashboard never showed 8 boards with 2 persistent stragglers")
PY

sandbox=()
[ "$(id -u)" -eq 0 ] && sandbox=(--no-sandbox)
"$chromium" --headless "${sandbox[@]}" --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run \
    --user-data-dir="$profile" --hide-scrollbars --window-size=1400,480 \
    --virtual-time-budget=2000 --screenshot="$out" "http://127.0.0.1:$port/" 2>/dev/null
echo "wrote $out"
