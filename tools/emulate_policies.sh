#!/bin/sh
# Sync policies on real MQTT: for each POLICY, a fresh `edgeps serve` and 8
# emulated sensors (scenario "stragglers": 2 of 8 are 4x slower) on one local
# mosquitto; prints time to the target accuracy and updates/s per policy.
#   tools/emulate_policies.sh [-s SCENARIO] [-t TARGET] [-a SERVE_ARGS] POLICY...
#   e.g. tools/emulate_policies.sh bsp ssp:3 dsp asp
#        tools/emulate_policies.sh -t 0.93 -a --staleness-aware dsp
set -eu
SCENARIO=stragglers
TARGET=0.9
EXTRA=""
while getopts "s:t:a:" opt; do
    case "$opt" in
        s) SCENARIO=$OPTARG ;;
        t) TARGET=$OPTARG ;;
        a) EXTRA=$OPTARG ;;
        *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-s SCENARIO] [-t TARGET] [-a SERVE_ARGS] POLICY..." >&2; exit 2; }
PY=${PYTHON:-python3}
MOSQUITTO=$(command -v mosquitto || echo /usr/sbin/mosquitto)
TMP=$(mktemp -d)
PORT=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nset_tcp_nodelay true\n' \
    "$PORT" > "$TMP/mosquitto.conf"
"$MOSQUITTO" -c "$TMP/mosquitto.conf" >/dev/null 2>&1 &
BROKER=$!
SERVE=""
cleanup() {
    [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null || true
    kill "$BROKER" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
sleep 0.5
URL=mqtt://127.0.0.1:$PORT
for POLICY in "$@"; do
    JOB=p$(printf '%s' "$POLICY" | tr -dc 'a-z0-9')
    "$PY" -m edgeps serve --broker "$URL" --job "$JOB" --policy "$POLICY" \
        --target-accuracy "$TARGET" --max-time 60 --json --quiet $EXTRA \
        > "$TMP/serve.json" 2>/dev/null &
    SERVE=$!
    sleep 1
    "$PY" -m edgeps emulate --broker "$URL" --job "$JOB" --workers 8 \
        --scenario "$SCENARIO" --json > /dev/null 2>&1
    wait "$SERVE" || true
    SERVE=""
    "$PY" -c "
import json, sys
d = json.load(open('$TMP/serve.json'))
print(f\"{sys.argv[1]:8s} accuracy {d['accuracy']:.3f}  elapsed {d['elapsed']:6.2f} s  \"
      f\"{d['updates_per_s']:6.1f} updates/s  max staleness {d['max_staleness']}  \"
      f\"({d['stop_reason']})\")" "$POLICY"
done
