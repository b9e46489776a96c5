#!/bin/sh
# Sync policies on real MQTT: for each POLICY, a fresh `edgeps serve` and
# emulated sensors (scenario "stragglers": 2 of 8 are 4x slower) on one local
# mosquitto; prints time to the target accuracy and updates/s per policy.
#   tools/emulate_policies.sh [-s SCENARIO] [-t TARGET] [-m MAX_TIME] [-w WORKERS]
#                             [-a SERVE_ARGS] [-e EMULATE_ARGS] POLICY...
#   e.g. tools/emulate_policies.sh -t 0.93 bsp ssp:3 dsp asp kofn:auto
#        tools/emulate_policies.sh -a --staleness-aware dsp
#        tools/emulate_policies.sh -e "--link-rate 250kbit --link-delay 20ms" dsp
# Defaults: -s stragglers -t 0.93 -m 60 -w 8. It runs the edgeps of this
# checkout's .venv, else the one on PATH (EDGEPS=/path/to/edgeps overrides),
# and stops at the first failure with the failing command's errors.
set -eu
die() {
    echo "emulate_policies: $*" >&2
    exit 1
}
usage() {
    echo "usage:" >&2
    sed -n '5,6p' "$0" | sed 's/^#//' >&2
    exit 2
}
SCENARIO=stragglers
TARGET=0.93
MAX_TIME=60
WORKERS=8
EXTRA=""
EMULATE_EXTRA=""
while getopts "s:t:m:w:a:e:" opt; do
    case "$opt" in
        s) SCENARIO=$OPTARG ;;
        t) TARGET=$OPTARG ;;
        m) MAX_TIME=$OPTARG ;;
        w) WORKERS=$OPTARG ;;
        a) EXTRA=$OPTARG ;;
        e) EMULATE_EXTRA=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || usage

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${EDGEPS:-}" ]; then
    if [ -x "$ROOT/.venv/bin/edgeps" ]; then
        EDGEPS=$ROOT/.venv/bin/edgeps
    elif command -v edgeps >/dev/null 2>&1; then
        EDGEPS=$(command -v edgeps)
    else
        die "edgeps not found: no $ROOT/.venv/bin/edgeps and none on PATH" \
            "(pip install -e . in a venv, or set EDGEPS=/path/to/edgeps)"
    fi
fi
[ -x "$EDGEPS" ] || die "EDGEPS=$EDGEPS is not an executable file"
# the interpreter edgeps runs on, for the port pick and the JSON summary
PY=$(dirname "$EDGEPS")/python
[ -x "$PY" ] || PY=$(command -v python3) || die "python3 not found"
MOSQUITTO=$(command -v mosquitto || echo /usr/sbin/mosquitto)
[ -x "$MOSQUITTO" ] || die "mosquitto not found (apt-get install mosquitto)"

TMP=$(mktemp -d)
BROKER=""
SERVE=""
EMULATE=""
cleanup() {
    for pid in $EMULATE $SERVE $BROKER; do
        kill "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])") ||
    die "$PY could not pick a free port"
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nset_tcp_nodelay true\n' \
    "$PORT" > "$TMP/mosquitto.conf"
"$MOSQUITTO" -c "$TMP/mosquitto.conf" > "$TMP/mosquitto.log" 2>&1 &
BROKER=$!
if ! "$PY" - "$PORT" <<'EOF'
import socket, sys, time
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.2).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
EOF
then
    cat "$TMP/mosquitto.log" >&2
    die "mosquitto did not start listening on 127.0.0.1:$PORT"
fi
URL=mqtt://127.0.0.1:$PORT

show() {  # show the errors of a failed step, then stop
    echo "---- $1 (stderr) ----" >&2
    cat "$2" >&2
    die "$3"
}

for POLICY in "$@"; do
    JOB=p$(printf '%s' "$POLICY" | tr -dc 'a-z0-9' | cut -c1-30)
    # shellcheck disable=SC2086  # SERVE_ARGS is a list of flags
    "$EDGEPS" serve --broker "$URL" --job "$JOB" --policy "$POLICY" \
        --target-accuracy "$TARGET" --max-time "$MAX_TIME" --json --quiet $EXTRA \
        > "$TMP/serve.json" 2> "$TMP/serve.err" &
    SERVE=$!
    # the sensors wait for the job's MODEL, so no head start is needed; the
    # time limit keeps them from waiting forever for a serve that failed
    # shellcheck disable=SC2086  # EMULATE_ARGS is a list of flags
    "$EDGEPS" emulate --broker "$URL" --job "$JOB" --workers "$WORKERS" \
        --scenario "$SCENARIO" --max-time "$((${MAX_TIME%.*} + 30))" --json $EMULATE_EXTRA \
        > "$TMP/emulate.json" 2> "$TMP/emulate.err" &
    EMULATE=$!
    if ! wait "$SERVE"; then
        SERVE=""
        show "edgeps serve --policy $POLICY" "$TMP/serve.err" \
            "edgeps serve failed for policy $POLICY"
    fi
    SERVE=""
    if ! wait "$EMULATE"; then
        EMULATE=""
        show "edgeps emulate" "$TMP/emulate.err" "edgeps emulate failed for policy $POLICY"
    fi
    EMULATE=""
    "$PY" - "$POLICY" "$TMP/serve.json" <<'EOF' || show "edgeps serve --policy $POLICY" "$TMP/serve.err" "no summary from edgeps serve for $POLICY"
import json, sys
d = json.load(open(sys.argv[2]))
print(f"{sys.argv[1]:8s} accuracy {d['accuracy']:.3f}  elapsed {d['elapsed']:6.2f} s  "
      f"{d['updates_per_s']:6.1f} updates/s  max staleness {d['max_staleness']}  "
      f"({d['stop_reason']})")
EOF
done
